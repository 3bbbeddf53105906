"""Word-level adaptive layer-wise domain mixing (Jiang et al., 2020), E/DC: 6+6 layers,
512 units, 8 heads, FFN 2048, target input and output embeddings shared, eps 0.05,
gradient cut. Domain labels are needed for training only."""

from ldr_opennmt import registry, upstream

upstream.install()  # onmt-main's patches (one-line errors, lock, domains.json): see upstream.
model = registry.preset("mixing_transformer", "paper")
