import os

import numpy as np
import tensorflow as tf

from ldr_opennmt import domains, models
from ldr_opennmt.errors import UserError
from ldr_opennmt.inputters import DomainInputter, MultiDomainInputter, constant_label
from ldr_opennmt.layers import LDREmbedder
from tests import corpus, helpers


class InputtersTest(tf.test.TestCase):
    def _inputter(self, required=True, declared=True):
        paths = corpus.write_corpus(os.path.join(self.get_temp_dir(), "c"), count=5)
        word = LDREmbedder(8, 2) if required else __import__("opennmt").inputters.WordEmbedder(8)
        inputter = MultiDomainInputter(word, domains_required=required)
        inputter.asset_prefix = "source_"
        config = {"source_vocabulary": paths["src_vocab"]}
        if declared:
            config["domains"] = corpus.DOMAINS
        inputter.initialize(config)
        return inputter, paths

    def _write(self, name, lines):
        path = os.path.join(self.get_temp_dir(), name)
        with open(path, "w") as f:
            f.write("".join(line + "\n" for line in lines))
        return path

    def test_features(self):
        inputter, paths = self._inputter()
        dataset = inputter.make_inference_dataset([paths["test_src"], paths["test_domain"]], 100)
        features = next(iter(dataset))
        self.assertAllEqual(features["domain"], [0] * 2 + [1] * 2 + [2] * 2)
        self.assertEqual(features["ids"].shape[0], 6)
        self.assertEqual(inputter.num_outputs, 1)
        self.assertEqual(inputter.domains, corpus.DOMAINS)

    def test_serving_signature_takes_domain_names(self):
        inputter, _ = self._inputter()
        signature = inputter.input_signature()
        self.assertEqual(signature["domain"].dtype, tf.string)
        features = inputter.make_features(
            features={
                "tokens": tf.constant([["the", "cell"], ["a", ""]]),
                "length": tf.constant([2, 1]),
                "domain": tf.constant(["software", "generic"]),
            }
        )
        self.assertAllEqual(features["domain"], [2, domains.GENERIC_ID])

    def test_byte_order_marks_are_stripped(self):
        # Files saved by some editors start with U+FEFF: the source line, its label and the
        # target read as without it (TextLineDataset keeps it in line 1).
        inputter, paths = self._inputter()
        with open(paths["test_src"], encoding="utf-8") as f:
            lines = f.read().splitlines()
        with open(paths["test_domain"], encoding="utf-8") as f:
            labels = f.read().splitlines()
        source = self._write("bom.src", ["\ufeff" + lines[0]] + lines[1:])
        label_file = self._write("bom.domain", ["\ufeff" + labels[0]] + labels[1:])
        plain = next(
            iter(inputter.make_inference_dataset([paths["test_src"], paths["test_domain"]], 100))
        )
        marked = next(iter(inputter.make_inference_dataset([source, label_file], 100)))
        self.assertAllEqual(marked["ids"], plain["ids"])
        self.assertAllEqual(marked["domain"], plain["domain"])
        model, model_paths = helpers.build_model(self)
        target = [line for line in open(model_paths["train_tgt"], encoding="utf-8")]
        marked_target = self._write(
            "bom.tgt", ["\ufeff" + target[0].rstrip("\n")] + [t.rstrip("\n") for t in target[1:]]
        )
        batches = [
            next(
                iter(
                    model.examples_inputter.make_evaluation_dataset(
                        [model_paths["train_src"], model_paths["train_domain"]], tgt, batch_size=4
                    )
                )
            )
            for tgt in (model_paths["train_tgt"], marked_target)
        ]
        self.assertAllEqual(batches[0][1]["ids"], batches[1][1]["ids"])

    def test_unknown_label_file_line_value(self):
        inputter, paths = self._inputter()
        labels = self._write("bad.domain", ["medical"] * 5 + ["legal"])
        source = self._write("bad.src", ["cell"] * 6)
        with self.assertRaisesRegex(UserError, r"bad\.domain:6: unknown domain label 'legal'"):
            inputter.make_dataset([source, labels])

    def test_declared_domain_without_training_data(self):
        inputter, _ = self._inputter()
        source = self._write("two.src", ["cell", "host"])
        labels = self._write("two.domain", ["medical", "religious"])
        # Legitimate when fine-tuning on some domains: a warning, not an error.
        with self.assertLogs(level="WARNING") as logs:
            inputter.make_dataset([source, labels], training=True)
        self.assertIn("Domain 'software' is declared but no training sentence", logs.output[0])

    def test_label_file_missing(self):
        inputter, paths = self._inputter()
        with self.assertRaisesRegex(UserError, "nope.domain: domain label file not found"):
            inputter.make_dataset(
                [paths["test_src"], os.path.join(self.get_temp_dir(), "nope.domain")]
            )

    def test_source_without_labels(self):
        inputter, paths = self._inputter()
        with self.assertRaisesRegex(UserError, "expected a source file and an aligned"):
            inputter.make_dataset(paths["test_src"])

    def test_mixed_accepts_missing_labels_and_undeclared_domains(self):
        inputter, paths = self._inputter(required=False, declared=False)
        features = next(iter(inputter.make_inference_dataset(paths["test_src"], 100)))
        self.assertAllEqual(features["domain"], [domains.GENERIC_ID] * 6)
        labels = self._write("any.domain", ["whatever"] * 6)
        features = next(iter(inputter.make_inference_dataset([paths["test_src"], labels], 100)))
        self.assertAllEqual(features["domain"], [domains.GENERIC_ID] * 6)

    def test_domain_label_stands_for_a_constant_label_file(self):
        inputter, paths = self._inputter()
        self.assertEqual(constant_label("religious"), "domain:religious")
        for label, expected in (("domain:religious", 1), ("domain:generic", domains.GENERIC_ID)):
            features = next(iter(inputter.make_inference_dataset([paths["test_src"], label], 100)))
            self.assertAllEqual(features["domain"], [expected] * 6)
        with self.assertRaisesRegex(UserError, "unknown domain label 'legal'"):
            inputter.make_dataset([paths["test_src"], "domain:legal"])

    def test_domain_inputter_requires_declaration(self):
        with self.assertRaisesRegex(UserError, "declares no domains"):
            DomainInputter(required=True).initialize({})

    def test_source_not_utf8_with_a_label_file(self):
        inputter, _ = self._inputter()
        source = os.path.join(self.get_temp_dir(), "latin1.src")
        with open(source, "wb") as f:
            f.write(b"cell\nh\xf4te\n")
        labels = self._write("latin1.domain", ["medical"] * 2)
        with self.assertRaisesRegex(UserError, r"latin1\.src:2: not UTF-8 \(byte 0xf4"):
            inputter.make_dataset([source, labels], training=True)


