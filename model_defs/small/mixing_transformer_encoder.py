"""Small domain-mixing Transformer, encoder-only variant (E): mixing in the encoder layers
only, the decoder a plain Transformer's (the mixing paper's E against E/DC)."""

from ldr_opennmt import models, upstream

# The package's patches of onmt-main (one-line errors, training lock, domains.json, ...):
# installed here, on import, because onmt-main copies this file before it builds the model.
upstream.install()


def model():
    return models.mixing_transformer(
        num_layers=2, num_units=64, num_heads=4, ffn_inner_dim=256, variant="encoder"
    )
