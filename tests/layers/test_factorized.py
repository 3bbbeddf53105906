import os

import numpy as np
import opennmt
import tensorflow as tf
from opennmt.layers import common
from parameterized import parameterized

from ldr_opennmt.errors import UserError
from ldr_opennmt.layers import factorized
from ldr_opennmt.layers.context import DomainSpecificLayer, domain_scope

REGIONS = 3
UNITS = 8
HEADS = 2
MIXED = [1, -1, 0, 1]


def _randomize(variables, seed, scale=0.5):
    rng = np.random.RandomState(seed)
    for variable in variables:
        variable.assign(rng.normal(scale=scale, size=variable.shape).astype(np.float32))


def _domain_variables(layers):
    return [v for layer in layers for vs in layer.domain_weights().values() for v in vs]


def _is_region(variable):
    return variable.name.split("/")[-1].startswith("domain_")


def _call(layer, inputs, domain, **kwargs):
    with domain_scope(domain):
        return layer(inputs, **kwargs)


def _built(layer, depth=UNITS, rank=3, seed=0):
    """Builds :obj:`layer` and gives every variable (general and regions) its own values."""
    _call(layer, tf.zeros([1] * (rank - 1) + [depth]), [-1])
    _randomize(layer.weights, seed)
    return layer


def _copies(layer, name):
    return [v.numpy() for v in layer.copies(name)]


class FactorizedDenseErrorsTest(tf.test.TestCase):
    def test_errors(self):
        with self.assertRaisesRegex(UserError, "d_inner must be > 0"):
            factorized.FactorizedDense(UNITS, d_inner=0)


class DomainAdaptedDenseTest(tf.test.TestCase):
    def _layer(self):
        layer = factorized.DomainAdaptedDense(UNITS, num_regions=REGIONS)
        _call(layer, tf.zeros([1, 1, 2 * UNITS]), [-1])
        _randomize([layer.kernel, layer.bias], seed=4)
        return layer

    def _plain(self, layer, inputs):
        return tf.tensordot(inputs, layer.kernel, axes=1) + layer.bias

    def test_identity_initialization_equals_the_plain_dense(self):
        layer = self._layer()
        self.assertAllEqual(layer.adapter, np.eye(UNITS))
        self.assertFalse(layer.adapter.trainable)
        inputs = tf.random.normal([4, 3, 2 * UNITS])
        for domain in ([-1] * 4, [2] * 4, MIXED):
            self.assertAllClose(_call(layer, inputs, domain), self._plain(layer, inputs), atol=1e-5)

    def test_random_adapters(self):
        layer = self._layer()
        _randomize(_domain_variables([layer]), seed=5)
        inputs = tf.random.normal([4, 3, 2 * UNITS])
        plain = self._plain(layer, inputs).numpy()
        adapters = _copies(layer, "adapter")
        expected = np.stack([plain[i] @ adapters[k + 1] for i, k in enumerate(MIXED)])
        self.assertAllClose(_call(layer, inputs, MIXED), expected, atol=1e-4)
        for domain in (-1, 0, 2):
            weights = layer.fold(domain)
            folded = tf.tensordot(inputs, weights["kernel"], axes=1) + weights["bias"]
            self.assertAllClose(_call(layer, inputs, [domain] * 4), folded, atol=1e-4)

    def test_variables(self):
        layer = self._layer()
        self.assertEqual(
            sorted(v.name.split("/")[-1] for v in layer.domain_weights()[0]), ["domain_0_adapter:0"]
        )
        self.assertEqual(
            sorted(v.name.split("/")[-1] for v in layer.trainable_weights if not _is_region(v)),
            ["bias:0", "kernel:0"],
        )
        self.assertEqual(
            [v.name.split("/")[-1] for v in layer.non_trainable_weights], ["adapter:0"]
        )


