"""Small multitask-learning Transformer (domain classifier), for CPU experiments and tests."""

from ldr_opennmt import models


def model():
    return models.ml_transformer(num_layers=2, num_units=64, num_heads=4, ffn_inner_dim=256)
