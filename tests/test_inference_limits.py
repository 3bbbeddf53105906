"""Inference sources longer than ``params: maximum_source_length`` are truncated, with a
warning, in the dataset, ``Runner.infer`` and the SavedModel serving function alike."""

import json
import os

import tensorflow as tf

from ldr_opennmt import inputters
from ldr_opennmt.errors import UserError
from ldr_opennmt.training.runner import Runner
from tests import corpus, helpers

LIMIT = 4
LONG = "cell " * 30


class MaximumSourceLengthTest(tf.test.TestCase):
    def _model(self, limit=LIMIT):
        params = {"maximum_source_length": limit} if limit else None
        return helpers.build_model(self, "ldr_transformer", params=params)

    def test_default_comes_from_the_model(self):
        model, _ = self._model(limit=None)
        self.assertEqual(model.maximum_source_length, inputters.DEFAULT_MAXIMUM_SOURCE_LENGTH)
        self.assertEqual(
            model.features_inputter.maximum_source_length, inputters.DEFAULT_MAXIMUM_SOURCE_LENGTH
        )

    def test_inference_dataset_truncates_and_training_does_not(self):
        model, paths = self._model()
        source = os.path.join(self.get_temp_dir(), "long.src")
        labels = os.path.join(self.get_temp_dir(), "long.domain")
        corpus.write_lines(source, [LONG.strip(), "cell"])
        corpus.write_lines(labels, ["medical", "software"])
        dataset = model.examples_inputter.make_inference_dataset([source, labels], 2)
        features = next(iter(dataset))
        self.assertAllEqual(features["length"], [LIMIT, 1])
        self.assertEqual(features["ids"].shape[1], LIMIT)
        element = (tf.constant(LONG.strip()), tf.constant("medical"))
        trained = model.features_inputter.make_features(element=element, training=True)
        self.assertEqual(int(trained["length"]), 30)

    def test_runner_infer_counts_truncated_lines_and_translates_the_cut_source(self):
        model, paths = self._model()
        model_dir = os.path.join(self.get_temp_dir(), "model")
        checkpoint = tf.train.Checkpoint(model=model).write(os.path.join(model_dir, "ckpt-1"))
        config = {
            "model_dir": model_dir,
            "data": corpus.data_config(paths),
            "params": {
                "beam_width": 1,
                "maximum_decoding_length": 4,
                "maximum_source_length": LIMIT,
            },
            "infer": {"batch_size": 4},
        }
        source = os.path.join(self.get_temp_dir(), "infer.src")
        labels = os.path.join(self.get_temp_dir(), "infer.domain")
        words = LONG.split()
        corpus.write_lines(source, ["cell", " ".join(words), " ".join(words[:LIMIT])])
        corpus.write_lines(labels, ["medical"] * 3)
        output = os.path.join(self.get_temp_dir(), "infer.out")
        runner = Runner(helpers.FAMILIES["ldr_transformer"](), config)
        with self.assertLogs(tf.get_logger(), "WARNING") as logs:
            runner.infer([source, labels], predictions_file=output, checkpoint_path=checkpoint)
        self.assertRegex(
            "\n".join(logs.output),
            r"1 of 3 source lines of %s are longer than params: maximum_source_length \(4 tokens\)"
            r" and are truncated \(first: %s:2, 30 tokens\)" % (source, source),
        )
        # The predictions file may not be one of the inputs (it would be overwritten).
        with self.assertRaisesRegex(UserError, "is an input of this run"):
            runner.infer([source, labels], predictions_file=labels, checkpoint_path=checkpoint)
        self.assertEqual(corpus.read_lines(labels), ["medical"] * 3)
        translations = corpus.read_lines(output)
        self.assertLen(translations, 3)
        self.assertEqual(translations[1], translations[2])  # The cut source is translated.

    def test_saved_model_truncates_and_records_the_limit(self):
        model, _ = self._model()
        export_dir = os.path.join(self.get_temp_dir(), "export")
        model.export(export_dir)
        with open(os.path.join(export_dir, "assets.extra", "inference.json")) as f:
            self.assertEqual(
                json.load(f),
                {
                    "maximum_source_length": LIMIT,
                    "ignored_domain_labels": None,
                    "ensemble_refusal": None,
                },
            )
        serve = tf.saved_model.load(export_dir).signatures["serving_default"]
        words = LONG.split()
        full = serve(
            tokens=tf.constant([words]),
            length=tf.constant([len(words)], tf.int32),
            domain=tf.constant(["medical"]),
        )
        cut = serve(
            tokens=tf.constant([words[:LIMIT]]),
            length=tf.constant([LIMIT], tf.int32),
            domain=tf.constant(["medical"]),
        )
        self.assertAllEqual(full["tokens"], cut["tokens"])
        self.assertAllClose(full["log_probs"], cut["log_probs"], atol=1e-5)


if __name__ == "__main__":
    tf.test.main()
