"""Small LDR Transformer whose output layer is its target embedding table, like the
demo's Mixed baseline (model_defs/small/mixed_transformer_tied.py): the demo's LDR row, so
that it differs from its control by the method alone."""

from ldr_opennmt import registry, upstream

upstream.install()  # onmt-main's patches (one-line errors, lock, domains.json): see upstream.
model = registry.preset("ldr_transformer", "small", "tied")
