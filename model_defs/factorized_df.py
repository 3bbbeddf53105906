"""Factorized Transformer, design DF (Deng et al., 2020): 6+6 layers, 512 units, 8 heads,
FFN 2048, d_inner 280, target input and output embeddings shared (factorized, tied)."""

from ldr_opennmt import registry, upstream

upstream.install()  # onmt-main's patches (one-line errors, lock, domains.json): see upstream.
model = registry.preset("factorized_df", "paper")
