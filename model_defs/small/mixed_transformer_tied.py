"""Small Mixed Transformer with shared target input and output embeddings, as the
Factorized Transformer: the demo's Mixed baseline, whose checkpoint is also the first
stage of its Factorized PA row (``finetune: unfold``)."""

from ldr_opennmt import models, upstream

# The package's patches of onmt-main (one-line errors, training lock, domains.json, ...):
# installed here, on import, because onmt-main copies this file before it builds the model.
upstream.install()


def model():
    return models.mixed_transformer(
        num_layers=2, num_units=64, num_heads=4, ffn_inner_dim=256, share_target_embeddings=True
    )
