"""LDR Transformer (model_defs/ldr_transformer.py, the paper's size) with one option of the
authors' released code: domain regions starting at zero (the released code's
tf.zeros_initializer). A row of the one-at-a-time ablation of LDR as released
(docs/families/ldr.md)."""

from ldr_opennmt import models, upstream

# The package's patches of onmt-main (one-line errors, training lock, domains.json, ...):
# installed here, on import, because onmt-main copies this file before it builds the model.
upstream.install()


def model():
    return models.ldr_transformer(zero_domain_regions=True)
