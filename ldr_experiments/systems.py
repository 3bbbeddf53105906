"""What the experiments know of each family: its model definition files and its benchmark rows.

The library's registry (:mod:`ldr_opennmt.registry`) describes a family (its builder, title,
paper, stages); what only the experiments use lives here, keyed by the family's registry
name:

- :data:`MODEL_DEFS`: the repository's model definition files of the package's families, at
  the paper's size (``model_defs/``) and at the demo's (``model_defs/small/``), relative to
  the repository root (the installed library ships none of them). A family of a user module
  has none: its module's file is its model definition (``onmt-main --model FILE``).
- :data:`BENCHMARK`: the benchmark's rows (``ldr-experiments bench``, ``run/bench.sh``):
  ``{row name: builder keyword arguments}``, the arguments a dict or a callable of the
  benchmark's model size returning one; the entries of :data:`BENCHMARK_OPTIONS` in a row are
  options of the measurement, not builder arguments. ``None``: not benchmarked.

A user module declares its families' rows in a module-level dict of the same shape,
:data:`USER_ROWS_ATTRIBUTE` (``BENCHMARK_ROWS = {"my_family": {"my_row": {}}}``; ``None`` for
a family it does not want benchmarked); a family it registers without one gets one row named
after it.

This module imports nothing of TensorFlow or of the library at its top: the benchmark's
CTranslate2 processes may read it.
"""

import inspect
import sys

#: The scales of :func:`model_def`: the paper's size and the demo's.
PAPER = "paper"
SMALL = "small"
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


#: Family name -> {scale: model definition file, relative to the repository root}.
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

#: Family name -> its benchmark rows (see the module docstring); the package's families.
BENCHMARK = {
    "mixed_transformer": {"mixed": {}},
    "dc_transformer": {"dc": {}},
    "ldr_transformer": {
        "ldr_joint": {"domain_training": "joint"},
        "ldr_procedure1": {"domain_training": "procedure1"},
        "ens_ldr": {"ensemble": True},
    },
    "ldr_transformer_released": {"ldr_released": {"domain_training": "summed"}},
    "factorized_pa": {"fact_pa": {}, "ens_fact_pa": {"ensemble": True}},
    "factorized_sf": {"fact_sf": {}},
    # d_inner in the paper's proportion to the model size (280 for 512 units).
    "factorized_df": {
        "fact_df": lambda size: {"d_inner": max(1, round(size["num_units"] * 280 / 512))}
    },
    "mixing_transformer": {
        "mix_k2": {"num_domains": 2},
        "mix_k3": {"num_domains": 3},
        "mix_k6": {"num_domains": 6},
    },
    # Adapters 4x the model size (2048 for 512 units); trained alone, the base frozen.
    "residual_adapters": {
        "adapters": lambda size: {
            "adapter_dim": 4 * size["num_units"],
            "domain_training": "domains",
        }
    },
    "ttm_transformer": {"ttm": {}},
    "ml_transformer": {"ml": {}},
    "advl_transformer": {"advl": {}},
    # The benchmark compares Transformers.
    "ldr_rnn": None,
    "dc_rnn": None,
    "mixed_rnn": None,
}


def model_def(name, scale=SMALL):
    """The model definition file of a package family at one scale.

    Args:
      name: The family's registry name.
      scale: :data:`PAPER` (``model_defs/``) or :data:`SMALL` (``model_defs/small/``).

    Returns:
      The path relative to the repository root, or ``None`` for a family the repository has
      no file for (a user module's: its module file is its model definition).

    Raises:
      ValueError: for an unknown scale.
    """
    if scale not in SCALES:
        raise ValueError("scale must be one of %s, got %r" % (", ".join(SCALES), scale))
    return MODEL_DEFS.get(name, {}).get(scale)


def _declared_rows(family):
    """The rows declared for :obj:`family`: the package's table, else its module's
    :data:`USER_ROWS_ATTRIBUTE` entry, else one row named after it (``{}``)."""
    if family.name in BENCHMARK:
        return BENCHMARK[family.name]
    builder = getattr(family.builder, "func", family.builder)  # A functools.partial's.
    module = sys.modules.get(getattr(builder, "__module__", None) or "")
    module = module or inspect.getmodule(builder)
    declared = getattr(module, USER_ROWS_ATTRIBUTE, None) or {}
    return declared.get(family.name, {})


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
