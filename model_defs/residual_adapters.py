"""Residual adapters (Bapna and Firat, 2019) on the Mixed Transformer: 6+6 layers, 512 units,
8 heads, FFN 2048, adapter inner size 2048 (the Factorized Transformer paper's comparison).
Trained by ldr-main with finetune: base (model_defs/mixed_transformer.py's model directory)."""

from ldr_opennmt import registry, upstream

upstream.install()  # onmt-main's patches (one-line errors, lock, domains.json): see upstream.
model = registry.preset("residual_adapters", "paper")
