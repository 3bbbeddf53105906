import os

import numpy as np
import tensorflow as tf
from parameterized import parameterized

from ldr_opennmt.errors import UserError
from ldr_opennmt.layers import LayerwiseLDREmbedder, LDREmbedder, domain_scope

DOMAINS = ["a", "b", "c"]


def _make_embedder(
    test, embedding_size=10, region=2, reserved=0, dtype=None, randomize=True, **options
):
    vocab = os.path.join(test.get_temp_dir(), "vocab.txt")
    with open(vocab, "w") as f:
        f.write("\n".join(["<blank>", "<s>", "</s>", "x", "y"]) + "\n")
    kwargs = {"dtype": dtype} if dtype else {}
    embedder_class = options.pop("embedder_class", LDREmbedder)
    embedder = embedder_class(
        embedding_size=embedding_size,
        domain_region_size=region,
        num_reserved_regions=reserved,
        **options,
        **kwargs
    )
    embedder.initialize({"vocabulary": vocab, "domains": DOMAINS})
    embedder.build(None)
    if randomize:
        rng = np.random.RandomState(42)
        for variable in embedder.weights:
            variable.assign(rng.normal(size=variable.shape).astype(np.float32))
    return embedder


class LDREmbedderTest(tf.test.TestCase):
    def test_sizes(self):
        embedder = _make_embedder(self, embedding_size=512, region=8, reserved=1)
        self.assertEqual(embedder.num_regions, 4)
        self.assertEqual(embedder.generic_region_size, 480)
        self.assertEqual(embedder.embedding.shape, [6, 480])  # 5 tokens + 1 OOV bucket
        self.assertEqual(sorted(embedder.domain_weights()), [0, 1, 2, 3])

    @parameterized.expand([(-1,), (0,), (2,)])
    def test_fused_table_equals_the_layer_output(self, domain_id):
        embedder = _make_embedder(self)
        ids = tf.constant([[0, 1, 2, 3, 4, 5]])
        with domain_scope(tf.constant([domain_id])):
            outputs = embedder({"ids": ids})
        self.assertAllClose(embedder.fused_table(domain_id), outputs[0], atol=1e-5)

    def test_too_many_regions(self):
        with self.assertRaisesRegex(ValueError, "cannot hold 3 domain regions"):
            _make_embedder(self, embedding_size=6, region=2)

    def test_requires_domains(self):
        vocab = os.path.join(self.get_temp_dir(), "v.txt")
        with open(vocab, "w") as f:
            f.write("a\n")
        with self.assertRaisesRegex(ValueError, "declares no domains"):
            LDREmbedder(8, 2).initialize({"vocabulary": vocab})

    def _reference(self, embedder, ids, domain):
        values = {v.name.split("/")[-1].split(":")[0]: v.numpy() for v in embedder.weights}
        out = values["embedding"][ids] @ values["fusion_kernel"] + values["fusion_bias"]
        for i, k in enumerate(domain):
            if k >= 0:
                out[i] += (
                    values["domain_%d_embedding" % k][ids[i]]
                    @ values["domain_%d_fusion_kernel" % k]
                )
        return out

    def test_masking_matches_equation_2(self):
        embedder = _make_embedder(self)
        ids = np.array([[3, 4, 0], [4, 3, 3], [1, 2, 4]])
        domain = [1, -1, 2]
        with domain_scope(domain):
            outputs = embedder({"ids": tf.constant(ids)})
        self.assertAllClose(outputs, self._reference(embedder, ids, domain), atol=1e-5)

    def test_generic_ignores_all_domain_regions(self):
        embedder = _make_embedder(self)
        ids = tf.constant([[3, 4]])
        with domain_scope([-1]):
            before = embedder({"ids": ids})
        for variable in embedder.domain_weights()[0] + embedder.domain_weights()[2]:
            variable.assign(variable * 10)
        with domain_scope([-1]):
            after = embedder({"ids": ids})
        self.assertAllEqual(before, after)

    def test_step_ids_match_sequence_ids(self):
        # Beam search feeds 1-D ids (one token per hypothesis).
        embedder = _make_embedder(self)
        ids = tf.constant([[3, 4], [4, 4]])
        with domain_scope([0, 2]):
            sequence = embedder({"ids": ids})
        with domain_scope([0, 2]):
            step = embedder({"ids": ids[:, 1]})
        self.assertAllClose(sequence[:, 1], step)

    def test_gradients_match_hand_computed(self):
        embedder = _make_embedder(self)
        ids = np.array([[3, 4], [4, 4], [0, 3]])
        domain = [1, -1, 1]
        weights = np.random.RandomState(0).normal(size=(3, 2, 10)).astype(np.float32)
        with tf.GradientTape() as tape:
            with domain_scope(domain):
                outputs = embedder({"ids": tf.constant(ids)})
            loss = tf.reduce_sum(outputs * weights)
        variables = embedder.trainable_weights
        grads = dict(
            (v.name.split("/")[-1].split(":")[0], tf.convert_to_tensor(g).numpy())
            for v, g in zip(variables, tape.gradient(loss, variables))
        )
        values = {v.name.split("/")[-1].split(":")[0]: v.numpy() for v in variables}

        # dL/d(output) = weights; out = Eg[ids] Mg + [d=k] Ek[ids] Mk + b.
        expected_bias = weights.sum(axis=(0, 1))
        expected_mg = np.einsum("bti,bto->io", values["embedding"][ids], weights)
        expected_eg = np.zeros_like(values["embedding"])
        np.add.at(expected_eg, ids, weights @ values["fusion_kernel"].T)
        active = np.array([d == 1 for d in domain])
        expected_m1 = np.einsum(
            "bti,bto->io", values["domain_1_embedding"][ids[active]], weights[active]
        )
        expected_e1 = np.zeros_like(values["domain_1_embedding"])
        np.add.at(expected_e1, ids[active], weights[active] @ values["domain_1_fusion_kernel"].T)

        self.assertAllClose(grads["fusion_bias"], expected_bias, atol=1e-4)
        self.assertAllClose(grads["fusion_kernel"], expected_mg, atol=1e-4)
        self.assertAllClose(grads["embedding"], expected_eg, atol=1e-4)
        self.assertAllClose(grads["domain_1_fusion_kernel"], expected_m1, atol=1e-4)
        self.assertAllClose(grads["domain_1_embedding"], expected_e1, atol=1e-4)
        # Inactive regions and the fusion weights reading them: exactly zero.
        for k in (0, 2):
            self.assertAllEqual(grads["domain_%d_embedding" % k], np.zeros((6, 2)))
            self.assertAllEqual(grads["domain_%d_fusion_kernel" % k], np.zeros((2, 10)))

    @parameterized.expand([("float16",), ("bfloat16",)])
    def test_mixed_precision_masks_follow_compute_dtype(self, compute_dtype):
        policy = tf.keras.mixed_precision.Policy("mixed_%s" % compute_dtype)
        embedder = _make_embedder(self, dtype=policy)
        with domain_scope([0, -1]):
            outputs = embedder({"ids": tf.constant([[3, 4], [4, 0]])})
        self.assertEqual(outputs.dtype, tf.as_dtype(compute_dtype))
        self.assertEqual(embedder.embedding.dtype, tf.float32)


