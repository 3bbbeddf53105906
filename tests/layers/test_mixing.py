"""Domain-mixing layers: proportions, mixed projections, install, records and L_mix."""

import numpy as np
import opennmt
import tensorflow as tf
from parameterized import parameterized

from ldr_opennmt.errors import UserError
from ldr_opennmt.layers import mixing
from ldr_opennmt.layers.context import DomainSpecificLayer

DOMAINS = 3
UNITS = 8


def _softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _randomize(variables, seed, scale=0.5):
    rng = np.random.RandomState(seed)
    for variable in variables:
        variable.assign(rng.normal(scale=scale, size=variable.shape).astype(np.float32))


def _proportions(rng, shape, k=DOMAINS):
    return _softmax(rng.normal(size=list(shape) + [k])).astype(np.float32)


def _mix_reference(inputs, kernel, bias, proportions):
    """sum_j p_j (x W_j + b_j), one domain at a time (numpy)."""
    outputs = 0
    for j in range(kernel.shape[1]):
        projected = inputs @ kernel[:, j, :]
        if bias is not None:
            projected = projected + bias[j]
        outputs = outputs + proportions[..., j : j + 1] * projected
    return outputs


class ProportionsTest(tf.test.TestCase):
    @parameterized.expand([(0.0,), (0.05,), (0.5,), (1.0,)])
    def test_smoothed_softmax(self, epsilon):
        layer = mixing.DomainProportions(epsilon=epsilon, num_domains=DOMAINS)
        inputs = np.random.RandomState(0).normal(size=[2, 5, UNITS]).astype(np.float32)
        layer(inputs)
        _randomize(layer.weights, seed=1, scale=2.0)
        with mixing.collect_proportions() as records:
            weights = layer(inputs, side=mixing.TARGET)
        logits = inputs @ layer.kernel.numpy()
        expected = (1 - epsilon) * _softmax(logits) + epsilon / DOMAINS
        self.assertAllClose(weights, expected, atol=1e-6)
        self.assertAllClose(tf.reduce_sum(weights, -1), np.ones([2, 5]), atol=1e-6)
        if epsilon:
            self.assertGreaterEqual(np.min(weights), epsilon / DOMAINS - 1e-7)
        self.assertLen(records, 1)
        record = records[0]
        self.assertEqual(record.side, mixing.TARGET)
        self.assertEqual(record.epsilon, epsilon)
        self.assertAllClose(record.logits, logits, atol=1e-5)
        self.assertAllClose(record.proportions, expected, atol=1e-6)

    @parameterized.expand([(0.0,), (0.05,), (1.0,)])
    def test_log_proportions_are_stable(self, epsilon):
        logits = tf.constant([[0.0, 1.0, -2.0], [200.0, -200.0, 0.0]])
        log_p = mixing.log_proportions(logits, epsilon).numpy()
        self.assertTrue(np.all(np.isfinite(log_p[0])))
        expected = np.log((1 - epsilon) * _softmax(logits.numpy()[:1]) + epsilon / 3)
        self.assertAllClose(log_p[:1], expected, atol=1e-6)
        if epsilon:
            # No log(0) for a saturated softmax: the smoothing bounds it.
            self.assertTrue(np.all(np.isfinite(log_p)))
            self.assertAllClose(log_p[1, 1], np.log(epsilon / 3), atol=1e-6)

    @parameterized.expand([(-0.01,), (1.5,), ("0.1",), (True,), (None,)])
    def test_epsilon_outside_range_is_refused(self, epsilon):
        with self.assertRaisesRegex(UserError, r"^epsilon must be (a number )?in \[0, 1\]"):
            mixing.DomainProportions(epsilon=epsilon)

    def test_domain_count_is_checked(self):
        for count in (0, -1, 1.5):
            with self.assertRaisesRegex(UserError, "at least one domain"):
                mixing.DomainProportions(num_domains=count)
        layer = mixing.DomainProportions()
        with self.assertRaisesRegex(ValueError, "set the number of domains"):
            layer(tf.zeros([1, 1, UNITS]))


