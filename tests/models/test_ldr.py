"""LDR as its authors' released code builds it: the options of ``ldr_transformer`` and the
``ldr_transformer_released`` preset (one tiny model shared by the tests)."""

import os

import numpy as np
import opennmt
import tensorflow as tf
from parameterized import parameterized

from ldr_opennmt import models, probe, registry
from ldr_opennmt.errors import UserError
from ldr_opennmt.export import ct2_export, folding
from ldr_opennmt.layers import LayerwiseLDREmbedder, domain_scope, ldr_transform
from ldr_opennmt.models import procedure
from tests import corpus, helpers

RELEASED = "ldr_transformer_released"
TARGETS = ["le grand case", "un hostie est ici", "esprit"]
SOURCES = ["the big cell", "a host is here", "spirit"]


def _features(model, labels):
    return helpers.source_features(model, SOURCES, labels)


def _labels(model):
    return model.labels_inputter.make_features(
        features=helpers.padded_tokens([t.split() for t in TARGETS])
    )


def _logits(model, features, labels):
    """The teacher-forced logits (the tiny models have no dropout: a training pass without
    the beam search that an inference pass adds)."""
    outputs, _ = model(features, labels=labels, training=True)
    return outputs["logits"].numpy()


def _build(directory, model, seed=7):
    """Initializes, builds and randomizes :obj:`model` on the tests' corpus (as
    ``helpers.build_model`` does with a family's tiny model)."""
    paths = corpus.write_corpus(os.path.join(directory, "corpus"), count=20)
    model.initialize(
        corpus.data_config(paths),
        params={
            "beam_width": 1,
            "maximum_decoding_length": 6,
            "optimizer": "Adam",
            "learning_rate": 0.01,
        },
    )
    model.create_variables()
    helpers.randomize_weights(model, seed)
    return model, paths


def _every_transform(model):
    return [t for stack, _ in model.ldr_sides() for t in ldr_transform.transforms(stack)]


