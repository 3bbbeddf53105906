"""install_behaviour: the one way to add a behaviour to a stock OpenNMT-tf layer."""

import os

import opennmt
import tensorflow as tf

from ldr_opennmt.errors import UserError
from ldr_opennmt.layers import adapters, behaviours, mixing

UNITS = 8


class _Doubled(behaviours.Behaviour):
    applies_to = (opennmt.layers.SelfAttentionEncoderLayer,)

    def call(self, x, mask=None, training=None):
        return 2 * super().call(x, mask=mask, training=training)


class _Other(behaviours.Behaviour):
    applies_to = (opennmt.layers.SelfAttentionEncoderLayer,)


def _encoder_layer():
    return opennmt.layers.SelfAttentionEncoderLayer(UNITS, 2, UNITS, name="layer")


class InstallBehaviourTest(tf.test.TestCase):
    def _checkpoint_names(self, layer):
        path = tf.train.Checkpoint(layer=layer).write(
            os.path.join(self.get_temp_dir(), type(layer).__name__)
        )
        return sorted(name for name, _ in tf.train.list_variables(path))

    def test_runs_before_the_stock_call_and_keeps_the_variables(self):
        stock, layer = _encoder_layer(), _encoder_layer()
        inputs = tf.random.normal([2, 3, UNITS])
        self.assertIs(behaviours.install_behaviour(layer, _Doubled), layer)
        self.assertTrue(behaviours.has_behaviour(layer, _Doubled))
        self.assertIsInstance(layer, opennmt.layers.SelfAttentionEncoderLayer)
        self.assertIs(behaviours.stock_class(layer), opennmt.layers.SelfAttentionEncoderLayer)
        self.assertEqual(type(layer).__name__, "DoubledSelfAttentionEncoderLayer")
        stock(inputs)
        layer(inputs)
        self.assertEqual(self._checkpoint_names(layer), self._checkpoint_names(stock))
        for source, target in zip(stock.weights, layer.weights):
            target.assign(source)
        self.assertAllClose(layer(inputs), 2 * stock(inputs), atol=1e-5)

    def test_is_idempotent(self):
        layer = _encoder_layer()
        behaviours.install_behaviour(layer, _Doubled)
        cls = type(layer)
        self.assertIs(behaviours.install_behaviour(layer, _Doubled), layer)
        self.assertIs(type(layer), cls)
        other = behaviours.install_behaviour(_encoder_layer(), _Doubled)
        self.assertIs(type(other), cls)  # One class per (stock class, behaviour).
        layer(tf.zeros([1, 2, UNITS]))
        self.assertIs(behaviours.install_behaviour(layer, _Doubled), layer)  # Even built.

    def test_refuses_a_built_layer(self):
        layer = _encoder_layer()
        layer(tf.zeros([1, 2, UNITS]))
        with self.assertRaisesRegex(UserError, "is built: install Doubled before"):
            behaviours.install_behaviour(layer, _Doubled)
        self.assertIs(type(layer), opennmt.layers.SelfAttentionEncoderLayer)

    def test_refuses_another_class_or_another_behaviour(self):
        decoder_layer = opennmt.layers.SelfAttentionDecoderLayer(UNITS, 2, UNITS)
        with self.assertRaisesRegex(
            UserError,
            "is a SelfAttentionDecoderLayer, not a stock SelfAttentionEncoderLayer: Doubled",
        ):
            behaviours.install_behaviour(decoder_layer, _Doubled)

        class _Subclass(opennmt.layers.SelfAttentionEncoderLayer):
            pass

        with self.assertRaisesRegex(UserError, "is a _Subclass, not a stock"):
            behaviours.install_behaviour(_Subclass(UNITS, 2, UNITS), _Doubled)
        layer = behaviours.install_behaviour(_encoder_layer(), _Doubled)
        with self.assertRaisesRegex(UserError, "is a DoubledSelfAttentionEncoderLayer, not a"):
            behaviours.install_behaviour(layer, _Other)
        with self.assertRaisesRegex(UserError, "not a stock"):
            behaviours.check_installable(layer, _Doubled)  # Installed: no longer stock.

    def test_refuses_undeclared_behaviours(self):
        class _Plain:
            pass

        class _Nowhere(behaviours.Behaviour):
            pass

        with self.assertRaisesRegex(TypeError, "is not a Behaviour subclass"):
            behaviours.install_behaviour(_encoder_layer(), _Plain)
        with self.assertRaisesRegex(TypeError, "declares no applies_to"):
            behaviours.install_behaviour(_encoder_layer(), _Nowhere)

    def test_the_package_sites_use_it(self):
        encoder = opennmt.encoders.SelfAttentionEncoder(
            1, num_units=UNITS, num_heads=2, ffn_inner_dim=UNITS
        )
        adapters.install(encoder, 4)
        self.assertTrue(behaviours.has_behaviour(encoder.layers[0], adapters.AdaptedEncoderLayer))
        # Another behaviour on the same layers is refused before anything changes.
        with self.assertRaisesRegex(UserError, "not a stock SelfAttentionEncoderLayer"):
            mixing.install(encoder, num_domains=2)
        self.assertIsInstance(encoder.layers[0].ffn.layer.inner, opennmt.layers.Dense)
        self.assertFalse(hasattr(encoder.layers[0], "domain_proportions"))


if __name__ == "__main__":
    tf.test.main()
