"""Domain control (Kobus et al., RANLP 2017): the domain as an input feature.

A small learned domain vector is concatenated to every word embedding. The
``generic`` label gives an all-zero domain vector.
"""

import tensorflow as tf
from opennmt.layers import common

from ldr_opennmt.layers.context import domain_one_hot
from ldr_opennmt.layers.embedding import DomainAwareWordEmbedder


class DomainControlEmbedder(DomainAwareWordEmbedder):
    """Word embedding concatenated with a domain embedding."""

    def __init__(
        self,
        embedding_size=512,
        domain_embedding_size=2,
        num_reserved_regions=0,
        dropout=0.0,
        **kwargs
    ):
        """Initializes the embedder.

        Args:
          embedding_size: Size of the word embedding; the output has
            ``embedding_size + domain_embedding_size`` cells.
          domain_embedding_size: Size of the domain embedding (the paper's
            "2 additional cells").
          num_reserved_regions: Domain vectors kept free for domains added later.
          dropout: The probability to drop units in the word embedding.
          **kwargs: Additional layer keyword arguments.
        """
        super().__init__(
            embedding_size, num_reserved_regions=num_reserved_regions, dropout=dropout, **kwargs
        )
        if domain_embedding_size <= 0:
            raise ValueError("domain_embedding_size must be > 0")
        self.domain_embedding_size = domain_embedding_size

    @property
    def output_size(self):
        """Size of the returned embeddings."""
        return self.embedding_size + self.domain_embedding_size

    def build(self, input_shape):
        self.embedding = self.add_weight("embedding", [self.vocabulary_size, self.embedding_size])
        # A reserved domain vector starts at zero, the generic vector.
        self.domain_vectors = [
            self.add_domain_weight(
                k,
                "vector",
                [self.domain_embedding_size],
                initializer="zeros" if self.is_reserved(k) else None,
            )
            for k in range(self.num_regions)
        ]
        self.built = True

    def call(self, features, training=None):
        ids = features["ids"]
        words = tf.nn.embedding_lookup(self.embedding, ids)
        words = common.dropout(words, self.dropout, training=training)
        table = tf.stack(self.domain_vectors, axis=0)  # [num_regions, size]
        mask = domain_one_hot(self.num_regions, words.dtype, rank=ids.shape.rank + 1)
        domain = tf.tensordot(mask, table, axes=1)  # [batch, 1..., size]
        domain = tf.broadcast_to(
            domain, tf.concat([tf.shape(ids), [self.domain_embedding_size]], 0)
        )
        return tf.concat([words, domain], axis=-1)

    def fused_table(self, domain_id):
        """The word table with the domain vector (zeros for generic) on every row."""
        if domain_id >= self.num_regions:
            raise ValueError(
                "domain id %d, but this layer has %d regions" % (domain_id, self.num_regions)
            )
        words = tf.convert_to_tensor(self.embedding)
        if domain_id >= 0:
            vector = tf.convert_to_tensor(self.domain_vectors[domain_id])
        else:
            vector = tf.zeros([self.domain_embedding_size], dtype=words.dtype)
        vectors = tf.tile(tf.expand_dims(vector, 0), [tf.shape(words)[0], 1])
        return tf.concat([words, vectors], axis=-1)

    def map_v1_weights(self, weights):
        raise NotImplementedError("Domain control embedders have no OpenNMT-tf V1 counterpart")
