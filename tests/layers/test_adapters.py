import numpy as np
import opennmt
import tensorflow as tf
from parameterized import parameterized

from ldr_opennmt.errors import UserError
from ldr_opennmt.layers import adapters, domain_scope

DEPTH, INNER, REGIONS = 6, 4, 3


def _adapter(seed=3, zero_up=False):
    layer = adapters.ResidualAdapter(INNER, num_regions=REGIONS)
    layer.build([None, None, DEPTH])
    rng = np.random.RandomState(seed)
    for variable in layer.weights:
        value = rng.normal(size=variable.shape).astype(np.float32)
        if zero_up and "_up_" in variable.name:
            value = np.zeros_like(value)
        variable.assign(value)
    return layer


def _expected(layer, inputs, domains):
    """The adapter of each sentence, computed with numpy."""
    weights = {}
    for region, variables in layer.domain_weights().items():
        for variable in variables:
            weights[(region, variable.name.split("/")[-1].split(":")[0].split("_", 2)[2])] = (
                variable.numpy()
            )
    outputs = []
    for x, domain in zip(inputs, domains):
        if domain < 0:
            outputs.append(x)
            continue
        w = {name: value for (region, name), value in weights.items() if region == domain}
        mean = x.mean(-1, keepdims=True)
        var = x.var(-1, keepdims=True)
        h = (x - mean) / np.sqrt(var + adapters.LAYER_NORM_EPSILON) * w["gamma"] + w["beta"]
        h = np.maximum(h @ w["down_kernel"] + w["down_bias"], 0)
        outputs.append(x + h @ w["up_kernel"] + w["up_bias"])
    return np.stack(outputs)


class ResidualAdapterTest(tf.test.TestCase):
    def setUp(self):
        super().setUp()
        self.inputs = np.random.RandomState(0).normal(size=[4, 5, DEPTH]).astype(np.float32)

    @parameterized.expand(
        [
            ("inference_mixed", [0, 2, -1, 1], False, False),
            ("inference_one_domain", [1, 1, 1, 1], False, False),
            ("training_mixed", [0, 2, -1, 1], True, False),
            ("xla_path", [2, -1, 0, 0], False, True),
        ]
    )
    def test_each_sentence_gets_its_adapter(self, _, domains, training, branch_free):
        layer = _adapter()
        layer.branch_free = branch_free
        with domain_scope(domains):
            outputs = layer(self.inputs, training=training)
        self.assertAllClose(outputs, _expected(layer, self.inputs, domains), atol=1e-4)
        for i, domain in enumerate(domains):
            if domain < 0:  # generic: no adapter, exactly.
                self.assertAllEqual(outputs[i], self.inputs[i])

    def test_new_adapter_is_the_identity(self):
        layer = adapters.ResidualAdapter(INNER, num_regions=REGIONS)
        with domain_scope([0, 1, 2, -1]):
            self.assertAllEqual(layer(self.inputs), self.inputs)
        # Also with trained down-projections and layer norms: the up-projection decides.
        layer = _adapter(zero_up=True)
        with domain_scope([0, 1, 2, -1]):
            self.assertAllEqual(layer(self.inputs, training=True), self.inputs)

    def test_absent_domains_get_exact_zero_gradients(self):
        layer = _adapter()
        with tf.GradientTape() as tape, domain_scope([1, 1, -1, 1]):
            loss = tf.reduce_sum(layer(self.inputs, training=True) ** 2)
        gradients = tape.gradient(loss, layer.trainable_weights)
        regions = {v.ref(): r for r, vs in layer.domain_weights().items() for v in vs}
        for variable, gradient in zip(layer.trainable_weights, gradients):
            if regions[variable.ref()] == 1:
                self.assertGreater(np.abs(gradient.numpy()).max(), 0, variable.name)
            else:
                self.assertTrue(gradient is None or not np.any(gradient.numpy()), variable.name)

    def test_every_weight_is_a_domain_weight(self):
        layer = _adapter()
        listed = [v for vs in layer.domain_weights().values() for v in vs]
        self.assertLen(listed, len(layer.weights))
        self.assertEqual(sorted(layer.domain_weights()), list(range(REGIONS)))

    @parameterized.expand([(0,), (-3,), (2.5,), (True,)])
    def test_inner_size_must_be_positive(self, inner):
        with self.assertRaisesRegex(UserError, "inner size must be > 0"):
            adapters.ResidualAdapter(inner)

    def test_fold_is_refused(self):
        with self.assertRaisesRegex(UserError, "cannot be folded"):
            _adapter().fold(0)


class InstallTest(tf.test.TestCase):
    @parameterized.expand([("encoder",), ("decoder",)])
    def test_installs_after_every_layer(self, side):
        if side == "encoder":
            stack = opennmt.encoders.SelfAttentionEncoder(
                2, num_units=8, num_heads=2, ffn_inner_dim=8
            )
        else:
            stack = opennmt.decoders.SelfAttentionDecoder(
                2, num_units=8, num_heads=2, ffn_inner_dim=8
            )
        installed = adapters.install(stack, 4, num_regions=2)
        self.assertLen(installed, 2)
        self.assertEqual(adapters.adapter_layers(stack), installed)
        with self.assertRaisesRegex(
            UserError,
            "not a stock SelfAttention(En|De)coderLayer: Adapted(En|De)coderLayer installs",
        ):
            adapters.install(stack, 4)

    def test_encoder_output_goes_through_the_adapters(self):
        stack = opennmt.encoders.SelfAttentionEncoder(1, num_units=8, num_heads=2, ffn_inner_dim=8)
        (adapter,) = adapters.install(stack, 4, num_regions=2)
        inputs = tf.random.normal([2, 3, 8], seed=1)
        with domain_scope([0, -1]):
            before, _, _ = stack(inputs, sequence_length=[3, 2])
            for variable in adapter.domain_weights()[0]:
                variable.assign(tf.random.normal(variable.shape, seed=2))
            after, _, _ = stack(inputs, sequence_length=[3, 2])
        self.assertNotAllClose(before[0], after[0])
        self.assertAllEqual(before[1], after[1])  # generic: no adapter.

    def test_refuses_other_stacks_and_built_ones(self):
        with self.assertRaisesRegex(UserError, "not RNNEncoder"):
            adapters.install(opennmt.encoders.RNNEncoder(1, 8), 4)
        stack = opennmt.encoders.SelfAttentionEncoder(1, num_units=8, num_heads=2, ffn_inner_dim=8)
        stack(tf.zeros([1, 2, 8]), sequence_length=[2])
        with self.assertRaisesRegex(UserError, "before the .* is built"):
            adapters.install(stack, 4)
        with self.assertRaisesRegex(UserError, "inner size must be > 0"):
            adapters.install(stack, 0)

    def test_parameter_ratio_at_paper_size(self):
        from ldr_opennmt.layers import factorized

        vanilla = factorized.parameter_count("vanilla", **factorized.PAPER_SIZES)
        extra = adapters.parameter_count(d_model=512, inner_dim=2048, layers=12, num_domains=5)
        self.assertAlmostEqual((vanilla + extra) / vanilla, 2.32, places=2)


if __name__ == "__main__":
    tf.test.main()