class MixedDenseTest(tf.test.TestCase):
    def _built(self, units=6, depth=UNITS, **kwargs):
        layer = mixing.MixedDense(units, num_domains=DOMAINS, **kwargs)
        layer(tf.zeros([1, 1, depth]), proportions=tf.ones([1, 1, DOMAINS]) / DOMAINS)
        return layer

    def test_reads_the_scope_and_mixes_before_the_activation(self):
        layer = self._built(activation=tf.nn.relu)
        _randomize(layer.weights, seed=2)
        rng = np.random.RandomState(5)
        inputs = rng.normal(size=[2, 3, UNITS]).astype(np.float32)
        proportions = _proportions(rng, [2, 3])
        with mixing.mixing_scope(tf.constant(proportions)):
            outputs = layer(inputs)
        mixed = _mix_reference(inputs, layer.kernel.numpy(), layer.bias.numpy(), proportions)
        self.assertAllClose(outputs, np.maximum(mixed, 0), atol=1e-5)
        self.assertAllClose(layer(inputs, proportions=proportions), outputs, atol=1e-6)
        with self.assertRaisesRegex(RuntimeError, "outside a mixing scope"):
            layer(inputs)

    def test_memory_role_uses_the_proportions_of_its_input(self):
        proportion_layer = mixing.DomainProportions(num_domains=DOMAINS, label="decoder/layer_0")
        layer = self._built(role=mixing.MEMORY)
        rng = np.random.RandomState(6)
        memory = tf.constant(rng.normal(size=[2, 4, UNITS]).astype(np.float32))
        layer_proportions = tf.constant(_proportions(rng, [2, 1]))
        with mixing.collect_proportions() as records:
            with mixing.mixing_scope(layer_proportions, proportion_layer):
                keys = layer(memory)
                values = layer(memory)
        expected = layer(memory, proportions=proportion_layer(memory))
        self.assertAllClose(keys, expected, atol=1e-6)
        self.assertAllClose(values, expected, atol=1e-6)
        # Computed (and recorded) once per layer call, for source positions.
        self.assertEqual(
            [(r.label, r.side) for r in records], [("decoder/layer_0/memory", "source")]
        )

    def test_each_domain_is_initialized_as_a_stock_dense(self):
        layer = self._built(units=64, depth=32)
        kernel = layer.kernel.numpy()
        self.assertEqual(kernel.shape, (32, DOMAINS, 64))
        limit = np.sqrt(6 / (32 + 64))  # Glorot of one [32, 64] kernel.
        self.assertLessEqual(np.abs(kernel).max(), limit)
        self.assertGreater(np.abs(kernel).max(), 0.9 * limit)
        self.assertNotAllClose(kernel[:, 0], kernel[:, 1])
        self.assertAllEqual(layer.bias.numpy(), np.zeros([DOMAINS, 64]))
        self.assertAllEqual(layer.domain_kernel(1)[0], kernel[:, 1])

    def test_not_procedure1_parameters_and_no_fold(self):
        layer = self._built()
        self.assertIsInstance(layer, DomainSpecificLayer)
        self.assertEqual(layer.domain_weights(), {})
        self.assertEqual(layer.num_regions, DOMAINS)
        with self.assertRaisesRegex(UserError, "cannot be folded for one domain"):
            layer.fold(0)

    def test_compute_dtype(self):
        layer = mixing.MixedDense(6, num_domains=DOMAINS, dtype="mixed_bfloat16")
        proportion_layer = mixing.DomainProportions(num_domains=DOMAINS, dtype="mixed_bfloat16")
        inputs = tf.random.normal([2, 3, UNITS], dtype=tf.bfloat16)
        proportions = proportion_layer(inputs)
        self.assertEqual(proportions.dtype, tf.bfloat16)
        outputs = layer(inputs, proportions=proportions)
        self.assertEqual(outputs.dtype, tf.bfloat16)
        self.assertEqual(layer.kernel.dtype, tf.float32)


def _encoder(num_layers=2):
    return opennmt.encoders.SelfAttentionEncoder(
        num_layers, num_units=UNITS, num_heads=2, ffn_inner_dim=16, dropout=0.0
    )


