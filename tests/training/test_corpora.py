import collections
import os

import tensorflow as tf
import yaml
from parameterized import parameterized

from ldr_opennmt import domains, models
from ldr_opennmt.errors import UserError
from ldr_opennmt.inputters import constant_label
from ldr_opennmt.training import corpora
from ldr_opennmt.training.runner import Runner
from tests import corpus, helpers

SIZES = {"medical": 40, "religious": 160, "software": 10}


class CorporaTest(tf.test.TestCase):
    def _data(self, sizes=None, **extra):
        directory = os.path.join(self.get_temp_dir(), "corpora")
        paths = corpus.write_corpus(directory, count=10)
        data = {
            "source_vocabulary": paths["src_vocab"],
            "target_vocabulary": paths["tgt_vocab"],
            "train_corpora": corpus.write_domain_corpora(directory, sizes or SIZES),
        }
        data.update(extra)
        return data

    def test_read_corpora_in_declared_order(self):
        data = self._data(domains=["software", "medical", "religious"])
        result = corpora.read_corpora(data, "train_corpora")
        self.assertEqual([c.domain for c in result], ["software", "medical", "religious"])
        self.assertEqual([c.size for c in result], [10, 40, 160])
        self.assertEqual(corpora.domain_names(data), ["software", "medical", "religious"])
        # Without a declaration, the corpora order is the domain order.
        self.assertEqual(corpora.domain_names(self._data()), list(SIZES))

    def test_example_files(self):
        result = corpora.read_corpora(self._data(), "train_corpora")
        features, labels = corpora.example_files(result)
        self.assertEqual(features[0], [c.source for c in result])
        self.assertEqual(features[1], [constant_label(d) for d in SIZES])
        self.assertEqual(labels, [c.target for c in result])
        features, labels = corpora.example_files(result[:1], classifier=True)
        self.assertEqual((features, labels), (result[0].source, "domain:medical"))
        # Plain strings: the expanded configuration survives yaml.dump/safe_load
        # (OpenNMT-tf's batch-size auto-tuning re-reads it in child processes).
        self.assertEqual(yaml.safe_load(yaml.dump({"f": features})), {"f": features})

    @parameterized.expand([(0.0,), (0.5,), (1.0,)])
    def test_batches_follow_the_sampling_formula(self, alpha):
        """Each batch comes from one domain, with P(i) = |C_i|^alpha / sum_j |C_j|^alpha."""
        data = self._data()
        result = corpora.read_corpora(data, "train_corpora")
        features, labels = corpora.example_files(result)
        data.update(
            domains=list(SIZES),
            train_features_file=features,
            train_labels_file=labels,
            domain_batches=True,
        )
        model = models.ldr_transformer(domain_region_size=2, **helpers.TINY)
        model.initialize(data, params={})
        tf.random.set_seed(1234)
        dataset = model.examples_inputter.make_training_dataset(
            features,
            labels,
            4,
            weights=corpora.sampling(result, alpha)[1],
            shuffle_buffer_size=100,
        )
        batches = 4000
        counts = collections.Counter()
        for batch_features, _ in dataset.take(batches):
            ids = batch_features["domain"].numpy()
            self.assertTrue((ids == ids[0]).all(), "a batch mixes domains: %s" % ids)
            counts[int(ids[0])] += 1
        expected = domains.sampling_probabilities(list(SIZES.values()), alpha)
        observed = [counts[i] / batches for i in range(len(SIZES))]
        # 4000 batches: one standard deviation is at most 0.008.
        self.assertAllClose(observed, expected, atol=0.03)

    def test_bad_input(self):
        with self.assertRaisesRegex(UserError, "domain_sampling_alpha must be >= 0"):
            corpora.sampling(corpora.read_corpora(self._data(), "train_corpora"), -0.5)
        data = self._data()
        open(data["train_corpora"]["software"][0], "w").close()
        with self.assertRaisesRegex(
            UserError, r"train\.software\.src: empty corpus for domain 'software'"
        ):
            corpora.read_corpora(data, "train_corpora")
        with self.assertRaisesRegex(
            UserError, "domain 'software' is not declared in data: domains"
        ):
            corpora.read_corpora(self._data(domains=["medical", "religious"]), "train_corpora")
        data = self._data()
        with open(data["train_corpora"]["medical"][1], "a") as f:
            f.write("extra\n")
        with self.assertRaisesRegex(UserError, r"train\.medical\.tgt:41: extra target"):
            corpora.read_corpora(data, "train_corpora")
        data = self._data()
        data["train_corpora"]["medical"] = ["nope.src", "nope.tgt"]
        with self.assertRaisesRegex(UserError, "medical: file not found: nope.src"):
            corpora.read_corpora(data, "train_corpora")

    def _replace_line(self, path, number, data):
        with open(path, "rb") as f:
            lines = f.read().split(b"\n")
        lines[number - 1] = data
        with open(path, "wb") as f:
            f.write(b"\n".join(lines))

    def test_not_utf8_is_refused_while_counting(self):
        # Invalid bytes were counted as lines and trained on as unknown words.
        for key, side in (("train_corpora", 0), ("train_corpora", 1), ("eval_corpora", 1)):
            data = self._data()
            data[key] = data.pop("train_corpora")
            path = data[key]["religious"][side]
            self._replace_line(path, 7, b"caf\xe9 cr\xe8me")
            with self.assertRaises(UserError) as context:
                corpora.read_corpora(data, key)
            self.assertEqual(
                str(context.exception), "%s:7: not UTF-8 (byte 0xe9 at byte 4 of the line)" % path
            )

    def test_empty_pairs_are_counted_per_file_before_training(self):
        data = self._data()
        source, target = data["train_corpora"]["medical"]
        for number in (3, 9):
            self._replace_line(target, number, b"")
        self._replace_line(source, 5, b"  ")
        with self.assertLogs("tensorflow", "WARNING") as logs:
            result = corpora.read_corpora(data, "train_corpora")
        self.assertEqual(
            logs.output,
            [
                "WARNING:tensorflow:%s: 1 of 40 source lines are empty (line 5): these pairs are "
                "dropped from training (nothing to encode)" % source,
                "WARNING:tensorflow:%s: 2 of 40 target lines are empty (lines 3, 9): these pairs "
                "are dropped from training (data: keep_empty_targets: true keeps them)" % target,
            ],
        )
        self.assertEqual([c.size for c in result], list(SIZES.values()))
        # The same corpora as evaluation data: reported, used as they are.
        data["eval_corpora"] = data.pop("train_corpora")
        with self.assertLogs("tensorflow", "WARNING") as logs:
            corpora.read_corpora(data, "eval_corpora")
        self.assertIn(
            "%s: 2 of 40 target lines are empty (lines 3, 9): evaluation data are used as they "
            "are" % target,
            logs.output[-1],
        )
        data["train_corpora"], data["keep_empty_targets"] = data.pop("eval_corpora"), True
        with self.assertLogs("tensorflow", "WARNING") as logs:
            corpora.read_corpora(data, "train_corpora")
        self.assertIn("kept for training (data: keep_empty_targets: true)", logs.output[-1])

    def test_corpus_of_empty_targets_is_refused(self):
        data = self._data()
        source, target = data["train_corpora"]["software"]
        corpus.write_lines(target, [""] * SIZES["software"])
        with self.assertRaisesRegex(
            UserError,
            r"train\.software\.tgt: every pair of domain 'software' \(data: train_corpora\) "
            r"has an empty source or target: nothing to train on",
        ):
            corpora.read_corpora(data, "train_corpora")

    def test_runner_checks_corpora_before_training(self):
        """ldr-main reads the corpora when it reads the configuration: before training."""
        data = self._data()
        target = data["train_corpora"]["software"][1]
        self._replace_line(target, 2, b"\xff")
        config = {"model_dir": os.path.join(self.get_temp_dir(), "model"), "data": data}
        with self.assertRaisesRegex(UserError, r"train\.software\.tgt:2: not UTF-8"):
            Runner(lambda: models.ldr_transformer(domain_region_size=2, **helpers.TINY), config)
        self.assertFalse(os.path.exists(config["model_dir"]))


if __name__ == "__main__":
    tf.test.main()
