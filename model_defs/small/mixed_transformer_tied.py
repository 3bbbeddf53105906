"""Small Mixed Transformer with shared target input and output embeddings, as the
Factorized Transformer: the demo's Mixed baseline, whose checkpoint is also the first
stage of its Factorized PA row (``finetune: unfold``)."""

from ldr_opennmt import registry, upstream

upstream.install()  # onmt-main's patches (one-line errors, lock, domains.json): see upstream.
model = registry.preset("mixed_transformer", "small", "tied")
