"""Small domain-mixing Transformer, encoder-only variant (E): mixing in the encoder layers
only, the decoder a plain Transformer's (the mixing paper's E against E/DC)."""

from ldr_opennmt import registry, upstream

upstream.install()  # onmt-main's patches (one-line errors, lock, domains.json): see upstream.
model = registry.preset("mixing_transformer", "small", "encoder")
