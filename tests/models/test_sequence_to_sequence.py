import os

import numpy as np
import opennmt
import tensorflow as tf
from parameterized import parameterized

from ldr_opennmt import ensembles, probe, registry
from ldr_opennmt.errors import UserError
from ldr_opennmt.export import folding
from ldr_opennmt.layers import DomainCopies
from ldr_opennmt.models import MultiDomainTransformer, procedure
from ldr_opennmt.models.sequence_to_sequence import transformer_arguments
from tests import by_capability, corpus, helpers

SENTENCES = ["the big cell", "a host is here now", "spirit", "red cell a host"]
LABELS = ["religious", "medical", "generic", "software"]


class MultiDomainModelTest(tf.test.TestCase):
    @parameterized.expand(by_capability.families())
    def test_beam_search_batch_equals_alone(self, family):
        model, _ = helpers.build_model(self, family, params={"beam_width": 3})
        batch = model.infer(helpers.source_features(model, SENTENCES, LABELS))
        for i, (sentence, label) in enumerate(zip(SENTENCES, LABELS)):
            alone = model.infer(helpers.source_features(model, [sentence], [label]))
            length = alone["length"][0, 0]
            self.assertEqual(batch["length"][i, 0], length)
            self.assertAllEqual(batch["tokens"][i, 0, :length], alone["tokens"][0, 0, :length])
            self.assertAllClose(batch["log_probs"][i], alone["log_probs"][0], atol=1e-4)

    @parameterized.expand(by_capability.families(by_capability.labels_needed))
    def test_domain_changes_the_output(self, family):
        model, _ = helpers.build_model(self, family, params={"beam_width": 2})
        scores = [
            model.infer(helpers.source_features(model, ["the big cell"], [label]))["log_probs"]
            for label in ("medical", "religious", "generic")
        ]
        self.assertNotAllClose(scores[0], scores[1])
        self.assertNotAllClose(scores[0], scores[2])

    @parameterized.expand(by_capability.families(by_capability.labels_not_read))
    def test_the_domain_is_ignored(self, family):
        model, _ = helpers.build_model(self, family)
        scores = [
            model.infer(helpers.source_features(model, ["the big cell"], [label]))["log_probs"]
            for label in ("medical", "software")
        ]
        self.assertAllClose(scores[0], scores[1])

    def test_unknown_domain_in_features_fails(self):
        model, _ = helpers.build_model(self, "ldr_transformer")
        with self.assertRaisesRegex(tf.errors.InvalidArgumentError, "Unknown domain label 'legal'"):
            helpers.source_features(model, ["the cell"], ["legal"])

    def test_invalid_domain_training_is_a_user_error(self):
        # One line from ldr-main and onmt-main, not a traceback.
        with self.assertRaisesRegex(
            UserError, r"^params: domain_training must be one of .*, got 'both'$"
        ):
            helpers.build_model(self, "ldr_transformer", params={"domain_training": "both"})

    def test_domain_weights_listed(self):
        model, _ = helpers.build_model(self, "ldr_transformer_target")
        regions = model.domain_weights()
        self.assertEqual(sorted(regions), [0, 1, 2])
        # Source and target embedders: a region table and a fusion block each.
        self.assertLen(regions[0], 4)
        self.assertEqual(model.domains, ["medical", "religious", "software"])

    def test_evaluation_loss_depends_on_domain(self):
        model, paths = helpers.build_model(self, "ldr_transformer")
        features, labels = helpers.training_batch(model, paths)
        loss = model.evaluate(features, labels)[0]
        generic = dict(features, domain=tf.fill(tf.shape(features["domain"]), -1))
        generic_loss = model.evaluate(generic, labels)[0]
        self.assertTrue(np.isfinite(loss[0]))
        self.assertNotAllClose(loss[0], generic_loss[0])


class _BiasDense(opennmt.layers.Dense, DomainCopies):
    """The guide's output layer (docs/adding-a-method.md, Step 1)."""

    def __init__(self, units, **kwargs):
        super().__init__(units, **kwargs)
        self.init_copies()

    def build(self, input_shape):
        super().build(input_shape)
        self.add_copies("output_bias", [self.units], "zeros", generic_value=0)

    def call(self, inputs):
        logits = super().call(inputs)
        return logits + self.per_sentence("output_bias", logits.shape.rank, logits.dtype)