def _decoder(num_layers=2):
    return opennmt.decoders.SelfAttentionDecoder(
        num_layers, num_units=UNITS, num_heads=2, ffn_inner_dim=16, dropout=0.0, vocab_size=10
    )


class InstallTest(tf.test.TestCase):
    def test_encoder(self):
        encoder = _encoder()
        installed = mixing.install(encoder, num_domains=DOMAINS, epsilon=0.1, cut=False)
        self.assertEqual(installed, mixing.proportion_layers(encoder))
        self.assertEqual([p.label for p in installed], ["encoder/layer_0", "encoder/layer_1"])
        self.assertTrue(all(p.epsilon == 0.1 and not p.cut for p in installed))
        for layer in encoder.layers:
            attention = layer.self_attention.layer
            # Q, K, V and the output projection W^O (section 3.2: mixed the same way).
            for attribute in ("linear_queries", "linear_keys", "linear_values", "linear_output"):
                self.assertIsInstance(getattr(attention, attribute), mixing.MixedDense)
                self.assertEqual(getattr(attention, attribute).role, mixing.LAYER)
            ffn = layer.ffn.layer
            self.assertIs(ffn.inner.activation, tf.nn.relu)
            self.assertIsInstance(ffn.outer, mixing.MixedDense)
        self.assertLen(mixing.mixed_layers(encoder), 12)  # Q, K, V, O and the FFN's two, twice
        rng = np.random.RandomState(0)
        inputs = tf.constant(rng.normal(size=[2, 4, UNITS]).astype(np.float32))
        with mixing.collect_proportions() as records:
            outputs, _, _ = encoder(inputs, sequence_length=tf.constant([4, 2]))
        self.assertEqual(outputs.shape, [2, 4, UNITS])
        self.assertEqual(
            [(r.label, r.side) for r in records],
            [("encoder/layer_0", "source"), ("encoder/layer_1", "source")],
        )
        self.assertEqual(records[0].proportions.shape, [2, 4, DOMAINS])
        self.assertEqual(installed[0].kernel.shape, [UNITS, DOMAINS])
        # A layer's proportions are those of its self-attention's normalized input.
        layer = encoder.layers[1]
        with mixing.collect_proportions() as records:
            layer(inputs)
        expected = installed[1](layer.self_attention.input_layer_norm(inputs))
        self.assertAllClose(records[0].proportions, expected, atol=1e-6)

    def test_decoder_cross_attention_keys_values_use_the_memory(self):
        decoder = _decoder(num_layers=1)
        mixing.install(decoder, num_domains=DOMAINS)
        layer = decoder.layers[0]
        cross = layer.attention[0].layer
        self.assertEqual(cross.linear_queries.role, mixing.LAYER)
        self.assertEqual(cross.linear_keys.role, mixing.MEMORY)
        self.assertEqual(cross.linear_values.role, mixing.MEMORY)
        self.assertLen(mixing.mixed_layers(decoder), 10)  # Q, K, V, O twice; the FFN's two
        rng = np.random.RandomState(1)
        memory = tf.constant(rng.normal(size=[2, 5, UNITS]).astype(np.float32))
        decoder.initialize(vocab_size=10)
        decoder.initial_state(memory=memory, memory_sequence_length=tf.constant([5, 3]))
        inputs = tf.constant(rng.normal(size=[2, 3, UNITS]).astype(np.float32))
        with mixing.collect_proportions() as records:
            decoder(inputs, tf.constant([3, 2]))
        self.assertEqual(
            [(r.label, r.side, r.proportions.shape[1]) for r in records],
            [("decoder/layer_0", "target", 3), ("decoder/layer_0/memory", "source", 5)],
        )

    def test_layer_call_outside_model(self):
        """A mixed projection called alone (outside its layer) fails clearly."""
        encoder = _encoder(num_layers=1)
        mixing.install(encoder, num_domains=DOMAINS)
        encoder(tf.zeros([1, 2, UNITS]))
        with self.assertRaisesRegex(RuntimeError, "outside a mixing scope"):
            encoder.layers[0].ffn(tf.zeros([1, 2, UNITS]))

    def test_refusals(self):
        encoder = _encoder()
        with self.assertRaisesRegex(UserError, r"^epsilon must be in \[0, 1\], got 1.2$"):
            mixing.install(encoder, epsilon=1.2)
        mixing.install(encoder)
        with self.assertRaisesRegex(UserError, "not a stock SelfAttentionEncoderLayer"):
            mixing.install(encoder)
        with self.assertRaisesRegex(UserError, "into a SelfAttentionEncoder or"):
            mixing.install(opennmt.encoders.RNNEncoder(1, 8))
        built = _encoder()
        built(tf.zeros([1, 2, UNITS]))
        with self.assertRaisesRegex(UserError, "before the .* is built"):
            mixing.install(built)
        with self.assertRaisesRegex(ValueError, "set the number of domains before build"):
            encoder(tf.zeros([1, 2, UNITS]))
        mixing.set_num_domains(encoder, 2)
        encoder(tf.zeros([1, 2, UNITS]))
        with self.assertRaisesRegex(ValueError, "built with 2 domains"):
            mixing.set_num_domains(encoder, 3)


