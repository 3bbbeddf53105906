"""LDR Transformer (paper size) as its authors' released TF1 code builds it: the LDR
transform after the input and after every encoder and decoder layer, LDR target embeddings,
domain regions starting at zero, trained `summed` (docs/families/ldr.md, "LDR as released").
Its data configuration gives one-domain batches drawn by natural shares (`data:
domain_batches: true`, `train: domain_sampling_alpha: 1`)."""

from ldr_opennmt import registry, upstream

upstream.install()  # onmt-main's patches (one-line errors, lock, domains.json): see upstream.
model = registry.preset("ldr_transformer_released", "paper")