class ZeroDomainRegionsTest(tf.test.TestCase):
    """``zero_domain_regions``: the released code's ``tf.zeros_initializer`` on its LDR
    embedding tables (``model.py``, ``src_ldr_embedding``)."""

    @parameterized.expand([(LDREmbedder,), (LayerwiseLDREmbedder,)])
    def test_domain_regions_start_at_zero(self, embedder_class):
        embedder = _make_embedder(
            self,
            reserved=1,
            randomize=False,
            embedder_class=embedder_class,
            zero_domain_regions=True,
        )
        for table in embedder.domain_embeddings:
            self.assertAllEqual(table, np.zeros(table.shape))
        self.assertGreater(np.abs(embedder.embedding.numpy()).max(), 0)
        ids = tf.constant([[3, 4, 0]])
        outputs = []
        for domain in (0, 2, 3, -1):  # Every label, the reserved region's too: generic.
            with domain_scope([domain]):
                outputs.append(embedder({"ids": ids}))
        for output in outputs[1:]:
            self.assertAllEqual(output, outputs[0])

    def test_default_initializer_is_not_zero(self):
        embedder = _make_embedder(self, randomize=False)
        for table in embedder.domain_embeddings:
            self.assertGreater(np.abs(table.numpy()).max(), 0)

    def test_reserved_regions_still_train(self):
        # A reserved fusion block starts at zero, unless the region's embedding does:
        # both at zero would give both a zero gradient forever.
        plain = _make_embedder(self, reserved=1, randomize=False)
        self.assertAllEqual(plain.domain_kernels[3], np.zeros([2, 10]))
        zero = _make_embedder(self, reserved=1, randomize=False, zero_domain_regions=True)
        self.assertGreater(np.abs(zero.domain_kernels[3].numpy()).max(), 0)
        with tf.GradientTape() as tape:
            with domain_scope([3]):
                loss = tf.reduce_sum(zero({"ids": tf.constant([[3, 4]])}) ** 2)
        gradient = tape.gradient(loss, zero.domain_embeddings[3])
        self.assertGreater(np.abs(tf.convert_to_tensor(gradient).numpy()).max(), 0)


class LayerwiseLDREmbedderTest(tf.test.TestCase):
    """The released code's layout: the generic embedding of the model's size, then every
    domain region, all zero but the sentence's own (``model.py``, ``make_batch``)."""

    def test_output_is_generic_then_masked_regions(self):
        embedder = _make_embedder(self, embedding_size=8, embedder_class=LayerwiseLDREmbedder)
        self.assertEqual(embedder.embedding.shape, [6, 8])  # The whole size: no fusion.
        self.assertEqual(embedder.regions_size, 6)
        ids = np.array([[3, 4], [4, 0], [1, 3]])
        domain = [1, -1, 2]
        with domain_scope(domain):
            outputs = embedder({"ids": tf.constant(ids)}).numpy()
        self.assertEqual(outputs.shape, (3, 2, 14))
        self.assertAllClose(outputs[..., :8], embedder.embedding.numpy()[ids])
        for i, k in enumerate(domain):
            regions = outputs[i, :, 8:].reshape(2, 3, 2)
            for region in range(3):
                if region == k:
                    table = embedder.domain_embeddings[region].numpy()
                    self.assertAllClose(regions[:, region], table[ids[i]])
                else:
                    self.assertAllEqual(regions[:, region], np.zeros([2, 2]))

    def test_it_has_no_fold(self):
        embedder = _make_embedder(self, embedder_class=LayerwiseLDREmbedder)
        for method in (embedder.fold, embedder.fused_table):
            with self.assertRaisesRegex(
                UserError, "^the LDR transform after every layer .*SavedModel"
            ):
                method(0)


if __name__ == "__main__":
    tf.test.main()
