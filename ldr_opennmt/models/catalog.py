"""The package's families, registered in the order of the tables: Mixed, DC, LDR, LDR as
released, Factorized PA, SF and DF, domain mixing, residual adapters, TTM, ML, AdvL, then the
RNNs.

Each family lives in one module of its own, with its model class, builder, presets (the
named sizes and variants of ``model_defs/``: ``registry.preset``), tiny size, parameter count
and benchmark rows: :mod:`~ldr_opennmt.models.mixed`, :mod:`~ldr_opennmt.models.dc`,
:mod:`~ldr_opennmt.models.ldr`, :mod:`~ldr_opennmt.models.factorized`,
:mod:`~ldr_opennmt.models.mixing`, :mod:`~ldr_opennmt.models.adapters`,
:mod:`~ldr_opennmt.models.ttm`, :mod:`~ldr_opennmt.models.multitask` (their layers are in
:mod:`ldr_opennmt.layers`, below the models). This module registers them
(:mod:`ldr_opennmt.family_table`, read through :mod:`ldr_opennmt.registry`, which imports this
module when first asked): the one list of the package's families that everything else reads.
Defaults follow the LDR paper (Pham et al., 2019, section 3.2): Transformer 6+6 layers, 512
units, 8 heads, FFN 2048; RNN with 512-cell embeddings and 1024 hidden cells; LDR regions of
8 cells per domain fused by a 512 dense layer; DC with 2 domain cells.
"""

import dataclasses

from ldr_opennmt import family_table
from ldr_opennmt.models import adapters, dc, factorized, ldr, mixed, mixing, multitask, ttm

#: The package's families, in the order of the tables. Registered once, here.
FAMILIES = (
    mixed.MIXED_TRANSFORMER,
    dc.DC_TRANSFORMER,
    ldr.LDR_TRANSFORMER,
    ldr.LDR_TRANSFORMER_RELEASED,
    factorized.FACTORIZED_PA,
    factorized.FACTORIZED_SF,
    factorized.FACTORIZED_DF,
    mixing.MIXING_TRANSFORMER,
    adapters.RESIDUAL_ADAPTERS,
    ttm.TTM_TRANSFORMER,
    multitask.ML_TRANSFORMER,
    multitask.ADVL_TRANSFORMER,
    ldr.LDR_RNN,
    dc.DC_RNN,
    mixed.MIXED_RNN,
)

for _family in FAMILIES:
    # Registered by the module that defines its builder: its home.
    family_table.register(dataclasses.replace(_family, module=family_table.origin(_family.builder)))
