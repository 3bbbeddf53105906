"""Lexicalized domain representations (Pham et al., IWSLT 2019, eq. 2).

Each word has a generic embedding ``e_g(v)`` and one small embedding ``e_i(v)``
per domain region. For a sentence of domain ``k`` the regions of every other
domain are zeroed and a dense layer without activation fuses the rest:

    e_k(v) = M_g e_g(v) + M_k e_k(v) + b

so inactive regions and the fusion weights that read them get exactly zero
gradient. Each region and its fusion block are separate variables (named
``domain_<k>_*``) so that updates can be skipped per domain.
"""

import tensorflow as tf
from opennmt.layers import common

from ldr_opennmt.layers.context import domain_one_hot
from ldr_opennmt.layers.embedding import DomainAwareWordEmbedder


class LDREmbedder(DomainAwareWordEmbedder):
    """Word embedder with a generic region and one region per domain."""

    def __init__(
        self,
        embedding_size=512,
        domain_region_size=8,
        num_reserved_regions=0,
        dropout=0.0,
        **kwargs
    ):
        """Initializes the LDR embedder.

        Args:
          embedding_size: Total embedding size and size of the fused output (the
            generic region takes what the domain regions leave).
          domain_region_size: Number of cells of each domain region.
          num_reserved_regions: Regions kept free for domains added later.
          dropout: The probability to drop units in the fused embedding.
          **kwargs: Additional layer keyword arguments.
        """
        super().__init__(
            embedding_size, num_reserved_regions=num_reserved_regions, dropout=dropout, **kwargs
        )
        if domain_region_size <= 0:
            raise ValueError("domain_region_size must be > 0")
        self.domain_region_size = domain_region_size

    @property
    def generic_region_size(self):
        """Size of the generic region."""
        return self.embedding_size - self.num_regions * self.domain_region_size

    def initialize(self, data_config):
        super().initialize(data_config)
        if self.generic_region_size <= 0:
            raise ValueError(
                "LDR embedding of size %d cannot hold %d domain regions of %d cells"
                % (self.embedding_size, self.num_regions, self.domain_region_size)
            )

    def build(self, input_shape):
        size, cells = self.embedding_size, self.domain_region_size
        self.embedding = self.add_weight(
            "embedding", [self.vocabulary_size, self.generic_region_size]
        )
        self.fusion_kernel = self.add_weight("fusion_kernel", [self.generic_region_size, size])
        self.fusion_bias = self.add_weight("fusion_bias", [size], initializer="zeros")
        self.domain_embeddings = []
        self.domain_kernels = []
        for k in range(self.num_regions):
            self.domain_embeddings.append(
                self.add_domain_weight(k, "embedding", [self.vocabulary_size, cells])
            )
            # A reserved region's fusion block starts at zero: its output is the generic
            # one until a domain trains it (its embedding still gets gradients).
            self.domain_kernels.append(
                self.add_domain_weight(
                    k,
                    "fusion_kernel",
                    [cells, size],
                    initializer="zeros" if self.is_reserved(k) else None,
                )
            )
        self.built = True

    def call(self, features, training=None):
        ids = features["ids"]
        generic = tf.nn.embedding_lookup(self.embedding, ids)
        regions = tf.stack(
            [tf.nn.embedding_lookup(table, ids) for table in self.domain_embeddings], axis=-2
        )  # [..., num_regions, cells]
        mask = domain_one_hot(self.num_regions, regions.dtype, rank=ids.shape.rank + 1)
        regions *= tf.expand_dims(mask, -1)
        regions = tf.reshape(
            regions,
            tf.concat([tf.shape(ids), [self.num_regions * self.domain_region_size]], 0),
        )
        inputs = tf.concat([generic, regions], axis=-1)
        kernel = tf.concat([self.fusion_kernel] + self.domain_kernels, axis=0)
        outputs = tf.tensordot(inputs, kernel, axes=1)
        outputs = tf.nn.bias_add(outputs, self.fusion_bias)
        return common.dropout(outputs, self.dropout, training=training)

    def fused_table(self, domain_id):
        """The fused embedding of every vocabulary unit in one domain, ``[V, D]``.

        For a fixed domain the layer is a linear function of the word:
        ``e_k(v) = M_g e_g(v) + M_k e_k(v) + b`` (eq. 2), so its output is this
        table's row ``v`` (without dropout).

        Args:
          domain_id: A domain id, or ``GENERIC_ID`` (-1) for the generic region alone.
        """
        table = tf.matmul(self.embedding, self.fusion_kernel) + self.fusion_bias
        if domain_id >= 0:
            if domain_id >= self.num_regions:
                raise ValueError(
                    "domain id %d, but this layer has %d regions" % (domain_id, self.num_regions)
                )
            table += tf.matmul(self.domain_embeddings[domain_id], self.domain_kernels[domain_id])
        return table

    def map_v1_weights(self, weights):
        raise NotImplementedError("LDR embedders have no OpenNMT-tf V1 counterpart")
