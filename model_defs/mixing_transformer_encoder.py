"""Word-level adaptive layer-wise domain mixing (Jiang et al., 2020), encoder-only variant
(E): mixing in the 6 encoder layers, a plain decoder; otherwise as
``mixing_transformer.py``."""

from ldr_opennmt import registry, upstream

upstream.install()  # onmt-main's patches (one-line errors, lock, domains.json): see upstream.
model = registry.preset("mixing_transformer", "paper", "encoder")
