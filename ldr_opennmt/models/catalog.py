"""Ready-made multi-domain systems: LDR, Mixed, domain control (DC), Factorized, domain
mixing, residual adapters, multitask (ML) and adversarial (AdvL) domain
classifiers, target token mixing (TTM).

Model definition files in ``model_defs/`` are one call to these functions.
Defaults follow the LDR paper (Pham et al., 2019, section 3.2): Transformer
6+6 layers, 512 units, 8 heads, FFN 2048; RNN with 512-cell embeddings and
1024 hidden cells; LDR regions of 8 cells per domain fused by a 512 dense layer;
DC with 2 domain cells.
"""

import opennmt

from ldr_opennmt.layers import DomainControlEmbedder, LDREmbedder
from ldr_opennmt.models import procedure
from ldr_opennmt.models.adapters import ResidualAdapterTransformer
from ldr_opennmt.models.factorized import FactorizedTransformer
from ldr_opennmt.models.mixing import MixingTransformer
from ldr_opennmt.models.multitask import advl_transformer, ml_transformer  # noqa: F401
from ldr_opennmt.models.sequence_to_sequence import (
    MultiDomainRNN,
    MultiDomainTransformer,
    transformer_arguments,
)
from ldr_opennmt.models.ttm import ttm_transformer  # noqa: F401


def _ldr_embedders(size, domain_region_size, num_reserved_regions, target_ldr):
    """(source, target) embedders of an LDR system."""

    def _embedder():
        return LDREmbedder(
            embedding_size=size,
            domain_region_size=domain_region_size,
            num_reserved_regions=num_reserved_regions,
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
):
    """Transformer with LDR source embeddings (and optionally target embeddings)."""
    return MultiDomainTransformer(
        *_ldr_embedders(num_units, domain_region_size, num_reserved_regions, target_ldr),
        domain_training=domain_training,
        **transformer_arguments(num_layers, num_units, num_heads, ffn_inner_dim, dropout),
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
):
    """Attentional RNN with LDR source embeddings (and optionally target embeddings)."""
    return MultiDomainRNN(
        *_ldr_embedders(embedding_size, domain_region_size, num_reserved_regions, target_ldr),
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
