import collections
import os

import tensorflow as tf
import yaml
from parameterized import parameterized

from ldr_opennmt import domains, models
from ldr_opennmt.errors import UserError
from ldr_opennmt.inputters import constant_label
from ldr_opennmt.training import corpora
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


if __name__ == "__main__":
    tf.test.main()
