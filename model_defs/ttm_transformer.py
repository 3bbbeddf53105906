"""Target Token Mixing (Britz et al., 2017) on a Transformer: 6+6 layers, 512 units,
8 heads, FFN 2048, dropout 0.1. Each target starts with its domain token ``<domain:NAME>``
(add one line per declared domain to the target vocabulary); the token is predicted for
``generic`` sentences, forced for labelled ones, and removed from the output."""

from ldr_opennmt import models, upstream

# The package's patches of onmt-main (one-line errors, training lock, domains.json, ...):
# installed here, on import, because onmt-main copies this file before it builds the model.
upstream.install()


def model():
    return models.ttm_transformer()
