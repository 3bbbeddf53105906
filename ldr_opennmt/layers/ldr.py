"""Lexicalized domain representations (Pham et al., IWSLT 2019, eq. 2).

Each word has a generic embedding ``e_g(v)`` and one small embedding ``e_i(v)``
per domain region. For a sentence of domain ``k`` the regions of every other
domain are zeroed and a dense layer without activation fuses the rest:

    e_k(v) = M_g e_g(v) + M_k e_k(v) + b

so inactive regions and the fusion weights that read them get exactly zero
gradient. Each region and its fusion block are separate variables (named
``domain_<k>_*``) so that updates can be skipped per domain.

The authors' released TF1 code (minhquangpham/LDR, ``model.py``) builds LDR another way:
the generic region is a word embedding of the model's full size, the domain regions sit
beside it, and a bias-free dense layer adds the active region after the input and after
every encoder and decoder layer. :class:`LayerwiseLDREmbedder` is that embedder; the
transforms are :mod:`ldr_opennmt.layers.ldr_transform`. Both embedders can start their
domain regions at zero (``zero_domain_regions``), as the released code does.
"""

import tensorflow as tf
from opennmt.layers import common

from ldr_opennmt.errors import UserError
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
        zero_domain_regions=False,
        **kwargs
    ):
        """Initializes the LDR embedder.

        Args:
          embedding_size: Total embedding size and size of the fused output (the
            generic region takes what the domain regions leave).
          domain_region_size: Number of cells of each domain region.
          num_reserved_regions: Regions kept free for domains added later.
          dropout: The probability to drop units in the fused embedding.
          zero_domain_regions: Start every domain region's embedding at zero (the
            released code's ``tf.zeros_initializer``), so that every label starts as
            generic; otherwise Keras' default (Glorot uniform).
          **kwargs: Additional layer keyword arguments.
        """
        super().__init__(
            embedding_size, num_reserved_regions=num_reserved_regions, dropout=dropout, **kwargs
        )
        self.domain_region_size = _check_region_size(domain_region_size)
        self.zero_domain_regions = bool(zero_domain_regions)

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
            self.domain_embeddings.append(_add_region_table(self, k))
            # A reserved region's output is the generic one until a domain trains it: its
            # fusion block starts at zero (its embedding still gets gradients), unless its
            # embedding does (then the block must not: both would stay zero forever).
            zero = self.is_reserved(k) and not self.zero_domain_regions
            self.domain_kernels.append(
                self.add_domain_weight(
                    k, "fusion_kernel", [cells, size], initializer="zeros" if zero else None
                )
            )
        self.built = True

    def call(self, features, training=None):
        ids = features["ids"]
        generic = tf.nn.embedding_lookup(self.embedding, ids)
        inputs = tf.concat([generic, masked_regions(self, ids)], axis=-1)
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


class LayerwiseLDREmbedder(DomainAwareWordEmbedder):
    """The released code's LDR embedder: a generic embedding of the model's size and the
    masked domain regions beside it, for the LDR transforms of every layer.

    For a sentence of domain ``k`` and word ``v`` the output is
    ``[e_g(v); 0 .. e_k(v) .. 0]``: the generic embedding (``embedding_size`` cells, the
    released configuration's ``src_sharing_embedding_region_size``) followed by every
    domain region, all zero but the sentence's own (``generic``: all zero). No fusion
    happens here: the encoder or decoder that reads it splits the regions off and adds
    ``R_l [0 .. e_k(v) .. 0]`` after its input and after each of its layers
    (:mod:`ldr_opennmt.layers.ldr_transform`; the released ``model.py``, ``make_batch``,
    and ``cell/self_attention_encoder_LDR.py``, ``transform``).

    For a fixed domain this is not one embedding table of the model's size: it has no
    fold, and a model built with it is served by its SavedModel.
    """

    def __init__(
        self,
        embedding_size=512,
        domain_region_size=8,
        num_reserved_regions=0,
        dropout=0.0,
        zero_domain_regions=False,
        **kwargs
    ):
        """Initializes the embedder.

        Args:
          embedding_size: Size of the generic region (the model size).
          domain_region_size: Number of cells of each domain region.
          num_reserved_regions: Regions kept free for domains added later.
          dropout: The probability to drop units in the generic embedding.
          zero_domain_regions: Start every domain region at zero (as the released code).
          **kwargs: Additional layer keyword arguments.
        """
        super().__init__(
            embedding_size, num_reserved_regions=num_reserved_regions, dropout=dropout, **kwargs
        )
        self.domain_region_size = _check_region_size(domain_region_size)
        self.zero_domain_regions = bool(zero_domain_regions)

    @property
    def regions_size(self):
        """Number of cells of all the domain regions together (after the generic ones)."""
        return self.num_regions * self.domain_region_size

    def build(self, input_shape):
        self.embedding = self.add_weight("embedding", [self.vocabulary_size, self.embedding_size])
        self.domain_embeddings = [_add_region_table(self, k) for k in range(self.num_regions)]
        self.built = True

    def call(self, features, training=None):
        ids = features["ids"]
        generic = tf.nn.embedding_lookup(self.embedding, ids)
        generic = common.dropout(generic, self.dropout, training=training)
        return tf.concat([generic, masked_regions(self, ids)], axis=-1)

    def fold(self, domain_id):
        raise UserError(LAYERWISE_FOLD_REFUSAL)

    def fused_table(self, domain_id):
        raise UserError(LAYERWISE_FOLD_REFUSAL)

    def map_v1_weights(self, weights):
        raise NotImplementedError("LDR embedders have no OpenNMT-tf V1 counterpart")


#: Why a model with the LDR transform after every layer does not fold (one line).
LAYERWISE_FOLD_REFUSAL = (
    "the LDR transform after every layer (ldr_transform='every_layer') adds a word- and "
    "domain-dependent vector after each encoder and decoder layer, which no plain Transformer "
    "has: export a SavedModel (onmt-main export), or build the model with "
    "ldr_transform='fusion' to fold it"
)


def _check_region_size(domain_region_size):
    if domain_region_size <= 0:
        raise ValueError("domain_region_size must be > 0")
    return domain_region_size


def _add_region_table(embedder, region):
    """Creates the ``domain_<k>_embedding`` table ``[V, cells]`` of one region of an LDR
    embedder (zeros with its ``zero_domain_regions``, else Keras' default)."""
    return embedder.add_domain_weight(
        region,
        "embedding",
        [embedder.vocabulary_size, embedder.domain_region_size],
        initializer="zeros" if embedder.zero_domain_regions else None,
    )


def masked_regions(embedder, ids):
    """Every domain region of the words :obj:`ids`, all zero but each sentence's own.

    Args:
      embedder: A built LDR embedder (``domain_embeddings``, ``num_regions``,
        ``domain_region_size``).
      ids: The word ids, ``[batch, ...]``.

    Returns:
      ``[batch, ..., num_regions * domain_region_size]``, in the compute dtype; the
      masked regions (``generic``: all of them) are exact zeros, so the weights that read
      them get exactly zero gradient.
    """
    regions = tf.stack(
        [tf.nn.embedding_lookup(table, ids) for table in embedder.domain_embeddings], axis=-2
    )  # [..., num_regions, cells]
    mask = domain_one_hot(embedder.num_regions, regions.dtype, rank=ids.shape.rank + 1)
    regions *= tf.expand_dims(mask, -1)
    return tf.reshape(
        regions,
        tf.concat([tf.shape(ids), [embedder.num_regions * embedder.domain_region_size]], 0),
    )
