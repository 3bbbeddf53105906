"""LDR Transformer (model_defs/ldr_transformer.py, the paper's size) with one option of the
authors' released code: the LDR transform after the input and after every encoder layer (the
released code's cell/self_attention_encoder_LDR.py). A row of the one-at-a-time ablation of LDR
as released (docs/families/ldr.md)."""

from ldr_opennmt import registry, upstream

upstream.install()  # onmt-main's patches (one-line errors, lock, domains.json): see upstream.
model = registry.preset("ldr_transformer", "paper", "every_layer")
