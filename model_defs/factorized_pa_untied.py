"""Factorized Transformer, design PA (Transformer base), with an output layer of its own (not
tied to the target embeddings): the tables' PA row at paper scale, whose stage 1 is the
tables' base, ``model_defs/mixed_transformer.py``."""

from ldr_opennmt import models, upstream

# The package's patches of onmt-main (one-line errors, training lock, domains.json, ...):
# installed here, on import, because onmt-main copies this file before it builds the model.
upstream.install()


def model():
    return models.factorized_transformer("pa", share_target_embeddings=False)
