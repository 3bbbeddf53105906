"""LDR (Pham et al., 2019): its builders (:func:`ldr_transformer`, :func:`ldr_rnn`, LDR as
released), its family declarations (registered by :mod:`ldr_opennmt.models.catalog`), and the
Transformer with the transform after every layer, as the authors' released code builds it.

A :class:`LayerwiseLDRTransformer` reads :class:`~ldr_opennmt.layers.ldr.
LayerwiseLDREmbedder` embeddings (the generic embedding of the model's size, the masked
domain regions beside it) on the source side, and on the target side when its target
embedder is one too, and adds each word's domain region through a bias-free dense layer
after the input and after every layer of the encoder (and decoder)
(:mod:`ldr_opennmt.layers.ldr_transform`; the released code's
``cell/self_attention_encoder_LDR.py`` and ``cell/self_attention_decoder_LDR.py``). Built
by :func:`ldr_transformer` with ``ldr_transform="every_layer"``.

Every transform kernel is a domain weight of its region: Procedure 1 trains them with the
true-label pass, as the released code's ``generic_domain_training`` trains every variable
named ``ldr``; the other training modes, the domain scope, the SavedModel's ``domain``
input and ensembles of views work as for any family. The CTranslate2 export refuses the
model in one line (:data:`~ldr_opennmt.layers.ldr.LAYERWISE_FOLD_REFUSAL`).
"""

import opennmt

from ldr_opennmt import family_table
from ldr_opennmt.layers import ldr_transform
from ldr_opennmt.layers.ldr import LAYERWISE_FOLD_REFUSAL, LayerwiseLDREmbedder, LDREmbedder
from ldr_opennmt.models import procedure
from ldr_opennmt.models.sequence_to_sequence import (
    MultiDomainRNN,
    MultiDomainTransformer,
    transformer_arguments,
)

LDR_PAPER = "Pham et al., 2019 (IWSLT): generic and specialized word embeddings (LDR)"
LDR_RELEASED = "Pham et al., 2019 (IWSLT): LDR as its authors' released code builds it"

#: ``ldr_transform`` of :func:`ldr_transformer`: the paper's one dense fusion at the
#: embedding (eq. 2), or the released code's transform after the input and after every layer.
LDR_FUSION = "fusion"
LDR_EVERY_LAYER = "every_layer"
LDR_TRANSFORMS = (LDR_FUSION, LDR_EVERY_LAYER)
#: The architecture options of :func:`ldr_transformer` that the authors' released code has.
LDR_RELEASED_OPTIONS = {
    "ldr_transform": LDR_EVERY_LAYER,
    "target_ldr": True,
    "zero_domain_regions": True,
}
#: LDR's domain regions at the CPU size: 4 cells of 64 (8 of 512 in the paper).
LDR_SMALL = {"small": {"domain_region_size": 4}}


class LayerwiseLDRTransformer(MultiDomainTransformer):
    """A Transformer with the LDR transform after its input and after every layer, on
    each side whose embedder is a :class:`~ldr_opennmt.layers.ldr.LayerwiseLDREmbedder`."""

    ctranslate2_refusal = LAYERWISE_FOLD_REFUSAL

    def __init__(self, source_embedder, target_embedder, **kwargs):
        """Initializes the model.

        Args:
          source_embedder: A :class:`~ldr_opennmt.layers.ldr.LayerwiseLDREmbedder` of
            the model's size.
          target_embedder: Another one, or a plain ``WordEmbedder``.
          **kwargs: Arguments of
            :class:`~ldr_opennmt.models.sequence_to_sequence.MultiDomainTransformer`.

        Raises:
          ValueError: if the source embedder is not a layerwise LDR embedder, or an
            embedder's generic size is not the model's.
        """
        if not isinstance(source_embedder, LayerwiseLDREmbedder):
            raise ValueError("the source embedder must be a LayerwiseLDREmbedder")
        super().__init__(source_embedder, target_embedder, **kwargs)
        for stack, embedder in self.ldr_sides():
            if embedder.embedding_size != stack.num_units:
                raise ValueError(
                    "the LDR embedder's generic region has %d cells, the model %d units"
                    % (embedder.embedding_size, stack.num_units)
                )
            ldr_transform.install(stack, embedder.domain_region_size, embedder.zero_domain_regions)

    def ldr_sides(self):
        """``[(stack, its LDR embedder)]``: the encoder, and the decoder with LDR targets."""
        sides = (
            (self.encoder, self.features_inputter.word_inputter),
            (self.decoder, self.labels_inputter),
        )
        return [(s, e) for s, e in sides if isinstance(e, LayerwiseLDREmbedder)]

    def initialize(self, data_config, params=None):
        super().initialize(data_config, params=params)
        # Each stack's transforms have its embedder's regions (declared, then reserved).
        for stack, embedder in self.ldr_sides():
            for transform in ldr_transform.transforms(stack):
                transform.set_num_regions(embedder.num_regions, len(embedder.domains))