class FactorizedDenseTest(tf.test.TestCase):
    def test_equation_6_and_fold(self):
        layer = factorized.FactorizedDense(
            2 * UNITS, d_inner=3, activation=tf.nn.relu, num_regions=REGIONS
        )
        _built(layer)
        self.assertEqual(layer.shared_kernel.shape, [UNITS, 3])
        self.assertEqual(layer.kernel.shape, [3, 2 * UNITS])
        inputs = tf.random.normal([4, 5, UNITS])
        shared = np.tensordot(inputs, layer.shared_kernel.numpy(), axes=1)
        kernels, biases = _copies(layer, "kernel"), _copies(layer, "bias")
        expected = np.stack(
            [shared[i] @ kernels[k + 1] + biases[k + 1] for i, k in enumerate(MIXED)]
        )
        self.assertAllClose(_call(layer, inputs, MIXED), np.maximum(expected, 0), atol=1e-5)
        weights = layer.fold(1)
        folded = tf.nn.relu(tf.tensordot(inputs, weights["kernel"], axes=1) + weights["bias"])
        self.assertAllClose(_call(layer, inputs, [1] * 4), folded, atol=1e-5)


D_INNER = 3
WORDS = ["<blank>", "<s>", "</s>", "x", "y", "z"]
VOCAB = len(WORDS) + 1  # One OOV bucket.


def _embedder(test, reserved=0, randomize=True, dropout=0.0, dtype=None, embedding=None):
    """An initialized and built FactorizedEmbedder (regions: 3 domains + reserved)."""
    vocab = os.path.join(test.get_temp_dir(), "vocab.txt")
    with open(vocab, "w") as f:
        f.write("\n".join(WORDS) + "\n")
    kwargs = {"dtype": dtype} if dtype else {}
    embedder = factorized.FactorizedEmbedder(
        UNITS, D_INNER, num_reserved_regions=reserved, dropout=dropout, **kwargs
    )
    data = {"vocabulary": vocab, "domains": ["a", "b", "c"]}
    if embedding:
        data["embedding"] = {"path": embedding}
    embedder.initialize(data)
    _call(embedder, {"ids": tf.constant([[0]])}, [-1])
    if randomize:
        _randomize(embedder.weights, seed=12)
    return embedder


def _output(embedder, use_bias=True, seed=13, **kwargs):
    layer = factorized.FactorizedOutput(embedder, use_bias=use_bias, **kwargs)
    _call(layer, tf.zeros([1, UNITS]), [-1])
    if use_bias:
        _randomize([layer.bias], seed)
    return layer


def _embedding_reference(embedder, ids, domain):
    """table[ids] @ projection_k per sentence (numpy)."""
    table, projections = embedder.embedding.numpy(), _copies(embedder, "projection")
    return np.stack([table[ids[i]] @ projections[k + 1] for i, k in enumerate(domain)])


def _logits_reference(layer, inputs, domain):
    """h @ (W^C W_k)^T + b per sentence (numpy)."""
    embedder = layer.embedder
    table, projections = embedder.embedding.numpy(), _copies(embedder, "projection")
    bias = layer.bias.numpy() if layer.use_bias else 0
    return np.stack(
        [inputs[i] @ (table @ projections[k + 1]).T + bias for i, k in enumerate(domain)]
    )


IDS = np.random.RandomState(9).randint(0, VOCAB, size=[4, 5])