class ReleasedPresetTest(helpers.SharedDirTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        # Two layers, so that a transform sits between two layers on each side.
        model = registry.get(RELEASED).build_tiny(num_layers=2)
        cls.model, cls.paths = _build(cls.dir, model)
        cls.initial = helpers.snapshot(cls.model.weights)

    def setUp(self):
        super().setUp()
        for variable, value in zip(self.model.weights, self.initial):
            variable.assign(value)
        self.model.params.pop("domain_training", None)

    def test_the_preset_turns_every_released_option_on(self):
        model = self.model
        self.assertIsInstance(model, models.LayerwiseLDRTransformer)
        self.assertIsInstance(model.features_inputter.word_inputter, LayerwiseLDREmbedder)
        self.assertIsInstance(model.labels_inputter, LayerwiseLDREmbedder)  # target side
        for embedder in (model.features_inputter.word_inputter, model.labels_inputter):
            self.assertTrue(embedder.zero_domain_regions)
            self.assertEqual(embedder.embedding.shape[-1], 16)  # The whole model size.
        self.assertEqual(model.default_domain_training, procedure.SUMMED)
        # After the input and after each of the 2 layers, on both sides.
        for stack, _ in model.ldr_sides():
            self.assertEqual(
                [t.name for t in ldr_transform.transforms(stack)],
                ["ldr_input", "ldr_layer_0", "ldr_layer_1"],
            )
        self.assertLen(model.ldr_sides(), 2)
        domain = {v.ref() for v in model.domain_variables()}
        for transform in _every_transform(model):
            self.assertEqual(transform.num_regions, 3)
            for kernel in transform.domain_kernels:
                self.assertIn(kernel.ref(), domain)
        self.assertEqual(model.auto_config()["params"]["domain_training"], procedure.SUMMED)

    def test_every_transform_acts_and_is_trained_by_its_domain(self):
        model = self.model
        features = _features(model, ["medical", "religious", "medical"])
        labels = _labels(model)
        with tf.GradientTape() as tape:
            outputs, _ = model(_features(model, ["medical"] * 3), labels=labels, training=True)
            loss = model.compute_loss(outputs, labels, training=True)[0]
        transforms = _every_transform(model)
        self.assertLen(transforms, 6)
        kernels = [kernel for t in transforms for kernel in t.domain_kernels]
        gradients = dict(zip((k.ref() for k in kernels), tape.gradient(loss, kernels)))
        reference = _logits(model, features, labels)
        for transform in transforms:
            # A medical batch trains the medical kernel of every transform, and no other.
            medical = transform.domain_kernels[0]
            gradient = tf.convert_to_tensor(gradients[medical.ref()]).numpy()
            self.assertGreater(np.abs(gradient).max(), 0, transform.name)
            for other in transform.domain_kernels[1:]:
                gradient = tf.convert_to_tensor(gradients[other.ref()]).numpy()
                self.assertAllEqual(gradient, np.zeros(other.shape), other.name)
            # Each transform acts on its sentences' domain, and on no other sentence.
            medical.assign(tf.zeros_like(medical))
            changed = _logits(model, features, labels)
            self.assertNotAllClose(changed[[0, 2]], reference[[0, 2]], atol=1e-4)
            self.assertAllEqual(changed[1], reference[1])
            self.setUp()

    def test_decoding_steps_equal_the_training_pass(self):
        # The decoder's transforms read each step's target word (beam search's path) as
        # the teacher-forced pass reads the whole target.
        model = self.model
        features = _features(model, ["medical", "generic", "software"])
        labels = _labels(model)
        full = _logits(model, features, labels)
        with domain_scope(features["domain"]):
            source = model.features_inputter(features, training=False)
            memory, _, memory_length = model.encoder(
                source, sequence_length=features["length"], training=False
            )
            state = model.decoder.initial_state(memory=memory, memory_sequence_length=memory_length)
            lengths = labels["length"].numpy()
            for step in range(full.shape[1]):
                inputs = model.labels_inputter({"ids": labels["ids"][:, step]}, training=False)
                logits, state, _ = model.decoder(inputs, tf.constant(step), state=state)
                within = lengths > step  # (Past a target's end, the passes read padding.)
                self.assertAllClose(logits.numpy()[within], full[within, step], atol=1e-4)

    @parameterized.expand([(mode,) for mode in procedure.MODES])
    def test_a_training_step_in_every_mode(self, mode):
        model = self.model
        model.params["domain_training"] = mode
        features, labels = helpers.training_batch(model, self.paths, size=6)
        optimizer = model.get_optimizer()
        variables = model.trainable_weights
        before = helpers.snapshot(variables)
        loss, gradients = model.compute_gradients(features, labels, optimizer)
        optimizer.apply_gradients(zip(gradients, variables))
        self.assertTrue(np.isfinite(float(loss)))
        moved = {v.ref() for v, b in zip(variables, before) if not np.array_equal(v.numpy(), b)}
        domain = {v.ref() for v in model.domain_variables()}
        self.assertEqual(bool(moved & domain), mode != procedure.GENERAL, mode)
        self.assertEqual(bool(moved - domain), mode != procedure.DOMAINS, mode)

    def test_savedmodel_keeps_the_domain_input(self):
        # (tests/models/test_export.py exports and serves every family, this one included.)
        signature = self.model.serve_function().input_signature[0]
        self.assertIn("domain", signature)
        self.assertEqual(signature["domain"].dtype, tf.string)

    def test_ctranslate2_export_is_refused_in_one_line(self):
        output_dir = os.path.join(self.dir, "ct2")
        with self.assertRaises(UserError) as refusal:
            ct2_export.export(self.model, output_dir)
        message = str(refusal.exception)
        self.assertNotIn("\n", message)
        self.assertRegex(
            message,
            "^LayerwiseLDRTransformer cannot be exported to CTranslate2: the LDR transform "
            "after every layer \\(ldr_transform='every_layer'\\) .*: export a SavedModel",
        )
        exporter = opennmt.utils.exporters.make_exporter("ctranslate2")
        with self.assertRaisesRegex(UserError, "^CTranslate2Exporter cannot export .*every_layer"):
            self.model.export(output_dir, exporter=exporter)
        self.assertFalse(os.path.exists(output_dir))
        caps = probe.capabilities(RELEASED)
        self.assertIn("ldr_transform='every_layer'", caps.ctranslate2)
        self.assertIsNone(caps.ensembles)


class ZeroInitTest(tf.test.TestCase):
    def test_every_label_starts_as_generic(self):
        paths = corpus.write_corpus(os.path.join(self.get_temp_dir(), "corpus"), count=20)
        model = registry.get(RELEASED).build_tiny()
        model.initialize(corpus.data_config(paths), params={"maximum_decoding_length": 6})
        model.create_variables()
        for region in model.domain_weights().values():
            tables = [v for v in region if "embedding" in v.name]
            self.assertLen(tables, 2)  # Source and target.
            for table in tables:
                self.assertAllEqual(table, np.zeros(table.shape))
        labels = _labels(model)
        logits = [_logits(model, _features(model, [d] * 3), labels) for d in corpus.DOMAINS]
        generic = _logits(model, _features(model, ["generic"] * 3), labels)
        for domain_logits in logits:
            self.assertAllEqual(domain_logits, generic)


class OptionsTest(tf.test.TestCase):
    def test_fusion_with_the_released_options_folds_exactly(self):
        # Target-side LDR and zero-initialized regions keep the paper's fusion foldable.
        model = registry.get("ldr_transformer").build_tiny(
            target_ldr=True, zero_domain_regions=True
        )
        model, _ = _build(self.get_temp_dir(), model, seed=3)
        self.assertIsNone(probe.model_capabilities(model).ctranslate2)
        features = _features(model, ["religious"] * 3)
        labels = _labels(model)
        plain = folding.fold(model, "religious")
        plain_features = plain.features_inputter.make_features(
            features=helpers.padded_tokens([s.split() for s in SOURCES])
        )
        plain_labels = plain.labels_inputter.make_features(
            features=helpers.padded_tokens([t.split() for t in TARGETS])
        )
        self.assertAllClose(
            _logits(plain, plain_features, plain_labels),
            _logits(model, features, labels),
            atol=1e-4,
        )
        self.assertNotAllClose(
            _logits(model, _features(model, ["medical"] * 3), labels),
            _logits(model, features, labels),
        )

    def test_reserved_regions_reach_the_transforms(self):
        paths = corpus.write_corpus(os.path.join(self.get_temp_dir(), "corpus"), count=10)
        model = models.ldr_transformer(
            **helpers.TINY,
            domain_region_size=2,
            num_reserved_regions=1,
            ldr_transform="every_layer",
        )
        model.initialize(corpus.data_config(paths))
        model.create_variables()
        self.assertLen(model.ldr_sides(), 1)  # Source side only (target_ldr=False).
        self.assertEqual(model.domain_regions(), 4)
        for transform in ldr_transform.transforms(model.encoder):
            self.assertEqual((transform.num_regions, transform.num_domains), (4, 3))
            self.assertAllEqual(transform.domain_kernels[3], np.zeros([2, 16]))
        self.assertEqual(model.default_domain_training, procedure.PROCEDURE1)

    def test_invalid_options(self):
        with self.assertRaisesRegex(ValueError, "ldr_transform must be one of fusion, every_layer"):
            models.ldr_transformer(**helpers.TINY, ldr_transform="everywhere")
        with self.assertRaisesRegex(ValueError, "share_target_embeddings needs plain target"):
            models.ldr_transformer(
                **helpers.TINY,
                ldr_transform="every_layer",
                target_ldr=True,
                share_target_embeddings=True,
            )
        with self.assertRaisesRegex(ValueError, "must be a LayerwiseLDREmbedder"):
            models.LayerwiseLDRTransformer(
                opennmt.inputters.WordEmbedder(16), opennmt.inputters.WordEmbedder(16), num_units=16
            )


if __name__ == "__main__":
    tf.test.main()
