"""The Factorized Transformer models (PA, SF, DF): general copies, regions, onmt-main."""

import contextlib
import io
import os
import subprocess
import sys
from unittest import mock

import numpy as np
import opennmt
import pytest
import tensorflow as tf
import yaml
from parameterized import parameterized

from ldr_opennmt import models
from ldr_opennmt.cli import analyze
from ldr_opennmt.errors import UserError
from ldr_opennmt.export import folding
from ldr_opennmt.layers import factorized
from tests import corpus, helpers

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SENTENCES = ["the big cell", "a host is here now", "spirit"]
DESIGNS = [("pa",), ("sf",), ("df",)]
#: The tiny DF's factorization size.
D_INNER = 8


def _new_model(design, **kwargs):
    sizes = dict(helpers.TINY, d_inner=D_INNER) if design == "df" else helpers.TINY
    return models.factorized_transformer(design, **dict(sizes, **kwargs))


def _model(test, design, randomize=False, params=None, **kwargs):
    paths = corpus.write_corpus(os.path.join(test.get_temp_dir(), "corpus"), count=20)
    model = _new_model(design, **kwargs)
    model.initialize(
        corpus.data_config(paths),
        params=dict({"beam_width": 2, "maximum_decoding_length": 6}, **(params or {})),
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
        df = _model(self, "df", num_reserved_regions=1)
        # DF: K and V of 3 attentions, 2 x 2 factorized FFN linears, 2 embedders.
        types = [type(layer).__name__ for layer in df.domain_layers()]
        self.assertEqual(types.count("DomainDense"), 6)
        self.assertEqual(types.count("FactorizedDense"), 4)
        self.assertEqual(types.count("FactorizedEmbedder"), 2)
        self.assertLen(types, 12)
        self.assertEqual(df.domain_regions(), 4)
        self.assertEqual({layer.num_regions for layer in df.domain_layers()}, {4})
        self.assertEqual(sorted(df.domain_weights()), [0, 1, 2, 3])

    def test_df_output_embedding_is_the_tied_target_embedding(self):
        model = _model(self, "df", randomize=True)
        embedder, output = model.labels_inputter, model.decoder.output_layer
        self.assertIsInstance(embedder, factorized.FactorizedEmbedder)
        self.assertIsInstance(model.features_inputter.word_inputter, factorized.FactorizedEmbedder)
        self.assertIsNot(model.features_inputter.word_inputter, embedder)
        self.assertIsInstance(output, factorized.FactorizedOutput)
        self.assertIs(output.embedder, embedder)
        self.assertEqual(model.share_embeddings, opennmt.models.EmbeddingsSharingLevel.NONE)
        self.assertEqual(output.units, embedder.vocabulary_size)
        self.assertEqual([v.name.split("/")[-1] for v in output.weights], ["bias:0"])
        self.assertEqual(embedder.embedding.shape, [embedder.vocabulary_size, D_INNER])
        # Every variable once in the model and in a checkpoint.
        self.assertLen({v.ref() for v in model.weights}, len(model.weights))
        path = tf.train.Checkpoint(model=model).write(os.path.join(self.get_temp_dir(), "ckpt"))
        saved = [n for n, _ in tf.train.list_variables(path) if n.endswith("VARIABLE_VALUE")]
        self.assertLen(saved, len(model.weights))
        tables = [n for n in saved if n.endswith("/embedding/.ATTRIBUTES/VARIABLE_VALUE")]
        self.assertCountEqual(
            tables,
            [
                "model/examples_inputter/features_inputter/word_inputter/embedding/"
                ".ATTRIBUTES/VARIABLE_VALUE",
                "model/examples_inputter/labels_inputter/embedding/.ATTRIBUTES/VARIABLE_VALUE",
            ],
        )
        # Teacher forcing: the logits are the decoder output times (W^C W_d)^T + b.
        features = helpers.source_features(model, SENTENCES, ["religious", "generic", "software"])
        targets = [["la", "cellule", ""], ["un", "hote", "ici"], ["x", "", ""]]
        labels = model.labels_inputter.make_features(
            features={"tokens": tf.constant(targets), "length": tf.constant([2, 3, 1])}
        )
        recorded = []
        call = factorized.FactorizedOutput.call

        def _record(layer, inputs, training=None):
            recorded.append(inputs)
            return call(layer, inputs, training=training)

        with mock.patch.object(factorized.FactorizedOutput, "call", _record):
            outputs, _ = model(features, labels, training=True)  # TINY: no dropout.
        self.assertLen(recorded, 1)
        self.assertEqual(outputs["logits"].shape[-1], embedder.vocabulary_size)
        for i, domain in enumerate(features["domain"].numpy()):
            weights = output.fold(int(domain))
            expected = np.dot(recorded[0][i], weights["kernel"]) + weights["bias"]
            self.assertAllClose(outputs["logits"][i], expected, atol=1e-4)

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
        rows = {line.split("|")[1].strip(): line for line in stdout.getvalue().splitlines()[2:10]}
        self.assertRegex(rows["Factorized DF"], r"\| 1\.01 \|$")
        self.assertRegex(rows["Factorized SF"], r"\| 1\.13 \|$")
        self.assertRegex(rows["Factorized PA"], r"\| 1\.79 \|$")
        # The baselines (issue 16): residual adapters with inner size 2048 and 5 domains.
        self.assertRegex(rows["Residual adapters"], r"\| 2\.32 \|$")
        for system in ("TTM", "ML", "AdvL"):
            self.assertRegex(rows[system], r"\| 1\.00 \|$")

    def test_refusals(self):
        with self.assertRaisesRegex(UserError, "unknown Factorized Transformer design 'df2'"):
            models.factorized_transformer("df2", **helpers.TINY)
        for d_inner in (None, 0, -3):
            with self.assertRaisesRegex(
                UserError, r"^the df Factorized Transformer needs d_inner > 0 \(the paper's 280\)"
            ):
                models.factorized_transformer("df", d_inner=d_inner, **helpers.TINY)
        with self.assertRaisesRegex(UserError, "d_inner is a parameter of the df .* not of sf"):
            models.factorized_transformer("sf", d_inner=8, **helpers.TINY)
        with self.assertRaisesRegex(UserError, "ties its target input and output embeddings"):
            models.FactorizedTransformer(
                "df", d_inner=8, share_target_embeddings=False, **helpers.TINY
            )
        for design in ("pa", "df"):
            model = _model(self, design)
            # Folds into a plain Transformer (exactness: tests/export/test_folding.py).
            self.assertIs(type(folding.fold(model, "medical")), opennmt.models.Transformer)
        with self.assertRaisesRegex(UserError, "no single kernel"):
            model.decoder.output_layer.kernel
        with self.assertRaisesRegex(UserError, "source embedding of FactorizedEmbedder is not"):
            model.features_inputter.embedding
        with self.assertRaisesRegex(UserError, "update_vocab is not supported"):
            model.transfer_weights(_model(self, "df"))

    @parameterized.expand([("df", 2), ("df", 1)])
    def test_beam_search_batch_equals_alone(self, design, beam_width):
        """A batch mixing domains translates each sentence as it would alone."""
        model = _model(self, design, randomize=True, params={"beam_width": beam_width})
        sentences = SENTENCES + ["red cell a host"]
        labels = ["religious", "medical", "generic", "software"]
        batch = model.infer(helpers.source_features(model, sentences, labels))
        for i, (sentence, label) in enumerate(zip(sentences, labels)):
            alone = model.infer(helpers.source_features(model, [sentence], [label]))
            length = alone["length"][0, 0]
            self.assertEqual(batch["length"][i, 0], length)
            self.assertAllEqual(batch["tokens"][i, 0, :length], alone["tokens"][0, 0, :length])
            self.assertAllClose(batch["log_probs"][i], alone["log_probs"][0], atol=1e-4)
        scores = [_translate(model, label)["log_probs"] for label in ("medical", "religious")]
        self.assertNotAllClose(scores[0], scores[1])
        self.assertNotAllClose(scores[0], _translate(model, "generic")["log_probs"])

    @parameterized.expand([("pa",), ("df",)])
    def test_domain_blocks_get_no_generic_gradient(self, design):
        """Procedure 1's generic pass trains the general copies, not the regions."""
        model = _model(self, design, randomize=True)
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


class ProjectionPathTest(tf.test.TestCase):
    """Which path of factorized.domain_matmul a model step takes (see its docstring for
    the measurements): Keras' training flag reaches every domain-specific projection."""

    def _op_types(self, model, features, labels, training):
        function = tf.function(lambda: model(features, labels=labels, training=training)[0])
        return [op.type for op in function.get_concrete_function().graph.get_operations()]

    def test_training_partitions_inference_selects(self):
        model, paths = helpers.build_model(self, "factorized_df")
        features, labels = helpers.training_batch(model, paths)
        training = self._op_types(model, features, labels, True)
        inference = self._op_types(model, features, labels, False)
        # Two partitions (rows, positions) per projection; the target embedder projects
        # twice (embedding and tied output layer).
        projections = training.count("DynamicPartition") // 2
        self.assertGreaterEqual(projections, len(model.domain_layers()))
        self.assertEqual(training.count("StatelessIf") + training.count("If"), 0)
        self.assertNotIn("DynamicPartition", inference)
        self.assertEqual(inference.count("StatelessIf") + inference.count("If"), projections)


@pytest.mark.e2e
class FactorizedOnmtMainTest(tf.test.TestCase):
    # Stock onmt-main with a model definition is tested by default on LDR
    # (tests/upstream/test_onmt_main.py) and domain mixing (tests/models/test_mixing.py); every
    # model definition's model builds in tests/experiments/test_systems.py. This one took
    # 2.5-5 minutes of CI.
    @helpers.skip_unless_full("2.5-5 minutes: a Factorized model trained and run by onmt-main")
    def test_train_infer_with_onmt_main(self):
        directory = self.get_temp_dir()
        paths = corpus.write_corpus(os.path.join(directory, "data"), count=30)
        config = {
            "model_dir": os.path.join(directory, "sf"),
            "data": corpus.data_config(paths),
            "params": {"optimizer": "Adam", "learning_rate": 0.003, "beam_width": 2},
            "train": {
                "batch_size": 16,
                "batch_type": "examples",
                "max_step": 4,
                # --auto_config would accumulate gradients up to 25,000 examples.
                "effective_batch_size": None,
            },
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