class _GuideTransformer(MultiDomainTransformer):
    """A family written from the guide as it reads: its domain layer is put in place in
    initialize, after super().initialize; it says Procedure 1 is its default and states
    no CTranslate2 refusal (its output bias does not fold)."""

    default_domain_training = procedure.PROCEDURE1
    set_regions = True

    def __init__(self, **sizes):
        super().__init__(
            opennmt.inputters.WordEmbedder(sizes["num_units"]),
            opennmt.inputters.WordEmbedder(sizes["num_units"]),
            **transformer_arguments(**sizes),
        )

    def initialize(self, data_config, params=None):
        super().initialize(data_config, params=params)
        plain = self.decoder.output_layer
        self.decoder.output_layer = _BiasDense(plain.units, use_bias=plain.use_bias)
        if self.set_regions:
            self.set_layer_regions(data_config, 0, "the guide's Transformer")


class _ForgetsRegions(_GuideTransformer):
    set_regions = False


def _initialized(test, model_class, params=None):
    paths = corpus.write_corpus(os.path.join(test.get_temp_dir(), "corpus"), count=6)
    model = model_class(**registry.TINY_TRANSFORMER)
    model.initialize(corpus.data_config(paths), params=dict({"beam_width": 1}, **(params or {})))
    return model, paths


class FamilyContractTest(tf.test.TestCase):
    """What a family written from docs/adding-a-method.md gets (issue 45, items 1 to 3)."""

    def test_ensembles_are_read_from_the_complete_model(self):
        # Its domain layer is added after MultiDomainModel.initialize: the inputter's
        # ensemble refusal must be that of the complete model (it said "no
        # domain-specific parameters", and ens-uniform was refused).
        model, _ = _initialized(self, _GuideTransformer)
        self.assertIsNone(model.ensemble_refusal_reason())
        self.assertIsNone(model.features_inputter.domain_inputter.ensemble_refusal)
        self.assertTrue(model.features_inputter.domain_inputter.reads_ensembles)
        model.create_variables()
        features = helpers.source_features(model, ["a b"], ["ens-uniform"])
        self.assertIn(ensembles.WEIGHTS_FEATURE, features)

    def test_the_class_default_training_mode_is_honoured_and_logged_once(self):
        model, paths = _initialized(self, _GuideTransformer)
        self.assertEqual(model.domain_training, procedure.PROCEDURE1)
        self.assertEqual(probe.model_capabilities(model).default_domain_training, "procedure1")
        model.create_variables()
        features, labels = helpers.training_batch(model, paths)
        optimizer = tf.keras.optimizers.legacy.SGD(0.1)
        with self.assertLogs("tensorflow", "INFO") as logs:
            model.compute_gradients(features, labels, optimizer)
            model.compute_gradients(features, labels, optimizer)
        said = [line for line in logs.output if "Training mode" in line]
        self.assertLen(said, 1)
        self.assertIn("domain_training: procedure1 (the default of _GuideTransformer", said[0])
        # Configured: said so.
        joint, _ = _initialized(self, _GuideTransformer, params={"domain_training": "joint"})
        joint.create_variables()
        with self.assertLogs("tensorflow", "INFO") as logs:
            joint.compute_gradients(features, labels, optimizer)
        self.assertIn("domain_training: joint (configured)", "\n".join(logs.output))

    def test_an_explicit_default_still_overrides_the_class(self):
        model = MultiDomainTransformer(
            opennmt.inputters.WordEmbedder(16),
            opennmt.inputters.WordEmbedder(16),
            domain_training=procedure.GENERAL,
            **transformer_arguments(**registry.TINY_TRANSFORMER),
        )
        self.assertEqual(model.default_domain_training, procedure.GENERAL)
        self.assertEqual(registry.get("mixed_transformer").build_tiny().default_domain_training,
                         procedure.JOINT)  # fmt: skip

    def test_a_missing_region_count_names_the_call(self):
        # The model was initialized: the missing call is set_layer_regions, said in one
        # line when initialize returns (it was a Keras block at build, "initialize the
        # model").
        with self.assertRaisesRegex(
            UserError,
            r"^_ForgetsRegions: the domain layer .* \(_BiasDense\) has no region count: call "
            r"self.set_layer_regions\(data_config, num_reserved_regions, owner\) in "
            r"_ForgetsRegions.initialize, after the layer is in place$",
        ):
            _initialized(self, _ForgetsRegions)

    def test_export_refusals_name_the_remedy(self):
        model, _ = _initialized(self, _GuideTransformer)
        model.create_variables()
        with self.assertRaisesRegex(UserError, "define fold.*serve the SavedModel"):
            folding.check_foldable(model)
        model.ctranslate2_refusal = "its output bias does not fold"
        exporter = opennmt.utils.exporters.make_exporter("ctranslate2")
        with self.assertRaisesRegex(
            UserError, "its output bias does not fold \\(export a SavedModel: onmt-main export"
        ):
            model.export(os.path.join(self.get_temp_dir(), "ct2"), exporter=exporter)
        with self.assertRaisesRegex(UserError, "does not fold \\(serve its SavedModel"):
            folding.check_foldable(model)


if __name__ == "__main__":
    tf.test.main()
