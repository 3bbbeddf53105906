"""Small LDR Transformer as its authors' released TF1 code builds it (see
model_defs/ldr_transformer_released.py), at the CPU size of model_defs/small/ldr_transformer.py:
2 layers of 64 units, domain regions of 4 cells (beside the 64-cell generic embedding)."""

from ldr_opennmt import models, upstream

# The package's patches of onmt-main (one-line errors, training lock, domains.json, ...):
# installed here, on import, because onmt-main copies this file before it builds the model.
upstream.install()


def model():
    return models.ldr_transformer_released(
        num_layers=2, num_units=64, num_heads=4, ffn_inner_dim=256, domain_region_size=4
    )
