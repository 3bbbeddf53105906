"""Small Factorized Transformer, design PA, with an output layer of its own (not tied to the
target embeddings): the tables' PA row, whose stage 1 is the tables' base, the Mixed with an
output layer of its own (``model_defs/small/mixed_transformer.py``)."""

from ldr_opennmt import registry, upstream

upstream.install()  # onmt-main's patches (one-line errors, lock, domains.json): see upstream.
model = registry.preset("factorized_pa", "small", "untied")
