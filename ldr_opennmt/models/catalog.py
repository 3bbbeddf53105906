"""Ready-made multi-domain systems: LDR, Mixed, domain control (DC), Factorized, domain
mixing, residual adapters, multitask (ML) and adversarial (AdvL) domain
classifiers, target token mixing (TTM).

The table at the end of this module registers each of them as a family
(:mod:`ldr_opennmt.family_table`, read through :mod:`ldr_opennmt.registry`, which imports this
module when first asked): the one list of the package's families that everything else reads,
each with its presets (named sizes and variants) and benchmark rows. A model definition file in
``model_defs/`` is one choice of a family and its presets
(``model = registry.preset("ldr_transformer", "small", "tied")``).
Defaults follow the LDR paper (Pham et al., 2019, section 3.2): Transformer
6+6 layers, 512 units, 8 heads, FFN 2048; RNN with 512-cell embeddings and
1024 hidden cells; LDR regions of 8 cells per domain fused by a 512 dense layer;
DC with 2 domain cells.
"""

import dataclasses
import functools

import opennmt

from ldr_opennmt import family_table
from ldr_opennmt.layers import DomainControlEmbedder, LayerwiseLDREmbedder, LDREmbedder
from ldr_opennmt.layers import adapters as adapters_layers
from ldr_opennmt.layers import factorized as factorized_layers
from ldr_opennmt.models import procedure
from ldr_opennmt.models.adapters import ResidualAdapterTransformer
from ldr_opennmt.models.factorized import FactorizedTransformer
from ldr_opennmt.models.ldr import LayerwiseLDRTransformer
from ldr_opennmt.models.mixing import MixingTransformer
from ldr_opennmt.models.multitask import advl_transformer, ml_transformer  # noqa: F401
from ldr_opennmt.models.sequence_to_sequence import (
    MultiDomainRNN,
    MultiDomainTransformer,
    transformer_arguments,
)
from ldr_opennmt.models.ttm import ttm_transformer  # noqa: F401

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


def mixed_transformer(
    num_layers=6,
    num_units=512,
    num_heads=8,
    ffn_inner_dim=2048,
    dropout=0.1,
    share_target_embeddings=False,
):
    """Plain Transformer trained on all domains (the domain labels are ignored).

    With :obj:`share_target_embeddings` (as the Factorized Transformer), its checkpoint
    can be the first stage of a Factorized PA model (``finetune: unfold``).
    """
    kwargs = transformer_arguments(num_layers, num_units, num_heads, ffn_inner_dim, dropout)
    if share_target_embeddings:
        kwargs["share_embeddings"] = opennmt.models.EmbeddingsSharingLevel.TARGET
    return MultiDomainTransformer(
        opennmt.inputters.WordEmbedder(num_units),
        opennmt.inputters.WordEmbedder(num_units),
        domains_required=False,
        **kwargs,
    )