class FactorizedEmbedderTest(tf.test.TestCase):
    def test_sizes_and_variables(self):
        embedder = _embedder(self, reserved=1)
        self.assertEqual(embedder.num_regions, 4)
        self.assertEqual(embedder.embedding.shape, [VOCAB, D_INNER])
        self.assertEqual(embedder.projection.shape, [D_INNER, UNITS])
        self.assertEqual(sorted(embedder.domain_weights()), [0, 1, 2, 3])
        self.assertEqual(
            [v.name.split("/")[-1] for v in embedder.domain_weights()[3]],
            ["domain_3_projection:0"],
        )
        shared = [v for v in embedder.trainable_weights if not _is_region(v)]
        self.assertEqual(
            sorted(v.name.split("/")[-1] for v in shared), ["embedding:0", "projection:0"]
        )
        self.assertIsInstance(embedder, opennmt.inputters.WordEmbedder)
        self.assertIsInstance(embedder, DomainSpecificLayer)

    def test_regions_start_as_generic(self):
        embedder = _embedder(self, reserved=1, randomize=False)
        general = _copies(embedder, "projection")[0]
        self.assertGreater(np.abs(general).max(), 0)
        for region in _copies(embedder, "projection")[1:]:
            self.assertAllEqual(region, general)
        generic = _call(embedder, {"ids": IDS}, [-1] * 4)
        for domain in ([0] * 4, [3] * 4, MIXED):
            self.assertAllEqual(_call(embedder, {"ids": IDS}, domain), generic)

    @parameterized.expand([("mixed", MIXED), ("generic", [-1] * 4), ("single", [2] * 4)])
    def test_each_sentence_uses_its_region(self, _, domain):
        embedder = _embedder(self)
        outputs = _call(embedder, {"ids": IDS}, domain)
        self.assertAllClose(outputs, _embedding_reference(embedder, IDS, domain), atol=1e-5)
        # Beam search: one id per (tiled) sentence.
        outputs = _call(embedder, {"ids": IDS[:, 0]}, domain)
        self.assertAllClose(outputs, _embedding_reference(embedder, IDS[:, 0], domain), atol=1e-5)

    @parameterized.expand([("mixed", MIXED), ("single", [1] * 4)])
    def test_branch_free_path_for_xla(self, _, domain):
        embedder = _embedder(self)
        embedder.branch_free = True
        compiled = tf.function(lambda ids: _call(embedder, {"ids": ids}, domain), jit_compile=True)
        outputs = compiled(tf.constant(IDS))
        self.assertAllClose(outputs, _embedding_reference(embedder, IDS, domain), atol=1e-5)

    @parameterized.expand([(-1,), (0,), (2,)])
    def test_fold_equals_the_output(self, domain):
        embedder = _embedder(self)
        weights = embedder.fold(domain)
        self.assertEqual(sorted(weights), ["embedding"])
        self.assertEqual(weights["embedding"].shape, [VOCAB, UNITS])
        outputs = _call(embedder, {"ids": tf.range(VOCAB)[tf.newaxis]}, [domain])
        self.assertAllClose(weights["embedding"], outputs[0], atol=1e-5)

    def test_unfold_copies_the_general_copy(self):
        embedder = _embedder(self)
        generic = _call(embedder, {"ids": IDS}, [-1] * 4)
        self.assertNotAllClose(_call(embedder, {"ids": IDS}, [0] * 4), generic)
        embedder.unfold()
        general = _copies(embedder, "projection")[0]
        for region in _copies(embedder, "projection")[1:]:
            self.assertAllEqual(region, general)
        self.assertAllClose(_call(embedder, {"ids": IDS}, MIXED), generic, atol=1e-6)

    def test_dropout(self):
        embedder = _embedder(self, dropout=0.5)
        ids = {"ids": tf.constant(IDS)}
        with domain_scope([1] * 4):
            inference = embedder(ids, training=False)
            training = embedder(ids, training=True)
        self.assertAllClose(inference, _embedding_reference(embedder, IDS, [1] * 4), atol=1e-5)
        self.assertTrue(np.any(training.numpy() == 0))
        kept = training.numpy() != 0
        self.assertAllClose(training.numpy()[kept], 2 * inference.numpy()[kept], atol=1e-5)

    def test_mixed_precision(self):
        embedder = _embedder(self, dtype="mixed_bfloat16")
        self.assertEqual(embedder.embedding.dtype, tf.float32)
        outputs = _call(embedder, {"ids": IDS}, MIXED)
        self.assertEqual(outputs.dtype, tf.bfloat16)
        expected = _embedding_reference(embedder, IDS, MIXED)
        self.assertAllClose(tf.cast(outputs, tf.float32), expected, atol=0.05, rtol=0.05)

    def test_errors(self):
        with self.assertRaisesRegex(UserError, "d_inner must be > 0"):
            factorized.FactorizedEmbedder(UNITS, 0)
        with self.assertRaisesRegex(UserError, "embedding_size must be > 0"):
            factorized.FactorizedEmbedder(0, D_INNER)
        with self.assertRaisesRegex(UserError, "^FactorizedEmbedder: pretrained embeddings"):
            _embedder(self, embedding="glove.txt")
        embedder = _embedder(self)
        with self.assertRaisesRegex(UserError, "domain id 3"):
            embedder.fold(3)
        with self.assertRaisesRegex(UserError, "built with 3 domain regions"):
            embedder.set_num_regions(4)


