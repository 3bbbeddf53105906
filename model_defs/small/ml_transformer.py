"""Small multitask-learning Transformer (domain classifier), for CPU experiments and tests."""

from ldr_opennmt import models, upstream

# The package's patches of onmt-main (one-line errors, training lock, domains.json, ...):
# installed here, on import, because onmt-main copies this file before it builds the model.
upstream.install()


def model():
    return models.ml_transformer(num_layers=2, num_units=64, num_heads=4, ffn_inner_dim=256)
