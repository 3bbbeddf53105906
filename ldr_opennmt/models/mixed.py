"""Mixed: a plain Transformer (or attentional RNN) trained on all domains, the labels ignored:
the control of every multi-domain row. Its builders and family declarations (presets,
benchmark rows), registered by :mod:`ldr_opennmt.models.catalog`."""

import opennmt

from ldr_opennmt import family_table
from ldr_opennmt.models.sequence_to_sequence import (
    MultiDomainRNN,
    MultiDomainTransformer,
    transformer_arguments,
)

TRANSFORMER_PAPER = "Vaswani et al., 2017: Transformer, trained on all domains"
RNN_PAPER = "Bahdanau et al., 2015: attentional RNN, trained on all domains"


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


MIXED_TRANSFORMER = family_table.Family(
    name="mixed_transformer",
    builder=mixed_transformer,
    title="Mixed",
    paper=TRANSFORMER_PAPER,
    summary="A plain Transformer trained on all domains; the labels are ignored.",
    # "wide": the tables' controlled experiment at the small size, a tied Mixed with the
    # untied one's parameter count (docs/tables.md, "One base for continued training").
    presets=dict(family_table.TIED, wide={"ffn_inner_dim": 1242}),
    benchmark={"mixed": {}},
)


MIXED_RNN = family_table.Family(
    name="mixed_rnn",
    builder=mixed_rnn,
    title="Mixed (RNN)",
    paper=RNN_PAPER,
    summary="A plain attentional RNN trained on all domains.",
    architecture="rnn",
    benchmark=None,
)