class FactorizedOutputTest(tf.test.TestCase):
    @parameterized.expand([("mixed", MIXED), ("generic", [-1] * 4), ("single", [0] * 4)])
    def test_logits_are_the_tied_factorized_embedding(self, _, domain):
        layer = _output(_embedder(self))
        for shape in ([4, 3, UNITS], [4, UNITS]):  # Teacher forcing, one decoding step.
            inputs = np.random.RandomState(5).normal(size=shape).astype(np.float32)
            logits = _call(layer, inputs, domain)
            self.assertEqual(logits.shape, shape[:-1] + [VOCAB])
            self.assertAllClose(logits, _logits_reference(layer, inputs, domain), atol=1e-4)

    def test_tied_variables_only(self):
        embedder = _embedder(self)
        layer = _output(embedder)
        self.assertIs(layer.embedder, embedder)
        self.assertEqual([v.name.split("/")[-1] for v in layer.weights], ["bias:0"])
        self.assertEqual(layer.bias.shape, [VOCAB])
        self.assertEqual(list(layer.submodules), [])
        self.assertNotIsInstance(layer, DomainSpecificLayer)
        self.assertEqual(_output(embedder, use_bias=False).weights, [])
        # One checkpoint entry per variable: the embedder's are not saved again.
        path = tf.train.Checkpoint(embedder=embedder, output=layer).write(
            os.path.join(self.get_temp_dir(), "ckpt")
        )
        names = [n for n in tf.train.list_variables(path) if n[0].endswith("VARIABLE_VALUE")]
        self.assertLen(names, len(embedder.weights) + 1)
        # Tied: the logits train the embedder's table and the sentence's region.
        inputs = tf.random.normal([4, 3, UNITS])
        variables = [embedder.embedding] + embedder.copies("projection")
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(_call(layer, inputs, [1] * 4) ** 2)
        gradients = [tf.convert_to_tensor(g) for g in tape.gradient(loss, variables)]
        used = [True, False, False, True, False]  # Table, general, region 0, 1, 2.
        for gradient, expected in zip(gradients, used):
            self.assertEqual(bool(np.any(gradient.numpy() != 0)), expected)

    def test_attributes(self):
        layer = _output(_embedder(self))
        self.assertEqual(layer.units, VOCAB)
        self.assertTrue(layer.use_bias)
        with self.assertRaisesRegex(UserError, "no single kernel"):
            layer.kernel

    @parameterized.expand([(-1,), (0,), (2,)])
    def test_fold_equals_the_layer(self, domain):
        layer = _output(_embedder(self))
        weights = layer.fold(domain)
        self.assertEqual(weights["kernel"].shape, [UNITS, VOCAB])
        inputs = tf.random.normal([2, 3, UNITS])
        expected = tf.tensordot(inputs, weights["kernel"], axes=1) + weights["bias"]
        self.assertAllClose(_call(layer, inputs, [domain] * 2), expected, atol=1e-4)

    def test_branch_free_follows_the_embedder(self):
        layer = _output(_embedder(self))
        layer.embedder.branch_free = True
        inputs = np.random.RandomState(6).normal(size=[4, UNITS]).astype(np.float32)
        compiled = tf.function(lambda x: _call(layer, x, MIXED), jit_compile=True)
        self.assertAllClose(compiled(inputs), _logits_reference(layer, inputs, MIXED), atol=1e-4)

    def test_mixed_precision(self):
        layer = _output(_embedder(self, dtype="mixed_bfloat16"), dtype="mixed_bfloat16")
        inputs = np.random.RandomState(7).normal(size=[4, 3, UNITS]).astype(np.float32)
        logits = _call(layer, inputs, MIXED)
        self.assertEqual(logits.dtype, tf.bfloat16)
        expected = _logits_reference(layer, inputs, MIXED)
        self.assertAllClose(tf.cast(logits, tf.float32), expected, atol=0.1, rtol=0.05)

    def test_errors(self):
        with self.assertRaisesRegex(UserError, "ties a FactorizedEmbedder, not WordEmbedder"):
            factorized.FactorizedOutput(opennmt.inputters.WordEmbedder(UNITS))
        unbuilt = factorized.FactorizedEmbedder(UNITS, D_INNER)
        with self.assertRaisesRegex(ValueError, "build the target embedder first"):
            _call(factorized.FactorizedOutput(unbuilt), tf.zeros([1, UNITS]), [-1])


