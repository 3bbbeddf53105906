"""LDR Transformer (model_defs/ldr_transformer.py, the paper's size) with one option of the
authors' released code: the LDR transform after the input and after every encoder layer (the
released code's cell/self_attention_encoder_LDR.py). A row of the one-at-a-time ablation of LDR
as released (docs/families/ldr.md)."""

from ldr_opennmt import models, upstream

# The package's patches of onmt-main (one-line errors, training lock, domains.json, ...):
# installed here, on import, because onmt-main copies this file before it builds the model.
upstream.install()


def model():
    return models.ldr_transformer(ldr_transform="every_layer")
