"""LDR Transformer (paper size) with two reserved domain regions for domains added later."""

from ldr_opennmt import registry, upstream

upstream.install()  # onmt-main's patches (one-line errors, lock, domains.json): see upstream.
model = registry.preset("ldr_transformer", "paper", "reserved")
