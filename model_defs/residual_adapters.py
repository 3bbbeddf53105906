"""Residual adapters (Bapna and Firat, 2019) on the Mixed Transformer: 6+6 layers, 512 units,
8 heads, FFN 2048, adapter inner size 2048 (the Factorized Transformer paper's comparison).
Trained by ldr-main with finetune: base (model_defs/mixed_transformer.py's model directory)."""

from ldr_opennmt import models, upstream

# The package's patches of onmt-main (one-line errors, training lock, domains.json, ...):
# installed here, on import, because onmt-main copies this file before it builds the model.
upstream.install()


def model():
    return models.residual_adapter_transformer(adapter_dim=2048)
