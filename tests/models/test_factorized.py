"""The Factorized Transformer models (PA, SF): general copies, regions, onmt-main."""

import contextlib
import io
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
import yaml
from parameterized import parameterized

from ldr_opennmt import models
from ldr_opennmt.cli import analyze
from ldr_opennmt.errors import UserError
from ldr_opennmt.serving import folding
from tests import corpus, helpers

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SENTENCES = ["the big cell", "a host is here now", "spirit"]
DESIGNS = [("pa",), ("sf",)]


def _model(test, design, randomize=False, **kwargs):
    paths = corpus.write_corpus(os.path.join(test.get_temp_dir(), "corpus"), count=20)
    model = models.factorized_transformer(design, **dict(helpers.TINY, **kwargs))
    model.initialize(
        corpus.data_config(paths), params={"beam_width": 2, "maximum_decoding_length": 6}
    )
    model.create_variables()
    if randomize:
        helpers.randomize_weights(model, seed=11)
    return model


def _translate(model, label):
    return model.infer(helpers.source_features(model, SENTENCES, [label] * len(SENTENCES)))


class FactorizedTransformerTest(tf.test.TestCase):
    @parameterized.expand(DESIGNS)
    def test_regions_start_as_the_general_copy(self, design):
        model = _model(self, design)
        self.assertEqual(model.domain_regions(), 3)
        generic = _translate(model, "generic")
        for label in ("medical", "religious", "software"):
            output = _translate(model, label)
            self.assertAllEqual(output["tokens"], generic["tokens"])
            self.assertAllClose(output["log_probs"], generic["log_probs"], atol=1e-5)

    @parameterized.expand(DESIGNS)
    def test_unfold_copies_the_general_copy(self, design):
        model = _model(self, design, randomize=True)
        generic = _translate(model, "generic")
        self.assertNotAllClose(_translate(model, "medical")["log_probs"], generic["log_probs"])
        model.unfold()
        for label in ("medical", "software"):
            output = _translate(model, label)
            self.assertAllEqual(output["tokens"], generic["tokens"])
            self.assertAllClose(output["log_probs"], generic["log_probs"], atol=1e-5)

    def test_blocks_of_each_design(self):
        pa = _model(self, "pa")
        sf = _model(self, "sf")
        # PA: 4 projections x (1 encoder self + 2 decoder) attentions per layer.
        self.assertLen(pa.domain_layers(), 12)
        # SF: K and V of 3 attentions + 2 FFNs.
        self.assertLen(sf.domain_layers(), 8)
        self.assertEqual(sorted(sf.domain_weights()), [0, 1, 2])
        # The general copies (e.g. the F6 identity "adapter") are shared, not per region.
        specific = {v.ref() for v in sf.domain_variables()}
        adapters = [v for v in sf.weights if v.name.endswith("/adapter:0")]
        self.assertLen(adapters, 2)
        self.assertTrue(all(v.ref() not in specific for v in adapters))

    def test_reserved_regions_and_checkpoint_count(self):
        model = _model(self, "sf", num_reserved_regions=2)
        self.assertEqual(model.domain_regions(), 5)
        paths = corpus.write_corpus(os.path.join(self.get_temp_dir(), "c2"), count=5)
        data = dict(corpus.data_config(paths), domain_regions=2)
        other = models.factorized_transformer("sf", **helpers.TINY)
        with self.assertRaisesRegex(UserError, "3 domains declared .* but the model has 2"):
            other.initialize(data, params={})

    def test_parameters_command(self):
        stdout = io.StringIO()
        with contextlib.redirect_stdout(stdout):
            self.assertEqual(analyze.main(["parameters"]), 0)
        rows = {line.split("|")[1].strip(): line for line in stdout.getvalue().splitlines()[2:6]}
        self.assertRegex(rows["DF"], r"\| 1\.01 \|$")
        self.assertRegex(rows["SF"], r"\| 1\.13 \|$")
        self.assertRegex(rows["PA"], r"\| 1\.79 \|$")

    def test_refusals(self):
        with self.assertRaisesRegex(UserError, "unknown Factorized Transformer design 'df2'"):
            models.factorized_transformer("df2", **helpers.TINY)
        model = _model(self, "pa")
        with self.assertRaisesRegex(UserError, "cannot be folded"):
            folding.check_foldable(model)

    def test_domain_blocks_get_no_generic_gradient(self):
        """Procedure 1's generic pass trains the general copies, not the regions."""
        model = _model(self, "pa", randomize=True)
        features = helpers.source_features(model, SENTENCES, ["generic"] * 3)
        targets = [["la", "cellule", ""], ["un", "hote", "ici"], ["x", "", ""]]
        labels = model.labels_inputter.make_features(
            features={"tokens": tf.constant(targets), "length": tf.constant([2, 3, 1])}
        )
        with tf.GradientTape() as tape:
            outputs, _ = model(features, labels, training=True)
            loss = model.compute_loss(outputs, labels, training=True)[0]
        gradients = tape.gradient(loss, model.domain_variables())
        for variable, gradient in zip(model.domain_variables(), gradients):
            value = 0 if gradient is None else np.abs(tf.convert_to_tensor(gradient)).max()
            self.assertEqual(value, 0, variable.name)


@pytest.mark.e2e
class FactorizedOnmtMainTest(tf.test.TestCase):
    def test_train_infer_with_onmt_main(self):
        directory = self.get_temp_dir()
        paths = corpus.write_corpus(os.path.join(directory, "data"), count=30)
        config = {
            "model_dir": os.path.join(directory, "sf"),
            "data": corpus.data_config(paths),
            "params": {"optimizer": "Adam", "learning_rate": 0.003, "beam_width": 2},
            "train": {"batch_size": 16, "batch_type": "examples", "max_step": 4},
            "infer": {"batch_size": 8},
        }
        path = os.path.join(directory, "sf.yml")
        with open(path, "w") as f:
            yaml.safe_dump(config, f)
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONWARNINGS="ignore")
        onmt_main = os.path.join(os.path.dirname(sys.executable), "onmt-main")
        train = subprocess.run(
            [onmt_main, "--model", "model_defs/small/factorized_sf.py", "--config", path]
            + ["--auto_config", "train"],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env=env,
        )
        self.assertEqual(train.returncode, 0, train.stderr[-3000:])
        infer = subprocess.run(
            [onmt_main, "--config", path, "--auto_config", "infer"]
            + ["--features_file", paths["test_src"], paths["test_domain"]],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env=env,
        )
        self.assertEqual(infer.returncode, 0, infer.stderr[-3000:])
        with open(paths["test_src"]) as f:
            self.assertLen(infer.stdout.splitlines(), len(f.read().splitlines()))


if __name__ == "__main__":
    tf.test.main()
