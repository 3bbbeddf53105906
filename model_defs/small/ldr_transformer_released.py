"""Small LDR Transformer as its authors' released TF1 code builds it (see
model_defs/ldr_transformer_released.py), at the CPU size of model_defs/small/ldr_transformer.py:
2 layers of 64 units, domain regions of 4 cells (beside the 64-cell generic embedding)."""

from ldr_opennmt import registry, upstream

upstream.install()  # onmt-main's patches (one-line errors, lock, domains.json): see upstream.
model = registry.preset("ldr_transformer_released", "small")
