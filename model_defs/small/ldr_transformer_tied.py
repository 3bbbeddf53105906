"""Small LDR Transformer whose output layer is its target embedding table, like the
demo's Mixed baseline (model_defs/small/mixed_transformer_tied.py): the demo's LDR row, so
that it differs from its control by the method alone."""

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
        share_target_embeddings=True,
    )
