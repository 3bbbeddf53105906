"""Target Token Mixing (Britz et al., 2017) on a Transformer: 6+6 layers, 512 units,
8 heads, FFN 2048, dropout 0.1. Each target starts with its domain token ``<domain:NAME>``
(add one line per declared domain to the target vocabulary); the token is predicted for
``generic`` sentences, forced for labelled ones, and removed from the output."""

from ldr_opennmt import registry, upstream

upstream.install()  # onmt-main's patches (one-line errors, lock, domains.json): see upstream.
model = registry.preset("ttm_transformer", "paper")
