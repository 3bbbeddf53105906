"""The Factorized Transformer (Deng et al., 2020): per-domain embedding, attention and FFN blocks.

A :class:`FactorizedTransformer` is a multi-domain Transformer whose encoder and
decoder get one design's per-domain blocks (:func:`ldr_opennmt.layers.factorized.install`,
after construction and before build, keeping OpenNMT-tf's stock layers and decoding
cache):

* ``pa`` (Parallel Attention, F5): per-domain Q, K, V and output projections in every
  attention (encoder self, decoder self, cross);
* ``sf`` (Shallow Factorization, F2 + F6): per-domain multi-query K/V in every
  attention and a per-domain square map after every FFN, identity at the start;
* ``df`` (Deep Factorization, F1 + F2 + F3 + F4, ``d_inner`` 280 in the paper):
  per-domain multi-query K/V in every attention, both FFN linears factorized
  through ``d_inner`` (eq. 6), factorized source and target embeddings
  (:class:`~ldr_opennmt.layers.factorized.FactorizedEmbedder`, eq. 1) and the
  output embedding tied with the target one
  (:class:`~ldr_opennmt.layers.factorized.FactorizedOutput`: the logits of a
  sentence of domain ``d`` are ``h (W^C W_d)^T``, sharing ``W^C`` and the ``W_d``
  copies with the target embedder, as the paper shares target input and output
  embeddings).

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

import functools

import opennmt

from ldr_opennmt import family_table
from ldr_opennmt.errors import UserError
from ldr_opennmt.layers import factorized
from ldr_opennmt.models import procedure
from ldr_opennmt.models.sequence_to_sequence import MultiDomainTransformer, transformer_arguments

#: The designs this model builds.
DESIGNS = ("pa", "sf", "df")


class FactorizedTransformer(MultiDomainTransformer):
    """A Transformer with one Factorized design's per-domain blocks."""

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
        d_inner=None,
    ):
        """Initializes the model.

        Args:
          design: ``"pa"``, ``"sf"`` or ``"df"``.
          num_layers: Number of encoder and decoder layers.
          num_units: Model size.
          num_heads: Number of attention heads.
          ffn_inner_dim: FFN inner size.
          dropout: Dropout, attention dropout and FFN dropout.
          num_reserved_regions: Domain regions kept free for domains added later.
          share_target_embeddings: Tie the target input and output embeddings
            (``df`` always ties them: F1 is the factorized target embedding).
          domain_training: Default training mode (``params: domain_training``
            overrides it).
          d_inner: The factorization size of ``df`` (the paper's 280); ``df`` only.

        Raises:
          UserError: on an unknown design, a negative reserved region count, a
            missing or non-positive :obj:`d_inner` with ``df`` (or one given to
            another design), or untied target embeddings with ``df``.
        """
        if design not in DESIGNS:
            raise UserError(
                "unknown Factorized Transformer design %r (expected one of: %s)"
                % (design, ", ".join(DESIGNS))
            )
        if num_reserved_regions < 0:
            raise UserError("num_reserved_regions must be >= 0, got %d" % num_reserved_regions)
        share = opennmt.models.EmbeddingsSharingLevel
        sharing = share.TARGET if share_target_embeddings else share.NONE
        if design == "df":
            if d_inner is None or d_inner <= 0:
                raise UserError(
                    "the df Factorized Transformer needs d_inner > 0 (the paper's 280), got %s"
                    % d_inner
                )
            if not share_target_embeddings:
                raise UserError(
                    "the df Factorized Transformer ties its target input and output "
                    "embeddings (F1): share_target_embeddings cannot be False"
                )
            source = factorized.FactorizedEmbedder(num_units, d_inner, num_reserved_regions)
            target = factorized.FactorizedEmbedder(num_units, d_inner, num_reserved_regions)
            # The output layer reads the target embedder's variables itself: OpenNMT-tf's
            # reuse_embeddings (a [V, d_model] table) must not be called.
            sharing = share.NONE
        else:
            if d_inner is not None:
                raise UserError(
                    "d_inner is a parameter of the df Factorized Transformer, not of %s" % design
                )
            source = opennmt.inputters.WordEmbedder(num_units)
            target = opennmt.inputters.WordEmbedder(num_units)
        super().__init__(
            source,
            target,
            domain_training=domain_training,
            share_embeddings=sharing,
            **transformer_arguments(num_layers, num_units, num_heads, ffn_inner_dim, dropout),
        )
        self.design = design
        self.d_inner = d_inner
        self.num_reserved_regions = num_reserved_regions
        blocks = "df_attention_ffn" if design == "df" else design
        for stack in (self.encoder, self.decoder):
            factorized.install(stack, blocks, num_heads, num_regions=0, d_inner=d_inner)
        if design == "df":
            # Set before SequenceToSequence.initialize, whose decoder.initialize then
            # keeps it instead of creating a plain Dense.
            self.decoder.initialize(
                output_layer=factorized.FactorizedOutput(
                    target, use_bias=self.decoder.output_layer_bias
                )
            )

    def initialize(self, data_config, params=None):
        super().initialize(data_config, params=params)
        self.set_layer_regions(
            data_config, self.num_reserved_regions, "the %s Factorized Transformer" % self.design
        )

    def fixed_general_copies(self):
        """The general copies that are constants (the F6 identity maps)."""
        return [v for layer in self.domain_layers() for v in layer.fixed_general_copies()]

    def unfold(self, optimizer=None):
        """Copies every general copy into all domain regions (the curriculum's unfold), with
        its optimizer slots when :obj:`optimizer` is given (see
        :meth:`ldr_opennmt.layers.per_domain.DomainCopies.unfold`)."""
        for layer in self.domain_layers():
            layer.unfold(optimizer=optimizer)


