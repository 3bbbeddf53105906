"""LDR Transformer (paper size) as its authors' released TF1 code builds it: the LDR
transform after the input and after every encoder and decoder layer, LDR target embeddings,
domain regions starting at zero, trained `summed` (docs/families/ldr.md, "LDR as released").
Its data configuration gives one-domain batches drawn by natural shares (`data:
domain_batches: true`, `train: domain_sampling_alpha: 1`)."""

from ldr_opennmt import models, upstream

# The package's patches of onmt-main (one-line errors, training lock, domains.json, ...):
# installed here, on import, because onmt-main copies this file before it builds the model.
upstream.install()


def model():
    return models.ldr_transformer_released()
