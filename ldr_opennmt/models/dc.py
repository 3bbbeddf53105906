"""Domain control (Kobus et al., 2017): a domain embedding concatenated with every source
word embedding, in a Transformer or an attentional RNN. Its builders and family declarations,
registered by :mod:`ldr_opennmt.models.catalog`."""

import opennmt

from ldr_opennmt import family_table
from ldr_opennmt.layers import DomainControlEmbedder
from ldr_opennmt.models.sequence_to_sequence import (
    MultiDomainRNN,
    MultiDomainTransformer,
    transformer_arguments,
)

DC_PAPER = "Kobus et al., 2017 (RANLP): domain control"


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


DC_TRANSFORMER = family_table.Family(
    name="dc_transformer",
    builder=dc_transformer,
    title="DC",
    paper=DC_PAPER,
    summary="A domain embedding concatenated with every source word embedding.",
    benchmark={"dc": {}},
)


DC_RNN = family_table.Family(
    name="dc_rnn",
    builder=dc_rnn,
    title="DC (RNN)",
    paper=DC_PAPER,
    summary="Domain control in an attentional RNN.",
    architecture="rnn",
    benchmark=None,
)
