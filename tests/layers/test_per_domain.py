"""Per-domain building blocks: domain_matmul, DomainCopies, DomainDense, mixed_matmul."""

import numpy as np
import tensorflow as tf
from parameterized import parameterized

from ldr_opennmt import layers
from ldr_opennmt.errors import UserError
from ldr_opennmt.layers import per_domain
from ldr_opennmt.layers.context import DomainSpecificLayer, domain_scope

REGIONS = 3
UNITS = 8
HEADS = 2
MIXED = [1, -1, 0, 1]
DOMAINS = 3


def _randomize(variables, seed, scale=0.5):
    rng = np.random.RandomState(seed)
    for variable in variables:
        variable.assign(rng.normal(scale=scale, size=variable.shape).astype(np.float32))


def _domain_variables(layers):
    return [v for layer in layers for vs in layer.domain_weights().values() for v in vs]


def _call(layer, inputs, domain, **kwargs):
    with domain_scope(domain):
        return layer(inputs, **kwargs)


def _built(layer, depth=UNITS, rank=3, seed=0):
    """Builds :obj:`layer` and gives every variable (general and regions) its own values."""
    _call(layer, tf.zeros([1] * (rank - 1) + [depth]), [-1])
    _randomize(layer.weights, seed)
    return layer


def _copies(layer, name):
    return [np.asarray(v) for v in layer.copies(name)]


def _dense_reference(layer, inputs, domain):
    """inputs @ kernel_k + bias_k per sentence, tiled (numpy)."""
    kernels, biases = _copies(layer, "kernel"), _copies(layer, "bias")
    outputs = np.stack([inputs[i] @ kernels[k + 1] + biases[k + 1] for i, k in enumerate(domain)])
    return np.tile(outputs, [1] * (outputs.ndim - 1) + [layer.tile])


def _softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


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


class DomainScale(tf.keras.layers.Layer, layers.DomainCopies):
    """The module docstring's example: a per-domain scale (generic: 1)."""

    def __init__(self, num_regions=None, **kwargs):
        super().__init__(**kwargs)
        self.init_copies(num_regions)

    def build(self, input_shape):
        self.add_copies("scale", [input_shape[-1]], "ones", generic_value=1)
        super().build(input_shape)

    def call(self, inputs):
        return inputs * self.per_sentence("scale", inputs.shape.rank)


class DomainMatmulTest(tf.test.TestCase):
    @parameterized.expand(
        [
            ("training", dict(training=True)),
            ("inference", dict()),
            ("branch_free", dict(branch_free=True)),
        ]
    )
    def test_paths_select_each_sentence_copy(self, _, options):
        rng = np.random.RandomState(0)
        kernels = [rng.normal(size=[4, 3]).astype(np.float32) for _ in range(REGIONS + 1)]
        biases = [rng.normal(size=[3]).astype(np.float32) for _ in range(REGIONS + 1)]
        inputs = rng.normal(size=[4, 5, 4]).astype(np.float32)
        outputs = per_domain.domain_matmul(inputs, kernels, biases, MIXED, **options)
        expected = np.stack(
            [inputs[i] @ kernels[d + 1] + biases[d + 1] for i, d in enumerate(MIXED)]
        )
        self.assertAllClose(outputs, expected, atol=1e-5)

    def test_transpose(self):
        rng = np.random.RandomState(1)
        kernels = [rng.normal(size=[3, 4]).astype(np.float32) for _ in range(2)]
        inputs = rng.normal(size=[2, 4]).astype(np.float32)
        outputs = per_domain.domain_matmul(inputs, kernels, None, [0, -1], transpose=True)
        expected = np.stack([inputs[0] @ kernels[1].T, inputs[1] @ kernels[0].T])
        self.assertAllClose(outputs, expected, atol=1e-5)


