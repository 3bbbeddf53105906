"""Small LDR Transformer (model_defs/small/ldr_transformer.py) with one option of the authors'
released code: LDR target embeddings too (the released code's tgt_ldr_embedding). A row of the
one-at-a-time ablation of LDR as released (docs/families/ldr.md)."""

from ldr_opennmt import models, upstream

# The package's patches of onmt-main (one-line errors, training lock, domains.json, ...):
# installed here, on import, because onmt-main copies this file before it builds the model.
upstream.install()


def model():
    return models.ldr_transformer(
        num_layers=2,
        num_units=64,
        num_heads=4,
        ffn_inner_dim=256,
        domain_region_size=4,
        target_ldr=True,
    )
