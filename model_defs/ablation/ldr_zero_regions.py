"""LDR Transformer (model_defs/ldr_transformer.py, the paper's size) with one option of the
authors' released code: domain regions starting at zero (the released code's
tf.zeros_initializer). A row of the one-at-a-time ablation of LDR as released
(docs/families/ldr.md)."""

from ldr_opennmt import registry, upstream

upstream.install()  # onmt-main's patches (one-line errors, lock, domains.json): see upstream.
model = registry.preset("ldr_transformer", "paper", "zero_regions")
