"""Factorized Transformer, design PA (Transformer base), with an output layer of its own (not
tied to the target embeddings): the tables' PA row at paper scale, whose stage 1 is the
tables' base, ``model_defs/mixed_transformer.py``."""

from ldr_opennmt import registry, upstream

upstream.install()  # onmt-main's patches (one-line errors, lock, domains.json): see upstream.
model = registry.preset("factorized_pa", "paper", "untied")
