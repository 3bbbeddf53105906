"""Small residual adapters (inner size 256) on the small tied Mixed Transformer
(``model_defs/small/mixed_transformer_tied.py``, the registry's small Mixed): the tables'
row, whose Mixed is also Factorized PA's stage 1."""

from ldr_opennmt import registry, upstream

upstream.install()  # onmt-main's patches (one-line errors, lock, domains.json): see upstream.
model = registry.preset("residual_adapters", "small", "tied")
