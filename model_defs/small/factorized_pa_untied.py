"""Small Factorized Transformer, design PA, with an output layer of its own (not tied to the
target embeddings): the tables' PA row, whose stage 1 is the tables' base, the Mixed with an
output layer of its own (``model_defs/small/mixed_transformer.py``)."""

from ldr_opennmt import models, upstream

# The package's patches of onmt-main (one-line errors, training lock, domains.json, ...):
# installed here, on import, because onmt-main copies this file before it builds the model.
upstream.install()


def model():
    return models.factorized_transformer(
        "pa",
        num_layers=2,
        num_units=64,
        num_heads=4,
        ffn_inner_dim=256,
        share_target_embeddings=False,
    )
