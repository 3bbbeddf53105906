"""Word-level adaptive layer-wise domain mixing (Jiang et al., 2020), E/DC: 6+6 layers,
512 units, 8 heads, FFN 2048, target input and output embeddings shared, eps 0.05,
gradient cut. Domain labels are needed for training only."""

from ldr_opennmt import models, upstream

# The package's patches of onmt-main (one-line errors, training lock, domains.json, ...):
# installed here, on import, because onmt-main copies this file before it builds the model.
upstream.install()


def model():
    return models.mixing_transformer()
