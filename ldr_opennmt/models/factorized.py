"""The Factorized Transformer (Deng et al., 2020): per-domain attention and FFN blocks.

A :class:`FactorizedTransformer` is a multi-domain Transformer whose encoder and
decoder get one design's per-domain blocks (:func:`ldr_opennmt.layers.factorized.install`,
after construction and before build, keeping OpenNMT-tf's stock layers and decoding
cache):

* ``pa`` (Parallel Attention, F5): per-domain Q, K, V and output projections in every
  attention (encoder self, decoder self, cross);
* ``sf`` (Shallow Factorization, F2 + F6): per-domain multi-query K/V in every
  attention and a per-domain square map after every FFN, identity at the start.

Every block has a general copy, which the ``generic`` label selects, and every
region starts equal to it. The number of regions (declared domains plus reserved
ones, or a trained checkpoint's ``data: domain_regions``) is set on the blocks when
the model is initialized, as the embedders of LDR set theirs.

Training: ``params: domain_training: procedure1`` (the default) runs each batch
once with the generic label, whose gradients update the shared parameters and the
general copies, and once with the true labels, whose gradients update each
domain's blocks: the one-run counterpart of the paper's two stages (section 3.1).
``joint`` trains everything with the true labels (the general copies then get no
gradient).
"""

import opennmt

from ldr_opennmt.errors import UserError
from ldr_opennmt.layers import factorized
from ldr_opennmt.layers.context import configured_regions
from ldr_opennmt.models import procedure
from ldr_opennmt.models.sequence_to_sequence import MultiDomainTransformer

#: The designs this model builds (DF needs factorized embeddings, not here yet).
DESIGNS = ("pa", "sf")


class FactorizedTransformer(MultiDomainTransformer):
    """A Transformer with one Factorized design's per-domain attention/FFN blocks."""

    def __init__(
        self,
        design,
        num_layers=6,
        num_units=512,
        num_heads=8,
        ffn_inner_dim=2048,
        dropout=0.1,
        num_reserved_regions=0,
        share_target_embeddings=True,
        domain_training=procedure.PROCEDURE1,
    ):
        """Initializes the model.

        Args:
          design: ``"pa"`` or ``"sf"``.
          num_layers: Number of encoder and decoder layers.
          num_units: Model size.
          num_heads: Number of attention heads.
          ffn_inner_dim: FFN inner size.
          dropout: Dropout, attention dropout and FFN dropout.
          num_reserved_regions: Domain regions kept free for domains added later.
          share_target_embeddings: Tie the target input and output embeddings.
          domain_training: Default training mode (``params: domain_training``
            overrides it).

        Raises:
          UserError: on an unknown design or a negative reserved region count.
        """
        if design not in DESIGNS:
            raise UserError(
                "unknown Factorized Transformer design %r (expected one of: %s)"
                % (design, ", ".join(DESIGNS))
            )
        if num_reserved_regions < 0:
            raise UserError("num_reserved_regions must be >= 0, got %d" % num_reserved_regions)
        share = opennmt.models.EmbeddingsSharingLevel
        super().__init__(
            opennmt.inputters.WordEmbedder(num_units),
            opennmt.inputters.WordEmbedder(num_units),
            domain_training=domain_training,
            num_layers=num_layers,
            num_units=num_units,
            num_heads=num_heads,
            ffn_inner_dim=ffn_inner_dim,
            dropout=dropout,
            attention_dropout=dropout,
            ffn_dropout=dropout,
            share_embeddings=share.TARGET if share_target_embeddings else share.NONE,
        )
        self.design = design
        self.num_reserved_regions = num_reserved_regions
        for stack in (self.encoder, self.decoder):
            factorized.install(stack, design, num_heads, num_regions=0)

    def initialize(self, data_config, params=None):
        super().initialize(data_config, params=params)
        _, regions = configured_regions(
            data_config, self.num_reserved_regions, "the %s Factorized Transformer" % self.design
        )
        for layer in self.domain_layers():
            layer.set_num_regions(regions)

    def set_jit_compile(self, enable):
        super().set_jit_compile(enable)
        # XLA cannot compile the gradient of the blocks' tf.cond in TensorFlow 2.13:
        # under --jit_compile every copy is computed and selected per sentence.
        for layer in self.domain_layers():
            layer.branch_free = bool(enable)

    def unfold(self):
        """Copies every general copy into all domain regions (the curriculum's unfold)."""
        for layer in self.domain_layers():
            layer.unfold()
