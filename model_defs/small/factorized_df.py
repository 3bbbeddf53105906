"""Small Factorized Transformer, design DF (d_inner 32), for CPU experiments and tests."""

from ldr_opennmt import hooks, models

# The package's hooks into onmt-main (one-line errors, training lock, domains.json, ...):
# installed here, on import, because onmt-main copies this file before it builds the model.
hooks.install()


def model():
    return models.factorized_transformer(
        "df", num_layers=2, num_units=64, num_heads=4, ffn_inner_dim=256, d_inner=32
    )
