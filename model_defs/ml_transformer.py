"""Multitask learning (Britz et al., 2017): a Transformer (6+6 layers, 512 units, 8 heads,
FFN 2048, dropout 0.1) trained jointly with a domain classifier on its mean-pooled encoder
output, L = L_gen + L_cls. Domain labels are needed for training only."""

from ldr_opennmt import registry, upstream

upstream.install()  # onmt-main's patches (one-line errors, lock, domains.json): see upstream.
model = registry.preset("ml_transformer", "paper")