FACTORIZED_PAPER = "Deng et al., 2020 (Findings of EMNLP): Factorized Transformer"


def factorized_transformer(design, **kwargs):
    """Factorized Transformer (Deng et al., 2020): ``design`` ``"pa"``, ``"sf"`` or
    ``"df"`` (which needs ``d_inner``, 280 in the paper); target input and output
    embeddings shared, as in the paper. The sizes and their paper defaults are
    :class:`~ldr_opennmt.models.factorized.FactorizedTransformer`'s arguments."""
    return FactorizedTransformer(design, **kwargs)


def _factorized_count(design):
    return lambda **sizes: factorized.parameter_count(design, **sizes)


def _df_rows(size):
    # d_inner in the paper's proportion to the model size (280 for 512 units).
    return {"d_inner": max(1, round(size["num_units"] * 280 / 512))}


FACTORIZED_PA = family_table.Family(
    name="factorized_pa",
    builder=functools.partial(factorized_transformer, "pa"),
    title="Factorized PA",
    paper=FACTORIZED_PAPER,
    summary="Per-domain Q, K, V and output projections in every attention (the full "
    "scheme, F5); stage 2 trains them from the unfolded Mixed model.",
    stage1="mixed_transformer",
    finetune="unfold",
    parameter_count=family_table.sizes_only(_factorized_count("pa")),
    presets={"untied": {"share_target_embeddings": False}},
    benchmark={"fact_pa": {}, "ens_fact_pa": {"ensemble": True}},
)


FACTORIZED_SF = family_table.Family(
    name="factorized_sf",
    builder=functools.partial(factorized_transformer, "sf"),
    title="Factorized SF",
    paper=FACTORIZED_PAPER,
    summary="Multi-query attention with per-domain single-head K and V (F2) and a "
    "per-domain square map after the FFN (F6); trained general, then domains.",
    parameter_count=family_table.sizes_only(_factorized_count("sf")),
    benchmark={"fact_sf": {}},
)


FACTORIZED_DF = family_table.Family(
    name="factorized_df",
    builder=functools.partial(factorized_transformer, "df"),
    title="Factorized DF",
    paper=FACTORIZED_PAPER,
    summary="Embeddings, output layer and FFN factorized through d_inner with per-domain "
    "factors (F1, F3, F4) and per-domain K and V (F2); trained general, then domains.",
    tiny={"d_inner": 8},
    parameter_count=family_table.sizes_only(_factorized_count("df")),
    presets={
        "paper": {"d_inner": 280},
        # d_inner is the model's width at the small size, not the paper's ratio (280 of
        # 512, which gave 32): DF's output layer is tied through d_inner (F1), so d_inner
        # is the rank of its classifier. At 32 the 8k-word classifier had rank 32, half
        # that of the tied Mixed it is compared with, and the row fell 5.2 BLEU below
        # that control (docs/tables.md, "Findings explained", 5): a defect of the size,
        # not of the design.
        "small": {"d_inner": 64},
    },
    benchmark={"fact_df": _df_rows},
)
