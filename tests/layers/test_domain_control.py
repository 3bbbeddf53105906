import os

import numpy as np
import tensorflow as tf

from ldr_opennmt.layers import DomainControlEmbedder, domain_scope


class DomainControlEmbedderTest(tf.test.TestCase):
    def _make(self):
        vocab = os.path.join(self.get_temp_dir(), "vocab.txt")
        with open(vocab, "w") as f:
            f.write("a\nb\nc\n")
        embedder = DomainControlEmbedder(embedding_size=6, domain_embedding_size=2)
        embedder.initialize({"vocabulary": vocab, "domains": ["x", "y"]})
        embedder.build(None)
        return embedder

    def test_domain_vector_concatenated(self):
        embedder = self._make()
        self.assertEqual(embedder.output_size, 8)
        embedder.domain_vectors[0].assign([1.0, 2.0])
        embedder.domain_vectors[1].assign([3.0, 4.0])
        ids = tf.constant([[0, 1, 2], [2, 2, 0], [1, 0, 0]])
        with domain_scope([1, -1, 0]):
            outputs = embedder({"ids": ids})
        self.assertEqual(outputs.shape, [3, 3, 8])
        self.assertAllClose(outputs[..., :6], tf.nn.embedding_lookup(embedder.embedding, ids))
        self.assertAllClose(outputs[0, :, 6:], np.tile([3.0, 4.0], (3, 1)))
        self.assertAllEqual(outputs[1, :, 6:], np.zeros((3, 2)))  # generic
        self.assertAllClose(outputs[2, :, 6:], np.tile([1.0, 2.0], (3, 1)))
        with domain_scope([1, 0]):
            step = embedder({"ids": tf.constant([2, 0])})
        self.assertAllClose(step[:, 6:], [[3.0, 4.0], [1.0, 2.0]])

    def test_domain_weights_are_registered(self):
        embedder = self._make()
        self.assertEqual(
            {k: [v.name.split("/")[-1] for v in vs] for k, vs in embedder.domain_weights().items()},
            {0: ["domain_0_vector:0"], 1: ["domain_1_vector:0"]},
        )


if __name__ == "__main__":
    tf.test.main()
