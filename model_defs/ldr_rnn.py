"""ldr rnn (full size, as in the LDR paper)."""

from ldr_opennmt import registry, upstream

upstream.install()  # onmt-main's patches (one-line errors, lock, domains.json): see upstream.
model = registry.preset("ldr_rnn", "paper")
