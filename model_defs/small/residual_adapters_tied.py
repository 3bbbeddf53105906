"""Small residual adapters (inner size 256) on the small tied Mixed Transformer
(``model_defs/small/mixed_transformer_tied.py``, the registry's small Mixed): the tables'
row, whose Mixed is also Factorized PA's stage 1."""

from ldr_opennmt import models, upstream

# The package's patches of onmt-main (one-line errors, training lock, domains.json, ...):
# installed here, on import, because onmt-main copies this file before it builds the model.
upstream.install()


def model():
    return models.residual_adapter_transformer(
        num_layers=2,
        num_units=64,
        num_heads=4,
        ffn_inner_dim=256,
        adapter_dim=256,
        share_target_embeddings=True,
    )