class DomainCopiesTest(tf.test.TestCase):
    def test_the_docstring_example(self):
        layer = DomainScale(num_regions=REGIONS)
        inputs = tf.random.normal([3, 5, UNITS])
        self.assertAllEqual(_call(layer, inputs, [0, 2, -1]), inputs)  # Regions start at 1.
        self.assertIsInstance(layer, DomainSpecificLayer)
        self.assertEqual(
            sorted(v.name.split("/")[-1] for v in layer.weights),
            ["domain_%d_scale:0" % k for k in range(REGIONS)],
        )
        self.assertEqual(sorted(layer.domain_weights()), list(range(REGIONS)))
        _randomize(layer.weights, seed=2)
        outputs = _call(layer, inputs, [0, 2, -1])
        scales = _copies(layer, "scale")
        self.assertAllEqual(scales[0], np.ones([UNITS]))  # The constant general copy.
        self.assertAllClose(outputs[0], inputs[0] * scales[1], atol=1e-6)
        self.assertAllClose(outputs[1], inputs[1] * scales[3], atol=1e-6)
        self.assertAllEqual(outputs[2], inputs[2])
        self.assertAllEqual(layer.copy_for("scale", -1), np.ones([UNITS]))
        self.assertAllEqual(layer.copy_for("scale", 1), scales[2])

    def test_constant_general_copies_are_kept_by_unfold(self):
        layer = DomainScale(num_regions=2)
        _built(layer)
        before = _copies(layer, "scale")
        layer.unfold()
        for value, after in zip(before, _copies(layer, "scale")):
            self.assertAllEqual(value, after)
        self.assertEqual(layer.fixed_general_copies(), [])

    def test_regions_of_a_constant_general_copy_start_apart(self):
        class _Projection(tf.keras.layers.Layer, per_domain.DomainCopies):
            def __init__(self, **kwargs):
                super().__init__(**kwargs)
                self.init_copies(3)

            def build(self, input_shape):
                self.add_copies("kernel", [UNITS, UNITS], "glorot_uniform", generic_value=0)
                super().build(input_shape)

            def call(self, inputs, training=None):
                return self.project(inputs, "kernel", training=training)

        layer = _Projection()
        inputs = tf.random.normal([2, 3, UNITS])
        self.assertAllEqual(_call(layer, inputs, [-1, -1]), tf.zeros([2, 3, UNITS]))
        kernels = _copies(layer, "kernel")
        self.assertNotAllClose(kernels[1], kernels[2])

    def test_per_sentence_shapes(self):
        layer = DomainScale(num_regions=2)
        _built(layer)
        with domain_scope([1, -1]):
            self.assertEqual(layer.per_sentence("scale", 3).shape, [2, 1, UNITS])
            self.assertEqual(layer.per_sentence("scale", 2).shape, [2, UNITS])
            self.assertEqual(layer.per_sentence("scale", 3, dtype=tf.float16).dtype, tf.float16)


