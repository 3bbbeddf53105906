"""Multitask learning (Britz et al., 2017): a Transformer (6+6 layers, 512 units, 8 heads,
FFN 2048, dropout 0.1) trained jointly with a domain classifier on its mean-pooled encoder
output, L = L_gen + L_cls. Domain labels are needed for training only."""

from ldr_opennmt import models, upstream

# The package's patches of onmt-main (one-line errors, training lock, domains.json, ...):
# installed here, on import, because onmt-main copies this file before it builds the model.
upstream.install()


def model():
    return models.ml_transformer()