class EmptyPairsTest(tf.test.TestCase):
    """Training pairs with an empty side: counted before training, dropped in tf.data."""

    def _data(self, **extra):
        paths = corpus.write_corpus(os.path.join(self.get_temp_dir(), "c"), count=5)
        data = corpus.data_config(paths)
        data.update(extra)
        # 15 pairs: an empty target at line 2 (a blank one at 7), an empty source at line 4.
        for key, blanks in (
            ("train_labels_file", {2: "", 7: " \t"}),
            ("train_features_file", {4: ""}),
        ):
            path = data[key] if key == "train_labels_file" else data[key][0]
            with open(path) as f:
                lines = f.read().splitlines()
            for number, line in blanks.items():
                lines[number - 1] = line
            corpus.write_lines(path, lines)
        return data

    def _model(self, data):
        model = models.ldr_transformer(domain_region_size=2, **helpers.TINY)
        model.initialize(data, params={})
        return model

    def _target_lengths(self, data, **kwargs):
        """The target lengths (with <s>) of one pass over the training dataset."""
        model = self._model(data)
        dataset = model.examples_inputter.make_training_dataset(
            data["train_features_file"], data["train_labels_file"], 100, single_pass=True, **kwargs
        )
        return sorted(int(n) for _, labels in dataset for n in labels["length"].numpy())

    def test_opennmt_keeps_empty_targets_and_we_drop_them(self):
        data = self._data(keep_empty_targets=True)
        lengths = self._target_lengths(data)
        # OpenNMT-tf's own length filter alone (and the source check, always on):
        # an empty target is trained on, its length being 1 (<s>).
        self.assertEqual(lengths[:2], [1, 1])
        self.assertLen(lengths, 14)
        data = self._data()
        with self.assertLogs("tensorflow", "WARNING") as logs:
            lengths = self._target_lengths(data)
        self.assertLen(lengths, 12)
        self.assertGreater(min(lengths), 1)
        self.assertIn(
            "%s: 2 of 15 target lines are empty (lines 2, 7): these pairs are dropped from "
            "training (data: keep_empty_targets: true keeps them)" % data["train_labels_file"],
            "\n".join(logs.output),
        )
        self.assertIn(
            "%s: 1 of 15 source lines are empty (line 4)" % data["train_features_file"][0],
            "\n".join(logs.output),
        )
        # With a maximum length too (OpenNMT-tf's constraint is kept).
        lengths = self._target_lengths(self._data(), maximum_labels_length=3)
        self.assertNotEmpty(lengths)
        self.assertTrue(all(1 < n <= 3 for n in lengths), lengths)

    @staticmethod
    def _domain_batches_data(paths, sizes):
        return {
            "domains": list(sizes),
            "source_vocabulary": paths["src_vocab"],
            "target_vocabulary": paths["tgt_vocab"],
            "domain_batches": True,
        }

    def test_domain_batches_drop_empty_targets(self):
        sizes = {"medical": 6, "religious": 6}
        directory = os.path.join(self.get_temp_dir(), "corpora")
        paths = corpus.write_corpus(directory, count=6)
        files = corpus.write_domain_corpora(directory, sizes)
        target = files["religious"][1]
        with open(target) as f:
            lines = f.read().splitlines()
        corpus.write_lines(target, lines[:2] + [""] + lines[3:])
        model = self._model(self._domain_batches_data(paths, sizes))
        dataset = model.examples_inputter.make_training_dataset(
            [[f[0] for f in files.values()], [constant_label(d) for d in sizes]],
            [f[1] for f in files.values()],
            4,
        )
        lengths = [int(n) for _, labels in dataset.take(40) for n in labels["length"].numpy()]
        self.assertGreater(min(lengths), 1)

    def test_domain_batches_differ_between_workers_with_one_seed(self):
        # Horovod: each worker builds its pipeline with the same --seed; the domain draws
        # of workers 0 and 1 must still be independent (each seeded run reproducible).
        sizes = {"medical": 8, "religious": 8, "software": 8}
        directory = os.path.join(self.get_temp_dir(), "workers")
        paths = corpus.write_corpus(directory, count=8)
        files = corpus.write_domain_corpora(directory, sizes)
        model = self._model(self._domain_batches_data(paths, sizes))

        def draws(shard_index):
            tf.random.set_seed(1)
            np.random.seed(1)
            dataset = model.examples_inputter.make_training_dataset(
                [[f[0] for f in files.values()], [constant_label(d) for d in sizes]],
                [f[1] for f in files.values()],
                2,
                num_shards=2,
                shard_index=shard_index,
            )
            return [int(features["domain"][0]) for features, _ in dataset.take(60)]

        worker0, worker1 = draws(0), draws(1)
        self.assertEqual(worker0, draws(0))  # Reproducible.
        self.assertEqual(worker1, draws(1))
        self.assertLess(sum(a == b for a, b in zip(worker0, worker1)), 40)  # 20 expected
        self.assertEqual(set(worker0), {0, 1, 2})

    def test_training_files_are_checked(self):
        data = self._data()
        with open(data["train_labels_file"], "ab") as f:
            f.write(b"\xc3(\n")
        with self.assertRaisesRegex(UserError, r"train\.tgt:16: not UTF-8 \(byte 0xc3 at byte 1"):
            self._target_lengths(data)
        data = self._data()
        with open(data["train_labels_file"], "a") as f:
            f.write("extra\n")
        # Was a RuntimeError traceback from OpenNMT-tf ("Parallel datasets do not have the
        # same size"), naming no file.
        with self.assertRaisesRegex(UserError, r"train\.tgt:16: extra target line \(16 lines"):
            self._target_lengths(data)
        with self.assertRaisesRegex(UserError, "^data: keep_empty_targets must be a bool, got"):
            self._model(self._data(keep_empty_targets="no"))


if __name__ == "__main__":
    tf.test.main()
