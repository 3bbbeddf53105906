"""LDR Transformer (paper size) with two reserved domain regions for domains added later."""

from ldr_opennmt import models


def model():
    return models.ldr_transformer(num_reserved_regions=2)
