"""What the experiments know of each family: its model definition files and its benchmark rows.

The library's registry (:mod:`ldr_opennmt.registry`) describes a family (its builder, title,
paper, stages, presets and benchmark rows); what only the experiments use lives here, keyed
by the family's registry name:

- :data:`MODEL_DEFS`: the repository's model definition files of the package's families, at
  the paper's size (``model_defs/``) and at the demo's (``model_defs/small/``), named as in
  the repository (found by :func:`ldr_experiments.common.resource`: from the working
  directory, the checkout, or the copies an installed package carries). A family of a user module
  has none: its module's file is its model definition (``onmt-main --model FILE``).
- :func:`benchmark_rows`: the benchmark's rows (``ldr-experiments bench``, ``run/bench.sh``),
  declared with the family (``benchmark=``: ``{row name: builder keyword arguments}``, the
  arguments a dict or a callable of the benchmark's model size returning one; ``None``: not
  benchmarked); the entries of :data:`BENCHMARK_OPTIONS` in a row are options of the
  measurement, not builder arguments.

A user module may also declare its families' rows in a module-level dict of the same shape,
:data:`USER_ROWS_ATTRIBUTE` (``BENCHMARK_ROWS = {"my_family": {"my_row": {}}}``; ``None`` for
a family it does not want benchmarked); a family declared in neither gets one row named
after it.

This module imports nothing of TensorFlow at its top (of the library, the standard library's
family table only): the benchmark's CTranslate2 processes may read it.
"""

import inspect
import sys

from ldr_opennmt.family_table import PAPER, SMALL

#: The scales of :func:`model_def`: the paper's size and the demo's (the registry's sizes).
SCALES = (PAPER, SMALL)

#: The reserved entries of a benchmark row: ``domain_training``, the training mode
#: measured; ``num_domains``, the number of declared domains (default the benchmark's);
#: ``ensemble``: the row translates ensembles of every domain view (inference only).
BENCHMARK_OPTIONS = ("domain_training", "num_domains", "ensemble")

#: The module-level dict of a user module that declares its families' benchmark rows.
USER_ROWS_ATTRIBUTE = "BENCHMARK_ROWS"


def _defs(paper, small=None):
    name = paper if small is None else small
    return {PAPER: "model_defs/%s.py" % paper, SMALL: "model_defs/small/%s.py" % name}


#: Family name -> {scale: model definition file, named as in the repository}.
MODEL_DEFS = {
    # The demo's Mixed ties its target embeddings (Factorized PA's stage 1).
    "mixed_transformer": _defs("mixed_transformer", "mixed_transformer_tied"),
    "dc_transformer": _defs("dc_transformer"),
    "ldr_transformer": _defs("ldr_transformer"),
    "ldr_transformer_released": _defs("ldr_transformer_released"),
    "factorized_pa": _defs("factorized_pa"),
    "factorized_sf": _defs("factorized_sf"),
    "factorized_df": _defs("factorized_df"),
    "mixing_transformer": _defs("mixing_transformer"),
    "residual_adapters": _defs("residual_adapters"),
    "ttm_transformer": _defs("ttm_transformer"),
    "ml_transformer": _defs("ml_transformer"),
    "advl_transformer": _defs("advl_transformer"),
    "ldr_rnn": _defs("ldr_rnn"),
    "dc_rnn": _defs("dc_rnn"),
    "mixed_rnn": _defs("mixed_rnn"),
}


def model_def(name, scale=SMALL):
    """The model definition file of a package family at one scale.

    Args:
      name: The family's registry name.
      scale: :data:`PAPER` (``model_defs/``) or :data:`SMALL` (``model_defs/small/``).

    Returns:
      The path as named in the repository (:func:`ldr_experiments.common.resource` finds
      it), or ``None`` for a family the repository has no file for (a user module's: its
      module file is its model definition).

    Raises:
      ValueError: for an unknown scale.
    """
    if scale not in SCALES:
        raise ValueError("scale must be one of %s, got %r" % (", ".join(SCALES), scale))
    return MODEL_DEFS.get(name, {}).get(scale)


def _declared_rows(family):
    """The rows declared for :obj:`family`: its module's :data:`USER_ROWS_ATTRIBUTE` entry,
    else its registration's (:attr:`Family.benchmark <ldr_opennmt.registry.Family>`: one row
    named after it unless declared)."""
    builder = getattr(family.builder, "func", family.builder)  # A functools.partial's.
    module = sys.modules.get(getattr(builder, "__module__", None) or "")
    module = module or inspect.getmodule(builder)
    declared = getattr(module, USER_ROWS_ATTRIBUTE, None) or {}
    return declared[family.name] if family.name in declared else family.benchmark


def benchmarked(family):
    """Whether the benchmark measures :obj:`family` (a ``registry.Family``)."""
    return _declared_rows(family) is not None


def benchmark_rows(family, size=None):
    """The benchmark's rows of one family at one model size.

    Args:
      family: A ``registry.Family``.
      size: The benchmark's model size (``num_layers``, ``num_units``, ...), passed to row
        arguments given as a callable.

    Returns:
      ``[(row name, builder arguments, options)]``; the options are the reserved entries of
      the row (:data:`BENCHMARK_OPTIONS`), the builder arguments the rest. Empty for a family
      not benchmarked.
    """
    rows = _declared_rows(family)
    if rows is None:
        return []
    result = []
    for row, arguments in (rows or {family.name: {}}).items():
        arguments = dict(arguments(dict(size or {})) if callable(arguments) else arguments)
        options = {k: arguments.pop(k) for k in BENCHMARK_OPTIONS if k in arguments}
        result.append((row, arguments, options))
    return result
