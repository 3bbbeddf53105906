"""Small Factorized Transformer, design DF (d_inner 32), for CPU experiments and tests."""

from ldr_opennmt import models


def model():
    return models.factorized_transformer(
        "df", num_layers=2, num_units=64, num_heads=4, ffn_inner_dim=256, d_inner=32
    )