class DomainDenseTest(tf.test.TestCase):
    @parameterized.expand([(1, 3), (1, 2), (HEADS, 3), (HEADS, 2)])
    def test_mixed_batch_uses_each_sentence_region(self, tile, rank):
        layer = _built(per_domain.DomainDense(UNITS, tile=tile, num_regions=REGIONS), rank=rank)
        inputs = np.random.RandomState(1).normal(size=[4, 5, UNITS][: rank - 1] + [UNITS])
        inputs = inputs.astype(np.float32)
        outputs = _call(layer, inputs, MIXED)
        self.assertAllClose(outputs, _dense_reference(layer, inputs, MIXED), atol=1e-5)

    @parameterized.expand([("mixed", MIXED), ("single", [1, 1, 1, 1])])
    def test_branch_free_path_for_xla(self, _, domain):
        layer = _built(per_domain.DomainDense(UNITS, tile=HEADS, num_regions=REGIONS))
        inputs = np.random.RandomState(4).normal(size=[4, 5, UNITS]).astype(np.float32)
        layer.branch_free = True
        outputs = tf.function(lambda x: _call(layer, x, domain), jit_compile=True)(inputs)
        self.assertAllClose(outputs, _dense_reference(layer, inputs, domain), atol=1e-5)

    @parameterized.expand([("mixed", MIXED), ("single", [1, 1, 1, 1]), ("generic", [-1] * 4)])
    def test_training_path_partitions_the_batch(self, _, domain):
        # Training multiplies each domain's positions apart (tf.dynamic_partition); the
        # output is the per-sentence reference, in eager mode and in a graph.
        layer = _built(per_domain.DomainDense(UNITS, tile=HEADS, num_regions=REGIONS))
        inputs = np.random.RandomState(5).normal(size=[4, 5, UNITS]).astype(np.float32)
        reference = _dense_reference(layer, inputs, domain)
        self.assertAllClose(_call(layer, inputs, domain, training=True), reference, atol=1e-5)
        graph = tf.function(lambda x: _call(layer, x, domain, training=True))
        self.assertAllClose(graph(inputs), reference, atol=1e-5)

    def test_training_gradients_reach_the_copies_of_the_batch_only(self):
        layer = _built(per_domain.DomainDense(UNITS, num_regions=REGIONS))
        with tf.GradientTape() as tape:
            outputs = _call(layer, tf.random.normal([3, 2, UNITS]), [0, 2, 0], training=True)
            loss = tf.reduce_sum(outputs**2)
        gradients = tape.gradient(loss, layer.weights)
        for variable, gradient in zip(layer.weights, gradients):
            used = "domain_0_" in variable.name or "domain_2_" in variable.name
            nonzero = bool(np.any(tf.convert_to_tensor(gradient) != 0))
            self.assertEqual(nonzero, used, variable.name)

    @parameterized.expand([(-1,), (0,), (2,)])
    def test_single_domain_batch(self, domain):
        layer = _built(per_domain.DomainDense(UNITS, num_regions=REGIONS))
        inputs = np.random.RandomState(2).normal(size=[3, 4, UNITS]).astype(np.float32)
        outputs = _call(layer, inputs, [domain] * 3)
        self.assertAllClose(outputs, _dense_reference(layer, inputs, [domain] * 3), atol=1e-5)

    def test_regions_start_as_generic(self):
        layer = per_domain.DomainDense(UNITS, num_regions=REGIONS)
        inputs = tf.random.normal([4, 3, UNITS])
        generic = _call(layer, inputs, [-1] * 4)
        for domain in ([0] * 4, [2] * 4, MIXED):
            self.assertAllClose(_call(layer, inputs, domain), generic, atol=1e-6)
        general = _copies(layer, "kernel")[0]
        self.assertGreater(np.abs(general).max(), 0)
        for region in _copies(layer, "kernel")[1:]:
            self.assertAllEqual(region, general)

    def test_unfold_copies_the_general_copy(self):
        layer = _built(per_domain.DomainDense(UNITS, tile=HEADS, num_regions=REGIONS))
        layer.unfold()
        for name in ("kernel", "bias"):
            general = _copies(layer, name)[0]
            for region in _copies(layer, name)[1:]:
                self.assertAllEqual(region, general)

    @parameterized.expand([(-1, 1), (0, 1), (2, 1), (-1, HEADS), (1, HEADS)])
    def test_fold_equals_the_layer(self, domain, tile):
        layer = _built(per_domain.DomainDense(UNITS, tile=tile, num_regions=REGIONS))
        inputs = tf.random.normal([2, 3, UNITS])
        weights = layer.fold(domain)
        self.assertEqual(sorted(weights), ["bias", "kernel"])
        self.assertEqual(weights["kernel"].shape, [UNITS, UNITS])
        expected = tf.tensordot(inputs, weights["kernel"], axes=1) + weights["bias"]
        self.assertAllClose(_call(layer, inputs, [domain] * 2), expected, atol=1e-5)

    @parameterized.expand([(-1,), (0,), (2,)])
    def test_fold_is_the_selected_copy(self, domain):
        layer = _built(per_domain.DomainDense(UNITS, num_regions=REGIONS))
        weights = layer.fold(domain)
        self.assertAllEqual(weights["kernel"], _copies(layer, "kernel")[domain + 1])
        self.assertAllEqual(weights["bias"], _copies(layer, "bias")[domain + 1])

    def test_no_bias_and_activation(self):
        layer = per_domain.DomainDense(UNITS, use_bias=False, activation=tf.nn.relu, num_regions=2)
        _built(layer)
        inputs = np.random.RandomState(8).normal(size=[2, UNITS]).astype(np.float32)
        kernels = _copies(layer, "kernel")
        expected = np.maximum(0, np.stack([inputs[0] @ kernels[2], inputs[1] @ kernels[0]]))
        self.assertAllClose(_call(layer, inputs, [1, -1]), expected, atol=1e-5)
        self.assertEqual(sorted(layer.fold(0)), ["kernel"])

    def test_multi_query_heads_are_identical(self):
        layer = _built(per_domain.DomainDense(UNITS, tile=HEADS, num_regions=REGIONS))
        self.assertEqual(layer.kernel.shape, [UNITS, UNITS // HEADS])
        outputs = _call(layer, tf.random.normal([4, 3, UNITS]), MIXED).numpy()
        heads = np.split(outputs, HEADS, axis=-1)
        for head in heads[1:]:
            self.assertAllEqual(head, heads[0])
        kernel = _copies(layer, "kernel")[2]
        self.assertAllEqual(layer.fold(1)["kernel"], np.concatenate([kernel] * HEADS, axis=1))

    def test_domain_weights_are_the_regions_only(self):
        layer = _built(per_domain.DomainDense(UNITS, num_regions=REGIONS))
        regions = layer.domain_weights()
        self.assertEqual(sorted(regions), list(range(REGIONS)))
        names = {k: sorted(v.name.split("/")[-1] for v in vs) for k, vs in regions.items()}
        self.assertEqual(names[1], ["domain_1_bias:0", "domain_1_kernel:0"])
        region_refs = {v.ref() for v in _domain_variables([layer])}
        self.assertNotIn(layer.kernel.ref(), region_refs)
        self.assertNotIn(layer.bias.ref(), region_refs)
        self.assertLen(layer.trainable_weights, 2 * (REGIONS + 1))

    def test_gradients_of_a_single_domain_batch(self):
        layer = _built(per_domain.DomainDense(UNITS, num_regions=REGIONS))
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(_call(layer, tf.random.normal([2, 3, UNITS]), [1, 1]) ** 2)
        gradients = dict(zip([v.name for v in layer.weights], tape.gradient(loss, layer.weights)))
        for name, gradient in gradients.items():
            self.assertIsNotNone(gradient, name)
            used = "domain_1_" in name
            self.assertEqual(bool(np.any(tf.convert_to_tensor(gradient) != 0)), used, name)

    def test_graph_and_xla_match_eager(self):
        layer = _built(per_domain.DomainDense(UNITS, tile=HEADS, num_regions=REGIONS))
        inputs = tf.random.normal([4, 3, UNITS])

        @tf.function(jit_compile=True)
        def _compiled(inputs, domain):
            return _call(layer, inputs, domain)

        for domain in (MIXED, [2] * 4, [-1] * 4):
            domain = tf.constant(domain)
            self.assertAllClose(_compiled(inputs, domain), _call(layer, inputs, domain), atol=1e-5)

    def test_built_inside_a_function(self):
        layer = per_domain.DomainDense(UNITS, num_regions=REGIONS)
        inputs = tf.random.normal([4, 3, UNITS])
        outputs = tf.function(lambda x: _call(layer, x, MIXED))(inputs)
        self.assertAllClose(outputs, _call(layer, inputs, [-1] * 4), atol=1e-6)
        self.assertAllEqual(_copies(layer, "kernel")[3], _copies(layer, "kernel")[0])

    @parameterized.expand([("mixed_float16", tf.float16), ("mixed_bfloat16", tf.bfloat16)])
    def test_mixed_precision(self, policy, dtype):
        layer = _built(per_domain.DomainDense(UNITS, tile=HEADS, num_regions=REGIONS, dtype=policy))
        self.assertEqual(layer.kernel.dtype, tf.float32)
        inputs = np.random.RandomState(3).normal(size=[4, 3, UNITS]).astype(np.float32)
        outputs = _call(layer, inputs, MIXED)
        self.assertEqual(outputs.dtype, dtype)
        expected = _dense_reference(layer, inputs, MIXED)
        self.assertAllClose(tf.cast(outputs, tf.float32), expected, atol=0.1, rtol=0.05)
        layer.unfold()
        self.assertEqual(layer.fold(0)["kernel"].dtype, tf.float32)

    def test_errors(self):
        with self.assertRaisesRegex(UserError, "multiple of tile"):
            per_domain.DomainDense(6, tile=4)
        with self.assertRaisesRegex(UserError, "set_num_regions"):
            _call(per_domain.DomainDense(UNITS), tf.zeros([1, UNITS]), [-1])
        with self.assertRaisesRegex(UserError, ">= 0"):
            per_domain.DomainDense(UNITS).set_num_regions(-1)
        layer = _built(per_domain.DomainDense(UNITS, num_regions=2))
        with self.assertRaisesRegex(UserError, "built with 2 domain regions"):
            layer.set_num_regions(3)
        with self.assertRaisesRegex(UserError, "domain id 2"):
            layer.fold(2)


class MixedMatmulTest(tf.test.TestCase):
    @parameterized.expand(
        [
            ("wider_output", 4, 12, True, 3),  # [x D_1, ..., x D_k] path
            ("narrower_output", 12, 4, True, 3),  # [n, k*m] then weighted sum
            ("square", 6, 6, False, 3),
            ("rank_2", 4, 12, True, 2),
            ("one_domain", 5, 7, True, 3, 1),
        ]
    )
    def test_equals_the_weighted_sum_of_domain_projections(self, _, n, m, bias, rank, k=DOMAINS):
        rng = np.random.RandomState(3)
        shape = [2, 5][: rank - 1]
        inputs = rng.normal(size=shape + [n]).astype(np.float32)
        kernel = rng.normal(size=[n, k, m]).astype(np.float32)
        biases = rng.normal(size=[k, m]).astype(np.float32) if bias else None
        proportions = _proportions(rng, shape, k)
        outputs = per_domain.mixed_matmul(tf.constant(inputs), kernel, biases, proportions)
        self.assertEqual(outputs.shape, shape + [m])
        self.assertAllClose(outputs, _mix_reference(inputs, kernel, biases, proportions), atol=1e-5)

    def test_compiles_with_xla(self):
        rng = np.random.RandomState(4)
        kernel = rng.normal(size=[4, DOMAINS, 6]).astype(np.float32)

        @tf.function(jit_compile=True)
        def _mix(inputs, proportions):
            return per_domain.mixed_matmul(inputs, kernel, None, proportions)

        for length in (3, 5):  # Dynamic shapes: no data-dependent Python control flow.
            inputs = rng.normal(size=[2, length, 4]).astype(np.float32)
            proportions = _proportions(rng, [2, length])
            self.assertAllClose(
                _mix(inputs, proportions),
                _mix_reference(inputs, kernel, None, proportions),
                atol=1e-5,
            )


class ExportsTest(tf.test.TestCase):
    def test_the_layers_package_exports_the_blocks(self):
        for name in (
            "DomainCopies",
            "DomainDense",
            "DomainLinear",
            "domain_matmul",
            "mixed_matmul",
        ):
            self.assertIs(getattr(layers, name), getattr(per_domain, name))
        from ldr_opennmt.layers import factorized

        # The older import path.
        self.assertIs(factorized.DomainDense, per_domain.DomainDense)
        self.assertIs(factorized.DomainCopies, per_domain.DomainCopies)


if __name__ == "__main__":
    tf.test.main()