def _encoder():
    return opennmt.encoders.SelfAttentionEncoder(
        num_layers=1, num_units=UNITS, num_heads=HEADS, ffn_inner_dim=16, dropout=0.0
    )


def _decoder():
    decoder = opennmt.decoders.SelfAttentionDecoder(
        num_layers=1, num_units=UNITS, num_heads=HEADS, ffn_inner_dim=16, dropout=0.0
    )
    return decoder


def _install(stack, design):
    return factorized.install(stack, design, HEADS, REGIONS, d_inner=4)


INSTALLED = {
    "pa": {
        "encoder": 4 * [factorized.DomainDense],
        "decoder": 8 * [factorized.DomainDense],
    },
    "sf": {
        "encoder": 2 * [factorized.DomainDense] + [factorized.DomainAdaptedDense],
        "decoder": 4 * [factorized.DomainDense] + [factorized.DomainAdaptedDense],
    },
    "df_attention_ffn": {
        "encoder": 2 * [factorized.DomainDense] + 2 * [factorized.FactorizedDense],
        "decoder": 4 * [factorized.DomainDense] + 2 * [factorized.FactorizedDense],
    },
}


class InstallTest(tf.test.TestCase):
    def _assert_differ(self, outputs):
        for i in range(len(outputs)):
            for j in range(i + 1, len(outputs)):
                self.assertGreater(np.abs(outputs[i] - outputs[j]).max(), 1e-3)

    @parameterized.expand([(design,) for design in factorized.DESIGNS])
    def test_encoder(self, design):
        encoder = _encoder()
        stock = [m for m in encoder.submodules if isinstance(m, common.Dense)]
        installed = _install(encoder, design)
        self.assertCountEqual([type(layer) for layer in installed], INSTALLED[design]["encoder"])
        self.assertEqual(factorized.domain_layers(encoder), installed)
        inputs = tf.random.normal([4, 5, UNITS])

        def _run(domain, x=inputs):
            with domain_scope(domain):
                return encoder(x, sequence_length=tf.fill([x.shape[0]], 5), training=False)[0]

        generic = _run([-1] * 4)
        submodules = encoder.submodules
        replaced = [d for d in stock if all(d is not m for m in submodules)]
        self.assertLen(replaced, len(installed))
        self.assertFalse(any(d.built for d in replaced))
        self.assertEqual({layer.num_regions for layer in installed}, {REGIONS})
        named = [v for layer in installed for v in layer.weights if _is_region(v)]
        self.assertCountEqual(
            [v.ref() for v in _domain_variables(installed)], [v.ref() for v in named]
        )
        for domain in ([0] * 4, [2] * 4, MIXED):
            self.assertAllClose(_run(domain), generic, atol=1e-5)

        _randomize(_domain_variables(installed), seed=6)
        outputs = [_run([k] * 4).numpy() for k in (-1, 0, 1, 2)]
        self._assert_differ(outputs)
        mixed = _run(MIXED)
        for i, domain in enumerate(MIXED):
            self.assertAllClose(mixed[i : i + 1], _run([domain], inputs[i : i + 1]), atol=1e-5)

    @parameterized.expand([(design,) for design in factorized.DESIGNS])
    def test_decoder_with_incremental_decoding(self, design):
        decoder = _decoder()
        installed = _install(decoder, design)
        self.assertCountEqual([type(layer) for layer in installed], INSTALLED[design]["decoder"])
        decoder.initialize(vocab_size=11)
        batch, time = 4, 3
        inputs = tf.random.normal([batch, time, UNITS])
        memory = tf.random.normal([batch, 5, UNITS])
        memory_length = tf.constant([5, 3, 4, 5])

        def _full(domain, rows=slice(None)):
            with domain_scope(domain):
                decoder.initial_state(
                    memory=memory[rows], memory_sequence_length=memory_length[rows]
                )
                x = inputs[rows]
                return decoder(x, tf.fill([x.shape[0]], time), training=False)[0]

        @tf.function
        def _incremental(domain):
            with domain_scope(domain):
                state = decoder.initial_state(memory=memory, memory_sequence_length=memory_length)
                logits = []
                for step in range(time):
                    step_logits, state, _ = decoder(
                        inputs[:, step], tf.constant(step), state=state, training=False
                    )
                    logits.append(step_logits)
                return tf.stack(logits, axis=1)

        generic = _full([-1] * batch)
        for domain in ([1] * batch, MIXED):
            self.assertAllClose(_full(domain), generic, atol=1e-5)

        _randomize(_domain_variables(installed), seed=7)
        self._assert_differ([_full([k] * batch).numpy() for k in (-1, 0, 1, 2)])
        mixed = _full(MIXED)
        self.assertAllClose(_incremental(tf.constant(MIXED)), mixed, atol=1e-5)
        for i, domain in enumerate(MIXED):
            self.assertAllClose(mixed[i : i + 1], _full([domain], slice(i, i + 1)), atol=1e-5)

    def test_errors(self):
        with self.assertRaisesRegex(UserError, "unknown factorized design 'df'"):
            factorized.install(_encoder(), "df", HEADS, REGIONS)
        with self.assertRaisesRegex(UserError, "needs d_inner > 0"):
            factorized.install(_encoder(), "df_attention_ffn", HEADS, REGIONS, d_inner=0)
        with self.assertRaisesRegex(UserError, "num_heads is 4"):
            factorized.install(_encoder(), "pa", 4, REGIONS)
        encoder = _encoder()
        factorized.install(encoder, "sf", HEADS, REGIONS)
        with self.assertRaisesRegex(UserError, "already installed"):
            factorized.install(encoder, "sf", HEADS, REGIONS)
        built = _encoder()
        built(tf.zeros([1, 2, UNITS]))
        with self.assertRaisesRegex(UserError, "unbuilt"):
            factorized.install(built, "pa", HEADS, REGIONS)

    def test_installed_layers_are_domain_specific(self):
        decoder = _decoder()
        for layer in _install(decoder, "sf"):
            self.assertIsInstance(layer, DomainSpecificLayer)


class ParameterCountTest(tf.test.TestCase):
    @parameterized.expand([("df", 1.01), ("sf", 1.13), ("pa", 1.79)])
    def test_paper_ratios(self, design, ratio):
        self.assertEqual(
            round(factorized.parameter_ratio(design, **factorized.PAPER_SIZES), 2), ratio
        )

    def test_vanilla(self):
        # Two 50,000 x 512 tables, 6 x (4 + 8) d^2 + 6 x (8 + 8) d^2 (FFN 2048 = 4 d).
        self.assertEqual(
            factorized.parameter_count("vanilla", **factorized.PAPER_SIZES),
            2 * 50000 * 512 + 6 * 12 * 512**2 + 6 * 16 * 512**2,
        )

    def test_errors(self):
        with self.assertRaisesRegex(UserError, "unknown design"):
            factorized.parameter_count("adapters")
        with self.assertRaisesRegex(UserError, "d_inner > 0"):
            factorized.parameter_count("df", d_inner=0)
