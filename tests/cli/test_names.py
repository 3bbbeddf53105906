"""Names that become paths in ``ldr-main ... predict_domains``: two inputs never share an
output file, and no output replaces an input (refused before any work)."""

import os
import re
import shutil

import opennmt
import tensorflow as tf
import yaml

from ldr_opennmt import models
from ldr_opennmt.cli import main as cli
from tests import corpus, helpers

CLASSIFIER = """from ldr_opennmt import models


def model():
    return models.domain_classifier(8, 8, dropout=0.0)
"""


class PredictDomainsNamesTest(helpers.SharedDirTestCase):
    """A tiny untrained classifier (random weights): the command runs whole when not
    refused, so that a refusal missing would show as files overwritten."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        paths = corpus.write_corpus(os.path.join(cls.dir, "data"), count=4)
        cls.source = paths["test_src"]
        data = {"source_vocabulary": paths["src_vocab"], "domains": list(corpus.DOMAINS)}
        model = models.domain_classifier(8, 8, dropout=0.0)
        model.initialize(data, params={})
        model.create_variables()
        model_dir = os.path.join(cls.dir, "classifier")
        os.makedirs(model_dir)
        with open(os.path.join(model_dir, "model_description.py"), "w") as f:
            f.write(CLASSIFIER)
        opennmt.utils.checkpoint.Checkpoint(model, model_dir=model_dir).save(step=1)
        cls.config = os.path.join(cls.dir, "classifier.yml")
        with open(cls.config, "w") as f:
            yaml.safe_dump({"model_dir": model_dir, "data": data}, f)

    def _copy(self, *parts):
        """A copy of the test sources at ``dir/PARTS``; returns its path."""
        path = os.path.join(self.dir, *parts)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        shutil.copy(self.source, path)
        return path

    def _refused(self, out, features, regex, labels=None):
        argv = ["--config", self.config, "predict_domains", "--output_dir", out]
        argv += ["--features_file"] + features
        if labels:
            argv += ["--labels_file"] + labels
        return helpers.assert_cli_error(self, cli.main, argv, regex)

    def test_inputs_with_one_prediction_file_are_refused(self):
        # a/test.en and b/test.en both wrote out/test.pred: the second replaced the first.
        first = self._copy("a", "test.en")
        second = self._copy("b", "test.en")
        german = self._copy("a", "test.de")
        out = os.path.join(self.dir, "pred")
        for features in ([first, second], [first, german], [first, first]):
            regex = "^--features_file: %s and %s would both write their predictions to %s " % (
                re.escape(features[0]),
                re.escape(features[1]),
                re.escape(os.path.join(out, "test.pred")),
            )
            self._refused(out, features, regex)
            self.assertFalse(os.path.exists(out))

    def test_predictions_that_would_replace_an_input_are_refused(self):
        out = os.path.join(self.dir, "inputs")
        features = self._copy("inputs", "test.pred")
        other = self._copy("inputs", "other.en")
        labels = os.path.join(out, "classification.md")
        corpus.write_lines(labels, corpus.read_lines(os.path.join(self.dir, "data", "test.domain")))
        with open(features) as f:
            before = f.read()
        regex = "^--output_dir %s: the output %s would replace the input %s: " % (
            re.escape(out),
            re.escape(features),
            re.escape(features),
        )
        self._refused(out, [features], regex)
        with open(features) as f:
            self.assertEqual(f.read(), before)
        regex = "^--output_dir %s: the output %s would replace the input %s: " % (
            re.escape(out),
            re.escape(labels),
            re.escape(labels),
        )
        self._refused(out, [other], regex, labels=[labels])
        self.assertEqual(sorted(os.listdir(out)), ["classification.md", "other.en", "test.pred"])


if __name__ == "__main__":
    tf.test.main()
