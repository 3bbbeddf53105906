"""Small Mixed Transformer, target embeddings tied to the output layer, with the untied Mixed's
parameter count: the 508,736 weights an output layer of its own adds (7949 target words x 64)
spent on wider feed-forward layers instead (4 of them x (2 x 64 + 1) x 986 more inner units =
508,776). The controlled experiment of docs/tables.md, "One base for continued training":
whether the tied and untied Mixed differ by their parameter count or by the tying."""

from ldr_opennmt import models, upstream

# The package's patches of onmt-main (one-line errors, training lock, domains.json, ...):
# installed here, on import, because onmt-main copies this file before it builds the model.
upstream.install()


def model():
    return models.mixed_transformer(
        num_layers=2, num_units=64, num_heads=4, ffn_inner_dim=1242, share_target_embeddings=True
    )
