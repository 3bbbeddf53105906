"""Residual adapters (adapter inner size 2048) on the tied Mixed Transformer
(``model_defs/mixed_transformer_tied.py``): the tables' row, whose Mixed is also Factorized
PA's stage 1."""

from ldr_opennmt import models, upstream

# The package's patches of onmt-main (one-line errors, training lock, domains.json, ...):
# installed here, on import, because onmt-main copies this file before it builds the model.
upstream.install()


def model():
    return models.residual_adapter_transformer(adapter_dim=2048, share_target_embeddings=True)
