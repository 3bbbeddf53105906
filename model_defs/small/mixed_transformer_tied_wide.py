"""Small Mixed Transformer, target embeddings tied to the output layer, with the untied Mixed's
parameter count: the 508,736 weights an output layer of its own adds (7949 target words x 64)
spent on wider feed-forward layers instead (4 of them x (2 x 64 + 1) x 986 more inner units =
508,776). The controlled experiment of docs/tables.md, "One base for continued training":
whether the tied and untied Mixed differ by their parameter count or by the tying."""

from ldr_opennmt import registry, upstream

upstream.install()  # onmt-main's patches (one-line errors, lock, domains.json): see upstream.
model = registry.preset("mixed_transformer", "small", "tied", "wide")
