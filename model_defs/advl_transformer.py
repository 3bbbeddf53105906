"""Adversarial learning (Britz et al., 2017): a Transformer (6+6 layers, 512 units, 8 heads,
FFN 2048, dropout 0.1) with a domain classifier on its mean-pooled encoder output behind a
gradient reversal whose weight ramps from 0 to lambda = 1 as in Ganin and Lempitsky
(``params: gradient_reversal_steps``, set it to ``train: max_step``), L = L_gen + L_cls.
Domain labels are needed for training only."""

from ldr_opennmt import registry, upstream

upstream.install()  # onmt-main's patches (one-line errors, lock, domains.json): see upstream.
model = registry.preset("advl_transformer", "paper")