def _ldr_embedders(
    size, domain_region_size, num_reserved_regions, target_ldr, zero_domain_regions, layerwise
):
    """(source, target) embedders of an LDR system."""

    def _embedder():
        embedder_class = LayerwiseLDREmbedder if layerwise else LDREmbedder
        return embedder_class(
            embedding_size=size,
            domain_region_size=domain_region_size,
            num_reserved_regions=num_reserved_regions,
            zero_domain_regions=zero_domain_regions,
        )

    return _embedder(), _embedder() if target_ldr else opennmt.inputters.WordEmbedder(size)


def ldr_transformer(
    num_layers=6,
    num_units=512,
    num_heads=8,
    ffn_inner_dim=2048,
    dropout=0.1,
    domain_region_size=8,
    num_reserved_regions=0,
    target_ldr=False,
    domain_training=procedure.PROCEDURE1,
    share_target_embeddings=False,
    ldr_transform=LDR_FUSION,
    zero_domain_regions=False,
):
    """Transformer with LDR source embeddings (and optionally target embeddings).

    With :obj:`share_target_embeddings` (plain target embeddings only), the decoder's output
    layer is the target embedding table, as in a tied Mixed model: the control it is then
    compared with (an output layer of its own is worth several BLEU at small sizes).

    The options of the authors' released code (``docs/families/ldr.md``, "LDR as released"):

    Args:
      ldr_transform: ``"fusion"`` (the paper's eq. 2: the generic region is what the
        domain regions leave of ``num_units``, fused with the active region by a dense
        layer at the embedding) or ``"every_layer"`` (the released code: a generic
        embedding of ``num_units`` cells, and the active region added by a bias-free dense
        layer after the input and after every encoder layer, and every decoder layer with
        :obj:`target_ldr`; :class:`~ldr_opennmt.models.ldr.LayerwiseLDRTransformer`).
      target_ldr: LDR target embeddings too (the released code always has them).
      zero_domain_regions: Domain regions start at zero (the released code's
        ``tf.zeros_initializer``): every label starts as ``generic``.
      domain_training: The default training mode (the released configuration's is
        ``summed``).

    Raises:
      ValueError: on an unknown :obj:`ldr_transform`, or :obj:`share_target_embeddings`
        with LDR target embeddings.
    """
    if ldr_transform not in LDR_TRANSFORMS:
        raise ValueError(
            "ldr_transform must be one of %s, got %r" % (", ".join(LDR_TRANSFORMS), ldr_transform)
        )
    kwargs = transformer_arguments(num_layers, num_units, num_heads, ffn_inner_dim, dropout)
    if share_target_embeddings:
        if target_ldr:
            raise ValueError("share_target_embeddings needs plain target embeddings (target_ldr)")
        kwargs["share_embeddings"] = opennmt.models.EmbeddingsSharingLevel.TARGET
    layerwise = ldr_transform == LDR_EVERY_LAYER
    model_class = LayerwiseLDRTransformer if layerwise else MultiDomainTransformer
    return model_class(
        *_ldr_embedders(
            num_units,
            domain_region_size,
            num_reserved_regions,
            target_ldr,
            zero_domain_regions,
            layerwise,
        ),
        domain_training=domain_training,
        **kwargs,
    )


