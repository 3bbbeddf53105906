"""Small residual adapters for CPU experiments and tests, on the small Mixed Transformer
(model_defs/small/mixed_transformer.py): adapter inner size 256 (4x the model size, as 2048
is at paper size)."""

from ldr_opennmt import registry, upstream

upstream.install()  # onmt-main's patches (one-line errors, lock, domains.json): see upstream.
model = registry.preset("residual_adapters", "small")
