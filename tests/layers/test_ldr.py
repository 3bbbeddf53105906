import os

import numpy as np
import tensorflow as tf
from parameterized import parameterized

from ldr_opennmt.layers import LDREmbedder, domain_scope

DOMAINS = ["a", "b", "c"]


def _make_embedder(test, embedding_size=10, region=2, reserved=0, dtype=None):
    vocab = os.path.join(test.get_temp_dir(), "vocab.txt")
    with open(vocab, "w") as f:
        f.write("\n".join(["<blank>", "<s>", "</s>", "x", "y"]) + "\n")
    kwargs = {"dtype": dtype} if dtype else {}
    embedder = LDREmbedder(
        embedding_size=embedding_size,
        domain_region_size=region,
        num_reserved_regions=reserved,
        **kwargs
    )
    embedder.initialize({"vocabulary": vocab, "domains": DOMAINS})
    embedder.build(None)
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


if __name__ == "__main__":
    tf.test.main()
