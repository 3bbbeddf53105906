import os

import tensorflow as tf

from ldr_opennmt import domains
from ldr_opennmt.errors import UserError
from ldr_opennmt.inputters import DomainInputter, MultiDomainInputter, constant_label
from ldr_opennmt.layers import LDREmbedder
from tests import corpus


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


if __name__ == "__main__":
    tf.test.main()