def ldr_transformer_released(
    num_layers=6,
    num_units=512,
    num_heads=8,
    ffn_inner_dim=2048,
    dropout=0.1,
    domain_region_size=8,
    num_reserved_regions=0,
    domain_training=procedure.SUMMED,
):
    """LDR as the authors' released TF1 code builds it (minhquangpham/LDR at 6c9e69e,
    ``configs/sparse_src_masking_71.yml``): :func:`ldr_transformer` with its released
    options on (:data:`LDR_RELEASED_OPTIONS`: the transform after every layer, LDR target
    embeddings, domain regions starting at zero) and the ``summed`` training mode
    (``generic+domain_training``) by default. Its batches (one domain each, drawn by the
    domains' natural shares) are the data configuration's: ``data: domain_batches: true``,
    ``train: domain_sampling_alpha: 1``. One option alone: :func:`ldr_transformer`'s
    arguments."""
    return ldr_transformer(
        num_layers=num_layers,
        num_units=num_units,
        num_heads=num_heads,
        ffn_inner_dim=ffn_inner_dim,
        dropout=dropout,
        domain_region_size=domain_region_size,
        num_reserved_regions=num_reserved_regions,
        domain_training=domain_training,
        **LDR_RELEASED_OPTIONS,
    )


def ldr_rnn(
    embedding_size=512,
    hidden_size=1024,
    num_layers=1,
    dropout=0.1,
    domain_region_size=8,
    num_reserved_regions=0,
    target_ldr=False,
    domain_training=procedure.PROCEDURE1,
    zero_domain_regions=False,
):
    """Attentional RNN with LDR source embeddings (and optionally target embeddings);
    :obj:`zero_domain_regions` starts the domain regions at zero (see
    :func:`ldr_transformer`)."""
    return MultiDomainRNN(
        *_ldr_embedders(
            embedding_size,
            domain_region_size,
            num_reserved_regions,
            target_ldr,
            zero_domain_regions,
            layerwise=False,
        ),
        num_layers=num_layers,
        hidden_size=hidden_size,
        dropout=dropout,
        domain_training=domain_training,
    )


LDR_TRANSFORMER = family_table.Family(
    name="ldr_transformer",
    builder=ldr_transformer,
    title="LDR",
    paper=LDR_PAPER,
    summary="Source word embeddings with a generic region and one small region per "
    "domain, fused by a dense layer; trained by Procedure 1.",
    tiny={"domain_region_size": 2},
    presets=dict(
        LDR_SMALL,
        **family_table.TIED,
        # Regions reserved for domains added later (ldr-experiments new-domain).
        reserved={"num_reserved_regions": 2},
        # The released code's options one at a time (the LDR page's ablation).
        every_layer={"ldr_transform": LDR_EVERY_LAYER},
        target_ldr={"target_ldr": True},
        zero_regions={"zero_domain_regions": True},
    ),
    benchmark={
        "ldr_joint": {"domain_training": "joint"},
        "ldr_procedure1": {"domain_training": "procedure1"},
        "ens_ldr": {"ensemble": True},
    },
)


LDR_TRANSFORMER_RELEASED = family_table.Family(
    name="ldr_transformer_released",
    builder=ldr_transformer_released,
    title="LDR (as released)",
    paper=LDR_RELEASED,
    summary="LDR as the authors' released code builds it: source and target domain "
    "regions, zero at start, added by a dense layer after the input and after every "
    "encoder and decoder layer; trained summed.",
    tiny={"domain_region_size": 2},
    presets=LDR_SMALL,
    benchmark={"ldr_released": {"domain_training": "summed"}},
)


LDR_RNN = family_table.Family(
    name="ldr_rnn",
    builder=ldr_rnn,
    title="LDR (RNN)",
    paper=LDR_PAPER,
    summary="LDR source embeddings in an attentional RNN (the paper's first system).",
    architecture="rnn",
    tiny={"domain_region_size": 2},
    presets=LDR_SMALL,
    benchmark=None,  # The benchmark compares Transformers.
)
