import os

import numpy as np
import tensorflow as tf
from parameterized import parameterized

from ldr_opennmt import models
from ldr_opennmt.errors import UserError
from tests import corpus, helpers

SENTENCES = ["the big cell", "a host is here", "spirit"]
PARAMS = {"beam_width": 2, "maximum_decoding_length": 6}


def _initialized(test, model, params=None):
    paths = corpus.write_corpus(os.path.join(test.get_temp_dir(), "corpus"), count=20)
    model.initialize(corpus.data_config(paths), params=dict(PARAMS, **(params or {})))
    model.create_variables()
    return model, paths


def _translate(model, labels):
    return model.infer(helpers.source_features(model, SENTENCES, labels))


class ResidualAdapterTransformerTest(tf.test.TestCase):
    def _base_and_adapters(self):
        """A random Mixed model, and an adapter model restored from its checkpoint."""
        base, _ = _initialized(self, models.mixed_transformer(**helpers.TINY))
        helpers.randomize_weights(base, seed=5)
        path = tf.train.Checkpoint(model=base).save(os.path.join(self.get_temp_dir(), "base"))
        model, _ = _initialized(
            self, models.residual_adapter_transformer(adapter_dim=8, **helpers.TINY)
        )
        tf.train.Checkpoint(model=model).restore(path).expect_partial()
        return base, model

    def test_only_the_adapters_are_new(self):
        base, model = self._base_and_adapters()
        self.assertEqual(len(model.weights) - len(model.domain_variables()), len(base.weights))
        self.assertLen(model.domain_weights(), 3)
        for variable in model.domain_variables():
            self.assertIn("/adapter/", variable.name)

    def test_new_adapters_translate_like_the_base(self):
        base, model = self._base_and_adapters()
        expected = _translate(base, ["generic"] * 3)
        for labels in (["generic"] * 3, ["medical", "religious", "software"]):
            outputs = _translate(model, labels)
            self.assertAllEqual(outputs["tokens"], expected["tokens"])
            self.assertAllClose(outputs["log_probs"], expected["log_probs"], atol=1e-5)

    def test_generic_is_the_base_whatever_the_adapters(self):
        base, model = self._base_and_adapters()
        rng = np.random.RandomState(1)
        for variable in model.domain_variables():
            variable.assign(rng.normal(size=variable.shape).astype(np.float32))
        expected = _translate(base, ["generic"] * 3)
        generic = _translate(model, ["generic"] * 3)
        self.assertAllEqual(generic["tokens"], expected["tokens"])
        self.assertAllClose(generic["log_probs"], expected["log_probs"], atol=1e-5)
        medical = _translate(model, ["medical"] * 3)
        self.assertNotAllClose(medical["log_probs"], expected["log_probs"])

    def test_gradients_reach_the_adapters_only(self):
        model, paths = _initialized(
            self, models.residual_adapter_transformer(adapter_dim=8, **helpers.TINY)
        )
        helpers.randomize_weights(model, seed=2)
        optimizer = model.get_optimizer() or tf.keras.optimizers.legacy.Adam()
        optimizer.iterations.assign(10)  # A restored base's step.
        features, labels = helpers.training_batch(model, paths)
        _, gradients = model.compute_gradients(features, labels, optimizer)
        specific = {v.ref() for v in model.domain_variables()}
        for variable, gradient in zip(model.trainable_weights, gradients):
            if variable.ref() in specific:
                continue
            self.assertFalse(np.any(gradient.numpy()), variable.name)
        self.assertTrue(
            any(
                np.any(g.numpy())
                for v, g in zip(model.trainable_weights, gradients)
                if v.ref() in specific
            )
        )
        frozen = {v.ref() for v in model.frozen_variables()}
        self.assertEqual(frozen, {v.ref() for v in model.trainable_weights} - specific)

    def test_training_from_step_zero_is_refused(self):
        model, paths = _initialized(
            self, models.residual_adapter_transformer(adapter_dim=8, **helpers.TINY)
        )
        features, labels = helpers.training_batch(model, paths)
        with self.assertRaisesRegex(UserError, "on top of a trained base model.*step 0"):
            model.compute_gradients(features, labels, tf.keras.optimizers.legacy.Adam())

    @parameterized.expand([("joint",), ("procedure1",), ("general",)])
    def test_other_training_modes_are_refused(self, mode):
        with self.assertRaisesRegex(UserError, "domain_training must be domains, got '%s'" % mode):
            _initialized(
                self,
                models.residual_adapter_transformer(adapter_dim=8, **helpers.TINY),
                params={"domain_training": mode},
            )

    def test_bad_sizes_are_refused(self):
        with self.assertRaisesRegex(UserError, "inner size must be > 0, got 0"):
            models.residual_adapter_transformer(adapter_dim=0)
        with self.assertRaisesRegex(UserError, "num_reserved_regions must be >= 0"):
            models.residual_adapter_transformer(num_reserved_regions=-1)

    def test_reserved_regions(self):
        model, _ = _initialized(
            self,
            models.residual_adapter_transformer(
                adapter_dim=8, num_reserved_regions=2, **helpers.TINY
            ),
        )
        self.assertEqual(model.domain_regions(), 5)


if __name__ == "__main__":
    tf.test.main()
