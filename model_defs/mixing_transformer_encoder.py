"""Word-level adaptive layer-wise domain mixing (Jiang et al., 2020), encoder-only variant
(E): mixing in the 6 encoder layers, a plain decoder; otherwise as
``mixing_transformer.py``."""

from ldr_opennmt import models, upstream

# The package's patches of onmt-main (one-line errors, training lock, domains.json, ...):
# installed here, on import, because onmt-main copies this file before it builds the model.
upstream.install()


def model():
    return models.mixing_transformer(variant="encoder")