class MixingLossTest(tf.test.TestCase):
    def test_masks_padding_and_generic_sentences(self):
        rng = np.random.RandomState(7)
        source_logits = rng.normal(size=[3, 4, DOMAINS]).astype(np.float32)
        target_logits = rng.normal(size=[3, 2, DOMAINS]).astype(np.float32)
        records = [
            mixing.ProportionRecord("encoder/layer_0", mixing.SOURCE, source_logits, None, 0.05),
            mixing.ProportionRecord("decoder/layer_0", mixing.TARGET, target_logits, None, 0.05),
        ]
        domain = tf.constant([2, -1, 0])
        lengths = {mixing.SOURCE: tf.constant([4, 4, 1]), mixing.TARGET: tf.constant([1, 2, 2])}
        total, count = mixing.mixing_loss(records, domain, lengths)

        def _ce(logits, label):
            return -np.log(0.95 * _softmax(logits)[label] + 0.05 / DOMAINS)

        expected = [_ce(source_logits[0, t], 2) for t in range(4)]
        expected += [_ce(source_logits[2, 0], 0)]
        expected += [_ce(target_logits[0, 0], 2)]
        expected += [_ce(target_logits[2, t], 0) for t in range(2)]
        self.assertAllClose(count, len(expected))
        self.assertAllClose(total, np.sum(expected), atol=1e-5)
        # Padding and generic values do not matter.
        source_logits[0, :, :] += 0  # (no-op: real positions)
        source_logits[2, 1:] = 50.0
        source_logits[1] = -50.0
        target_logits[0, 1] = 30.0
        changed = mixing.mixing_loss(records, domain, lengths)
        self.assertAllClose(changed, (total, count), atol=1e-5)
        generic = mixing.mixing_loss(records, tf.constant([-1, -1, -1]), lengths)
        self.assertAllEqual(generic, (0.0, 0.0))

    def test_collection_nests_and_pauses(self):
        layer = mixing.DomainProportions(num_domains=2, label="x")
        inputs = tf.zeros([1, 2, UNITS])
        layer(inputs)  # Not collected: no collector.
        with mixing.collect_proportions() as outer:
            layer(inputs)
            with mixing.pause_collection():
                layer(inputs)
            with mixing.collect_proportions() as inner:
                layer(inputs, side=mixing.TARGET)
        self.assertLen(outer, 1)
        self.assertEqual([r.side for r in inner], [mixing.TARGET])

    def test_in_a_tf_function(self):
        layer = mixing.DomainProportions(num_domains=2, epsilon=0.0)

        @tf.function
        def _loss(inputs, domain):
            with mixing.collect_proportions() as records:
                layer(inputs)
            total, count = mixing.mixing_loss(records, domain, {mixing.SOURCE: tf.constant([2])})
            return total / count

        inputs = tf.random.normal([1, 2, UNITS])
        loss = _loss(inputs, tf.constant([1]))
        log_p = tf.nn.log_softmax(tf.tensordot(inputs, layer.kernel, axes=1))
        self.assertAllClose(loss, -tf.reduce_mean(log_p[..., 1]), atol=1e-6)


if __name__ == "__main__":
    tf.test.main()
