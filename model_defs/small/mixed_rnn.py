"""Small Mixed RNN for CPU experiments and tests."""

from ldr_opennmt import registry, upstream

upstream.install()  # onmt-main's patches (one-line errors, lock, domains.json): see upstream.
model = registry.preset("mixed_rnn", "small")
