"""Mixed Transformer (6+6 layers, 512 units, 8 heads, FFN 2048) with shared target input and
output embeddings, as the Factorized Transformer: the stage 1 of Factorized PA and the base of
the tied residual adapters at paper size (``bash run/tables.sh --scale paper``)."""

from ldr_opennmt import models, upstream

# The package's patches of onmt-main (one-line errors, training lock, domains.json, ...):
# installed here, on import, because onmt-main copies this file before it builds the model.
upstream.install()


def model():
    return models.mixed_transformer(share_target_embeddings=True)
