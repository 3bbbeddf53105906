import math

import numpy as np
import opennmt
import tensorflow as tf

from ldr_opennmt.errors import UserError
from ldr_opennmt.layers import domain_scope, ldr_transform
from ldr_opennmt.layers.behaviours import stock_class
from ldr_opennmt.layers.ldr_transform import LDRTransform

UNITS, CELLS, REGIONS = 8, 2, 3


def _regions(domain, length=4, seed=0):
    """Masked regions ``[batch, length, REGIONS x CELLS]`` as the embedder gives them."""
    rng = np.random.RandomState(seed)
    values = rng.normal(size=(len(domain), length, REGIONS, CELLS)).astype(np.float32)
    mask = np.array([[k == r for r in range(REGIONS)] for k in domain], np.float32)
    return (values * mask[:, None, :, None]).reshape(len(domain), length, REGIONS * CELLS)


def _transform(num_domains=REGIONS, zero_domain_regions=False):
    layer = LDRTransform(CELLS, zero_domain_regions)
    layer.set_num_regions(REGIONS, num_domains)
    layer.build(tf.TensorShape([None, None, UNITS]))
    return layer


class LDRTransformTest(tf.test.TestCase):
    def test_adds_the_projected_active_region(self):
        layer = _transform()
        domain = [1, -1, 2]
        inputs = np.random.RandomState(1).normal(size=(3, 4, UNITS)).astype(np.float32)
        regions = _regions(domain)
        outputs = layer(tf.constant(inputs), tf.constant(regions)).numpy()
        for i, k in enumerate(domain):
            expected = inputs[i]
            if k >= 0:
                active = regions[i].reshape(4, REGIONS, CELLS)[:, k]
                expected = expected + active @ layer.domain_kernels[k].numpy()
            self.assertAllClose(outputs[i], expected, atol=1e-5)

    def test_other_regions_get_exactly_zero_gradient(self):
        layer = _transform()
        with tf.GradientTape() as tape:
            outputs = layer(tf.ones([2, 4, UNITS]), tf.constant(_regions([1, 1])))
            loss = tf.reduce_sum(outputs**2)
        gradients = tape.gradient(loss, layer.domain_kernels)
        for k, gradient in enumerate(gradients):
            gradient = tf.convert_to_tensor(gradient).numpy()
            if k == 1:
                self.assertGreater(np.abs(gradient).max(), 0)
            else:
                self.assertAllEqual(gradient, np.zeros([CELLS, UNITS]))
        self.assertEqual(
            [v.name.split("/")[-1] for v in layer.weights],
            ["domain_%d_kernel:0" % k for k in range(REGIONS)],
        )
        self.assertEqual(sorted(layer.domain_weights()), list(range(REGIONS)))

    def test_initialization(self):
        # The released code's one dense kernel [regions x cells, units]: Glorot over it.
        limit = math.sqrt(6.0 / (REGIONS * CELLS + UNITS))
        layer = _transform(num_domains=2)
        for kernel in layer.domain_kernels[:2]:
            self.assertLessEqual(np.abs(kernel.numpy()).max(), limit)
            self.assertGreater(np.abs(kernel.numpy()).max(), 0)
        # A reserved region starts as generic: zero kernel, unless its embedding is zero.
        self.assertAllEqual(layer.domain_kernels[2], np.zeros([CELLS, UNITS]))
        zero = _transform(num_domains=2, zero_domain_regions=True)
        self.assertGreater(np.abs(zero.domain_kernels[2].numpy()).max(), 0)

    def test_it_has_no_fold(self):
        with self.assertRaisesRegex(UserError, "ldr_transform='every_layer'.*SavedModel"):
            _transform().fold(0)

    def test_region_count_is_fixed_once_built(self):
        with self.assertRaisesRegex(UserError, "built with 3 domain regions: cannot set 4"):
            _transform().set_num_regions(4)


class InstallTest(tf.test.TestCase):
    def _encoder(self, num_layers=2):
        return opennmt.encoders.SelfAttentionEncoder(
            num_layers, num_units=UNITS, num_heads=2, ffn_inner_dim=16
        )

    def test_encoder_adds_the_transforms_after_input_and_every_layer(self):
        encoder = self._encoder()
        installed = ldr_transform.install(encoder, CELLS)
        self.assertEqual([t.name for t in installed], ["ldr_input", "ldr_layer_0", "ldr_layer_1"])
        for transform in installed:
            transform.set_num_regions(REGIONS)
        domain = [0, -1, 2]
        rng = np.random.RandomState(3)
        words = rng.normal(size=(3, 4, UNITS)).astype(np.float32)
        regions = _regions(domain, seed=4)
        length = tf.constant([4, 2, 3])
        inputs = tf.constant(np.concatenate([words, regions], -1))
        with domain_scope(domain):
            encoder(inputs, sequence_length=length)  # Builds it.
        self.assertEqual(len(ldr_transform.transforms(encoder)), 3)
        for transform in installed:  # Large enough to matter.
            for kernel in transform.domain_kernels:
                kernel.assign(kernel * 10)
        with domain_scope(domain):
            outputs, _, _ = encoder(inputs, sequence_length=length)

        # By hand: the stock encoder on the words, the regions' projection added after
        # the (scaled, position-encoded) input and after each stock layer.
        def _add(transform, x):
            kernel = np.concatenate([k.numpy() for k in transform.domain_kernels], 0)
            return x + regions @ kernel

        x = encoder.position_encoder(tf.constant(words) * math.sqrt(UNITS))
        mask = encoder.build_mask(x, sequence_length=length)
        x = _add(encoder.layers[0].ldr_input_transform, x)
        for layer in encoder.layers:
            x = stock_class(layer).call(layer, tf.constant(x), mask=mask, training=False)
            x = _add(layer.ldr_transform, x.numpy())
        expected = encoder.layer_norm(tf.constant(x))
        self.assertAllClose(outputs, expected, atol=1e-4)
        # The generic sentence is the stock encoder's (every region masked).
        self.assertAllEqual(regions[1], np.zeros_like(regions[1]))

    def test_refusals(self):
        with self.assertRaisesRegex(UserError, "into a SelfAttentionEncoder or .*not RNNEncoder"):
            ldr_transform.install(opennmt.encoders.RNNEncoder(1, 8), CELLS)
        encoder = self._encoder(1)
        ldr_transform.install(encoder, CELLS)
        with self.assertRaisesRegex(UserError, "installs once, into stock layers"):
            ldr_transform.install(encoder, CELLS)
        built = self._encoder(1)
        built.build(tf.TensorShape([None, None, UNITS]))
        with self.assertRaisesRegex(UserError, "is built"):
            ldr_transform.install(built, CELLS)


if __name__ == "__main__":
    tf.test.main()
