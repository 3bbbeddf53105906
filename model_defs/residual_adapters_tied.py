"""Residual adapters (adapter inner size 2048) on the tied Mixed Transformer
(``model_defs/mixed_transformer_tied.py``): the tables' row, whose Mixed is also Factorized
PA's stage 1."""

from ldr_opennmt import registry, upstream

upstream.install()  # onmt-main's patches (one-line errors, lock, domains.json): see upstream.
model = registry.preset("residual_adapters", "paper", "tied")