def dc_transformer(
    num_layers=6,
    num_units=512,
    num_heads=8,
    ffn_inner_dim=2048,
    dropout=0.1,
    domain_embedding_size=2,
    num_reserved_regions=0,
):
    """Transformer with domain control: the word embedding (``num_units`` minus the
    domain cells) concatenated with a domain embedding, so the encoder input keeps
    ``num_units`` cells."""
    return MultiDomainTransformer(
        DomainControlEmbedder(
            embedding_size=num_units - domain_embedding_size,
            domain_embedding_size=domain_embedding_size,
            num_reserved_regions=num_reserved_regions,
        ),
        opennmt.inputters.WordEmbedder(num_units),
        **transformer_arguments(num_layers, num_units, num_heads, ffn_inner_dim, dropout),
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


def mixed_rnn(embedding_size=512, hidden_size=1024, num_layers=1, dropout=0.1):
    """Plain attentional RNN trained on all domains (the domain labels are ignored)."""
    return MultiDomainRNN(
        opennmt.inputters.WordEmbedder(embedding_size),
        opennmt.inputters.WordEmbedder(embedding_size),
        num_layers=num_layers,
        hidden_size=hidden_size,
        dropout=dropout,
        domains_required=False,
    )


def dc_rnn(
    embedding_size=512,
    hidden_size=1024,
    num_layers=1,
    dropout=0.1,
    domain_embedding_size=2,
    num_reserved_regions=0,
):
    """Attentional RNN with domain control: 2 extra domain cells on the input layer."""
    return MultiDomainRNN(
        DomainControlEmbedder(
            embedding_size=embedding_size,
            domain_embedding_size=domain_embedding_size,
            num_reserved_regions=num_reserved_regions,
        ),
        opennmt.inputters.WordEmbedder(embedding_size),
        num_layers=num_layers,
        hidden_size=hidden_size,
        dropout=dropout,
    )


def factorized_transformer(design, **kwargs):
    """Factorized Transformer (Deng et al., 2020): ``design`` ``"pa"``, ``"sf"`` or
    ``"df"`` (which needs ``d_inner``, 280 in the paper); target input and output
    embeddings shared, as in the paper. The sizes and their paper defaults are
    :class:`~ldr_opennmt.models.factorized.FactorizedTransformer`'s arguments."""
    return FactorizedTransformer(design, **kwargs)


def mixing_transformer(**kwargs):
    """Word-level adaptive layer-wise domain mixing (Jiang et al., 2020): per-domain
    attention Q/K/V and FFN weights mixed per word by each layer's learned domain
    proportions, trained with ``L_gen + L_mix`` (domain labels for training only).
    The options (``epsilon`` 0.05, ``cut``, ``variant`` ``"encoder_decoder"`` or
    ``"encoder"``) and sizes are
    :class:`~ldr_opennmt.models.mixing.MixingTransformer`'s arguments."""
    return MixingTransformer(**kwargs)


def residual_adapter_transformer(**kwargs):
    """Residual adapters (Bapna and Firat, 2019): a per-domain bottleneck block after every
    layer of a Transformer whose other parameters are a frozen, trained Mixed model
    (``finetune: base``). The sizes (the base's) and ``adapter_dim`` (2048 by default, the
    Factorized paper's comparison) are
    :class:`~ldr_opennmt.models.adapters.ResidualAdapterTransformer`'s arguments."""
    return ResidualAdapterTransformer(**kwargs)


# The papers, as the tables cite them.
LDR_PAPER = "Pham et al., 2019 (IWSLT): generic and specialized word embeddings (LDR)"
LDR_RELEASED = "Pham et al., 2019 (IWSLT): LDR as its authors' released code builds it"
FACTORIZED_PAPER = "Deng et al., 2020 (Findings of EMNLP): Factorized Transformer"
MIXING_PAPER = "Jiang et al., 2020 (ACL): word-level adaptive layer-wise domain mixing"
DC_PAPER = "Kobus et al., 2017 (RANLP): domain control"
BRITZ_PAPER = "Britz et al., 2017 (WMT): effective domain mixing"
ADAPTERS_PAPER = "Bapna and Firat, 2019 (EMNLP): simple, scalable adaptation"
TRANSFORMER_PAPER = "Vaswani et al., 2017: Transformer, trained on all domains"
RNN_PAPER = "Bahdanau et al., 2015: attentional RNN, trained on all domains"


def _vanilla_count(**sizes):
    return factorized_layers.parameter_count("vanilla", **sizes)


def _factorized_count(design):
    return lambda **sizes: factorized_layers.parameter_count(design, **sizes)


def _adapters_count(adapter_dim=2048, **sizes):
    layers = sizes["encoder_layers"] + sizes["decoder_layers"]
    return _vanilla_count(**sizes) + adapters_layers.parameter_count(
        sizes["d_model"], adapter_dim, layers, sizes["num_domains"]
    )


def _ttm_count(**sizes):
    # One target-vocabulary row per domain token.
    return _vanilla_count(**sizes) + sizes["num_domains"] * sizes["d_model"]


def _classifier_count(**sizes):
    # The classifier head (d x d hidden layer, d x domains logits), unused at inference.
    d_model = sizes["d_model"]
    return _vanilla_count(**sizes) + d_model * d_model + d_model * sizes["num_domains"]


def _sizes(count):
    """A parameter formula that ignores the size arguments of other families."""
    return lambda adapter_dim=2048, **sizes: count(**sizes)


#: The presets of the families with a tied variant: the decoder's output layer is the target
#: embedding table (the control of a tied row).
TIED = {"tied": {"share_target_embeddings": True}}
#: LDR's domain regions at the CPU size: 4 cells of 64 (8 of 512 in the paper).
LDR_SMALL = {"small": {"domain_region_size": 4}}


def _adapter_rows(size):
    # Adapters 4x the model size (2048 for 512 units); trained alone, the base frozen.
    return {"adapter_dim": 4 * size["num_units"], "domain_training": "domains"}


def _df_rows(size):
    # d_inner in the paper's proportion to the model size (280 for 512 units).
    return {"d_inner": max(1, round(size["num_units"] * 280 / 512))}


#: The package's families, in the order of the tables. Registered once, here: each with its
#: presets (the named sizes and variants the model definitions in ``model_defs/`` choose,
#: ``registry.preset``) and its benchmark rows (``ldr-experiments bench``).
FAMILIES = (
    family_table.Family(
        name="mixed_transformer",
        builder=mixed_transformer,
        title="Mixed",
        paper=TRANSFORMER_PAPER,
        summary="A plain Transformer trained on all domains; the labels are ignored.",
        # "wide": the tables' controlled experiment at the small size, a tied Mixed with the
        # untied one's parameter count (docs/tables.md, "One base for continued training").
        presets=dict(TIED, wide={"ffn_inner_dim": 1242}),
        benchmark={"mixed": {}},
    ),
    family_table.Family(
        name="dc_transformer",
        builder=dc_transformer,
        title="DC",
        paper=DC_PAPER,
        summary="A domain embedding concatenated with every source word embedding.",
        benchmark={"dc": {}},
    ),
    family_table.Family(
        name="ldr_transformer",
        builder=ldr_transformer,
        title="LDR",
        paper=LDR_PAPER,
        summary="Source word embeddings with a generic region and one small region per "
        "domain, fused by a dense layer; trained by Procedure 1.",
        tiny={"domain_region_size": 2},
        presets=dict(
            LDR_SMALL,
            **TIED,
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
    ),
    family_table.Family(
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
    ),
    family_table.Family(
        name="factorized_pa",
        builder=functools.partial(factorized_transformer, "pa"),
        title="Factorized PA",
        paper=FACTORIZED_PAPER,
        summary="Per-domain Q, K, V and output projections in every attention (the full "
        "scheme, F5); stage 2 trains them from the unfolded Mixed model.",
        stage1="mixed_transformer",
        finetune="unfold",
        parameter_count=_sizes(_factorized_count("pa")),
        presets={"untied": {"share_target_embeddings": False}},
        benchmark={"fact_pa": {}, "ens_fact_pa": {"ensemble": True}},
    ),
    family_table.Family(
        name="factorized_sf",
        builder=functools.partial(factorized_transformer, "sf"),
        title="Factorized SF",
        paper=FACTORIZED_PAPER,
        summary="Multi-query attention with per-domain single-head K and V (F2) and a "
        "per-domain square map after the FFN (F6); trained general, then domains.",
        parameter_count=_sizes(_factorized_count("sf")),
        benchmark={"fact_sf": {}},
    ),
    family_table.Family(
        name="factorized_df",
        builder=functools.partial(factorized_transformer, "df"),
        title="Factorized DF",
        paper=FACTORIZED_PAPER,
        summary="Embeddings, output layer and FFN factorized through d_inner with per-domain "
        "factors (F1, F3, F4) and per-domain K and V (F2); trained general, then domains.",
        tiny={"d_inner": 8},
        parameter_count=_sizes(_factorized_count("df")),
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
    ),
    family_table.Family(
        name="mixing_transformer",
        builder=mixing_transformer,
        title="Domain mixing",
        paper=MIXING_PAPER,
        summary="Per-domain attention and FFN weights mixed per word by learned domain "
        "proportions; labels for training only.",
        presets={"encoder": {"variant": "encoder"}},
        benchmark={
            "mix_k2": {"num_domains": 2},
            "mix_k3": {"num_domains": 3},
            "mix_k6": {"num_domains": 6},
        },
    ),
    family_table.Family(
        name="residual_adapters",
        builder=residual_adapter_transformer,
        title="Residual adapters",
        paper=ADAPTERS_PAPER,
        summary="A per-domain bottleneck block after every layer of a frozen Mixed model.",
        tiny={"adapter_dim": 8},
        stage1="mixed_transformer",
        finetune="base",
        parameter_count=_adapters_count,
        presets=dict(TIED, paper={"adapter_dim": 2048}, small={"adapter_dim": 256}),
        benchmark={"adapters": _adapter_rows},
    ),
    family_table.Family(
        name="ttm_transformer",
        builder=ttm_transformer,
        title="TTM",
        paper=BRITZ_PAPER,
        summary="Target token mixing: each target starts with its domain token.",
        parameter_count=_sizes(_ttm_count),
        benchmark={"ttm": {}},
    ),
    family_table.Family(
        name="ml_transformer",
        builder=ml_transformer,
        title="ML",
        paper=BRITZ_PAPER,
        summary="Multitask learning: a domain classifier on the encoder output.",
        parameter_count=_sizes(_classifier_count),
        benchmark={"ml": {}},
    ),
    family_table.Family(
        name="advl_transformer",
        builder=advl_transformer,
        title="AdvL",
        paper=BRITZ_PAPER,
        summary="Adversarial learning: the domain classifier behind a gradient reversal.",
        parameter_count=_sizes(_classifier_count),
        benchmark={"advl": {}},
    ),
    family_table.Family(
        name="ldr_rnn",
        builder=ldr_rnn,
        title="LDR (RNN)",
        paper=LDR_PAPER,
        summary="LDR source embeddings in an attentional RNN (the paper's first system).",
        architecture="rnn",
        tiny={"domain_region_size": 2},
        presets=LDR_SMALL,
        benchmark=None,  # The benchmark compares Transformers.
    ),
    family_table.Family(
        name="dc_rnn",
        builder=dc_rnn,
        title="DC (RNN)",
        paper=DC_PAPER,
        summary="Domain control in an attentional RNN.",
        architecture="rnn",
        benchmark=None,
    ),
    family_table.Family(
        name="mixed_rnn",
        builder=mixed_rnn,
        title="Mixed (RNN)",
        paper=RNN_PAPER,
        summary="A plain attentional RNN trained on all domains.",
        architecture="rnn",
        benchmark=None,
    ),
)

for _family in FAMILIES:
    family_table.register(dataclasses.replace(_family, module=__name__))
