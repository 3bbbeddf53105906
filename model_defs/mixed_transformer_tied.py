"""Mixed Transformer (6+6 layers, 512 units, 8 heads, FFN 2048) with shared target input and
output embeddings, as the Factorized Transformer: the stage 1 of Factorized PA and the base of
the tied residual adapters at paper size (``bash run/tables.sh --scale paper``)."""

from ldr_opennmt import registry, upstream

upstream.install()  # onmt-main's patches (one-line errors, lock, domains.json): see upstream.
model = registry.preset("mixed_transformer", "paper", "tied")
