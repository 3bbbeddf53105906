"""Factorized Transformer, design SF (Deng et al., 2020): 6+6 layers, 512 units, 8 heads,
FFN 2048, target input and output embeddings shared."""

from ldr_opennmt import models


def model():
    return models.factorized_transformer("sf")
