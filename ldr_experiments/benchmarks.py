"""Side-by-side benchmarks of the registered model families: speed and memory.

::

    bash run/bench.sh [--quick] [--out BENCH.md] [--layers 2 --units 256 ...]
    bash run/bench.sh --families ldr_transformer factorized [--user_module my_method.py]
    python ldr_experiments/benchmarks.py --help

One run measures, on the same synthetic data and the same batches, with models of
the same size, and prints as markdown with ratios to the vanilla
``opennmt.models.Transformer`` of that size:

1. training: OpenNMT-tf's own training step (``Trainer._steps``: gradients,
   accumulation and the Adam update) on 16 batches cached in memory, median over
   ``--steps`` steps after ``--warmup``, in the row's training mode (ms/step and
   source+target tokens/s);
2. inference on CPU with beam search, on the same padded batches of the same
   sentences: the exported SavedModels (``serving_default``), and the CTranslate2
   models of vanilla (OpenNMT-tf converter) and of the families that fold (one model
   for one domain, :mod:`ldr_opennmt.serving.ct2_export`). The models are untrained,
   so every output is forced to ``--decode_length`` tokens (minimum = maximum decoding
   length) and the tokens are counted from the outputs;
3. the peak resident memory of each of these measurements: each one runs in its own
   process, one after the other, never in parallel, and reports its peak RSS
   (``VmHWM``, see :func:`peak_rss_mib`) at its end.

The systems are the rows of one table (:class:`Row`, :func:`build_rows`): vanilla first
(the reference), then the benchmark rows of every registered family
(:mod:`ldr_opennmt.registry`; the rows: :func:`ldr_experiments.systems.benchmark_rows`), in
registration order. The
table is the only place that says what a system is: its name, title, family, builder
arguments, domains, training mode, and which of training, SavedModel, CTranslate2 and
ensemble measurements it gets. A family registered by a user module
(``--user_module FILE``) gets its rows like the package's own.

Processes. Each measurement runs in a process of its own, started with
:func:`runpy.run_path` rather than ``-m``, so that a CTranslate2 process does not import
TensorFlow (``import ldr_opennmt`` does): the top of this module imports the standard
library only. The registry reads the catalog and builds tiny models, which imports
TensorFlow, so only the parent process reads it: it builds the table, and writes the
rows of the run as plain JSON data into the run's ``config.json`` (``rows``, with the
user modules under ``user_modules``), where each measurement process finds its row by
name. The TensorFlow processes (training, export, SavedModel) load the user modules
first, for every row alike (with ``--user_module``, vanilla's SavedModel process imports
the package too), and the ones that build a model build it through the registry
(``registry.get(row.family).build(**sizes, **row.kwargs)``); a CTranslate2 process reads
nothing else (neither the registry nor a user module). The parent's TensorFlow does not
distort the measurements: the parent waits while a child measures, each child reports
its own peak memory (``VmHWM``, not inherited), and the parent lets TensorFlow take GPU
memory only as it needs it (:func:`_spare_gpus`), leaving the GPUs to the measurement
processes.

``--families`` takes registered family names, groups (a family name's first word:
``ldr``, ``factorized``, ``mixing``...), ``ensembles`` and row names (:func:`select_rows`).

The targets of the issues are checked (PASS/MISS): they name the families they are
about (:data:`TARGETS`), and are shown for the rows a run measured.

A script of the repository, not of the installed package: ``run/bench.sh`` sets up
the environment and runs it from the repository root as ``python -m benchmarks`` with
``run/`` on ``sys.path`` (``python ldr_experiments/benchmarks.py`` runs the same).
"""

import argparse
import collections
import dataclasses
import importlib.metadata
import importlib.util
import json
import os
import platform
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any, Dict, List, Optional


def standalone_module(name):
    """``ldr_opennmt/<name>.py`` loaded from its file, without the package (whose
    ``__init__`` imports TensorFlow): for the package's modules that import the standard
    library only (``reports``, ``gpu``)."""
    key = "_ldr_%s_standalone" % name
    if key not in sys.modules:
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        spec = importlib.util.spec_from_file_location(
            key, os.path.join(root, "ldr_opennmt", name + ".py")
        )
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        sys.modules[key] = module
    return sys.modules[key]


#: The package's one Markdown table (:func:`ldr_opennmt.reports.markdown_table`).
markdown_table = standalone_module("reports").markdown_table

DOMAINS = ["d0", "d1", "d2"]
INFER_DOMAIN = "d0"
VANILLA = "vanilla"
TF = "tf"
CT2 = "ct2"
TRAIN = "train"
INFER = "infer"
PARTS = (TRAIN, INFER)
RUNTIMES = {TF: "TF SavedModel", CT2: "CTranslate2"}
#: The views of an ensemble row: the benchmark's domains and generic.
ENSEMBLE_VIEWS = len(DOMAINS) + 1
#: The training mode of a row that names none, when its family supports it: one pass
#: over all the variables (the cost of the domain parameters in one step).
DEFAULT_TRAINING = "joint"
MODE_TITLES = {"procedure1": "Procedure 1"}
MODE_NOTES = {
    "joint": "one pass over all the variables",
    "procedure1": "its two passes per step",
    "domains": "the domain parameters alone, the rest frozen",
}
#: The labels of a row's SavedModel batches (when its signature reads one): ``d0`` for
#: every sentence, the domains in turn within every batch (sentence i gets
#: ``DOMAINS[i % 3]``), ``ens-uniform`` (every view), or none read (the label serves
#: training only; ``d0`` is fed if the signature has the input all the same).
FEED_DOMAIN = "one_domain"
FEED_MIXED = "domains_in_turn"
FEED_ENSEMBLE = "ens-uniform"
FEED_NONE = "no_label"
#: The ``--families`` name of every ensemble row with the row it ensembles.
ENSEMBLES = "ensembles"

DEFAULTS = dict(
    layers=2,
    units=256,
    heads=4,
    vocab=2000,
    length=24,
    batch=64,
    steps=50,
    warmup=5,
    sentences=256,
    infer_batch=32,
    decode_length=24,
    beam=4,
    passes=3,
)
QUICK = dict(
    DEFAULTS,
    layers=1,
    units=64,
    heads=2,
    vocab=500,
    length=12,
    batch=16,
    steps=5,
    warmup=2,
    sentences=32,
    infer_batch=16,
    decode_length=8,
    passes=1,
)

SYMBOLS = {">=": "≥", "<=": "≤"}


# The row table.


@dataclasses.dataclass(frozen=True)
class Row:
    """One system of the benchmark: what it builds and what of it is measured.

    Plain data: it travels to the measurement processes as JSON (``dataclasses.asdict``
    there, ``Row(**data)`` back).

    Attributes:
      name: The row's key: its tasks (``train:NAME``, ``tf:NAME``, ``ct2:NAME``), results
        and exported models are named after it.
      title: Its name in the report.
      family: The registry family that builds it; ``None`` for vanilla.
      family_title: The family's title (vanilla's own for vanilla).
      kwargs: The builder's keyword arguments besides the benchmark's sizes.
      domains: Its declared domains (``None`` for vanilla).
      domain_training: The ``params: domain_training`` of its training step (``None``
        for vanilla).
      train: Its training step is measured.
      tf: Its SavedModel is measured.
      ct2: Its CTranslate2 model is measured: vanilla's, converted by the OpenNMT-tf
        converter, or the fold of a family with domain parameters for
        :data:`INFER_DOMAIN`.
      ensemble: It translates ensembles of every domain view (``ens-uniform``) with the
        SavedModel of :attr:`model` (inference only).
      model: The row whose exported models it uses: its own name, or for an ensemble the
        row it ensembles.
      labels: The labels of its SavedModel batches (``FEED_*``).
      domain_tokens: Its targets begin with a domain token (Target Token Mixing): its
        target vocabulary has them.
    """

    name: str
    title: str
    family: Optional[str] = None
    family_title: str = ""
    kwargs: Dict[str, Any] = dataclasses.field(default_factory=dict)
    domains: Optional[List[str]] = None
    domain_training: Optional[str] = None
    train: bool = True
    tf: bool = True
    ct2: bool = False
    ensemble: bool = False
    model: str = ""
    labels: str = FEED_NONE
    domain_tokens: bool = False


def vanilla_row():
    """The reference: ``opennmt.models.Transformer``, trained, exported and converted."""
    title = "vanilla OpenNMT-tf Transformer"
    return Row(VANILLA, title, family_title=title, ct2=True, model=VANILLA)


def _spare_gpus():
    """Lets this process's TensorFlow take GPU memory only as it needs it.

    Reading the capabilities builds and initializes tiny models, which starts
    TensorFlow's context; by default that reserves every GPU's memory, which the
    measurement processes need. No effect once the context has started, or without a GPU.
    """
    import tensorflow as tf

    for gpu in tf.config.list_physical_devices("GPU"):
        try:
            tf.config.experimental.set_memory_growth(gpu, True)
        except (RuntimeError, ValueError):  # The context has started: as it is.
            pass


def _shared_prefix(names):
    """The words (``_``-separated) that :obj:`names` begin with: ``ldr`` for
    ``ldr_joint`` and ``ldr_procedure1``."""
    prefix = []
    for words in zip(*(name.split("_") for name in names)):
        if len(set(words)) > 1:
            break
        prefix.append(words[0])
    return "_".join(prefix)


def _feeds_mixed_batches(model, folds):
    """Whether a family's SavedModel is fed batches that mix the domains.

    The families that fold into CTranslate2 and keep per-domain weights inside the
    network (projections, not only embedders: the Factorized designs) select a copy per
    sentence, and their serving path for a mixed batch (every copy) is the case the
    targets measure. The others get :data:`INFER_DOMAIN` (a lookup of the label costs
    the same whatever the mix), the domain their fold is for.
    """
    import opennmt

    inner = [
        layer
        for layer in model.domain_layers()
        if not isinstance(layer, opennmt.inputters.Inputter)
    ]
    return folds and bool(inner)


def family_rows(family, size):
    """The rows of one registered family at one model size.

    Its declared rows (:func:`ldr_experiments.systems.benchmark_rows`) that build the same
    model (same builder arguments and domains) and differ only in their training mode are
    measured in training each, and share one inference row, named after their common prefix
    (``ldr`` for ``ldr_joint`` and ``ldr_procedure1``; else the family's name) and titled
    by the family. An ``ensemble`` row translates with the SavedModel of the family's
    first inference row.

    Args:
      family: A ``registry.Family``.
      size: The benchmark's model size (``num_layers``, ``num_units``, ``num_heads``,
        ``ffn_inner_dim``).

    Returns:
      A list of :class:`Row`; empty for a family the benchmark cannot build.

    Raises:
      UserError: for a row whose training mode the family does not support, or an
        ensemble row with builder arguments.
    """
    from ldr_experiments import systems
    from ldr_opennmt import registry
    from ldr_opennmt.errors import UserError

    if family.architecture != "transformer":
        _log("%s: not measured (the benchmark compares Transformers)" % family.name)
        return []
    caps = registry.capabilities(family.name)
    model = family.build_tiny()
    folds = caps.ctranslate2 is None and caps.domain_parameters
    if caps.labels == registry.LABEL_NONE:
        labels = FEED_NONE
    else:
        labels = FEED_MIXED if _feeds_mixed_batches(model, folds) else FEED_DOMAIN
    default_mode = DEFAULT_TRAINING
    if DEFAULT_TRAINING not in caps.domain_training:
        default_mode = caps.default_domain_training
    common = dict(
        family=family.name,
        family_title=family.title,
        labels=labels,
        domain_tokens=isinstance(getattr(type(model), "domain_tokens", None), property),
    )
    groups = collections.OrderedDict()
    ensembles = []
    for name, kwargs, options in systems.benchmark_rows(family, size):
        mode = options.get("domain_training", default_mode)
        if options.get("ensemble"):
            if kwargs:
                raise UserError(
                    "%s: benchmark row %s: an ensemble row takes no builder arguments (it "
                    "translates the family's SavedModel)" % (family.name, name)
                )
            ensembles.append(name)
            continue
        if mode not in caps.domain_training:
            raise UserError(
                "%s: benchmark row %s: domain_training %r is not one of its modes (%s)"
                % (family.name, name, mode, ", ".join(caps.domain_training))
            )
        key = json.dumps([kwargs, options.get("num_domains")], sort_keys=True)
        groups.setdefault(key, []).append((name, kwargs, options.get("num_domains"), mode))
    # Builder arguments that differ between the family's models go into their titles.
    keys = {key for members in groups.values() for key in members[0][1]}
    varying = sorted(
        key for key in keys if len({repr(m[0][1].get(key)) for m in groups.values()}) > 1
    )
    rows, inference = [], []
    for members in groups.values():
        name, kwargs, num_domains, mode = members[0]
        parts = [] if num_domains is None else ["k = %d" % num_domains]
        parts += ["%s = %s" % (key, kwargs[key]) for key in varying if key in kwargs]
        title = family.title + (", " + ", ".join(parts) if parts else "")
        domains = DOMAINS if num_domains is None else ["d%d" % i for i in range(num_domains)]
        model_fields = dict(common, kwargs=kwargs, domains=list(domains), ct2=folds)
        if len(members) == 1:
            rows.append(Row(name, title, domain_training=mode, model=name, **model_fields))
        else:
            for name, _, _, mode in members:
                title_mode = "%s %s" % (title, MODE_TITLES.get(mode, mode))
                fields = dict(model_fields, domain_training=mode, tf=False, ct2=False, model=name)
                rows.append(Row(name, title_mode, **fields))
            name = _shared_prefix([m[0] for m in members]) or family.name
            fields = dict(model_fields, domain_training=default_mode, train=False, model=name)
            rows.append(Row(name, title, **fields))
        inference.append(rows[-1])
    for name in ensembles:
        if caps.ensembles is not None or not inference:
            _log("%s: row %s not measured: %s" % (family.name, name, caps.ensembles))
            continue
        base = inference[0]
        rows.append(
            dataclasses.replace(
                base,
                name=name,
                title="%s, ens-uniform (%d domains + generic)" % (base.title, len(base.domains)),
                train=False,
                ct2=False,
                ensemble=True,
                labels=FEED_ENSEMBLE,
            )
        )
    return rows


def build_rows(size, user_modules=()):
    """The row table: vanilla, then the rows of every benchmarked family.

    Never in a CTranslate2 process (see the module docstring): it imports the registry,
    hence TensorFlow, and builds a tiny model of every family.

    Args:
      size: The benchmark's model size.
      user_modules: Modules that register more families (files or module names), loaded
        first.

    Returns:
      A list of :class:`Row`, vanilla first.

    Raises:
      UserError: for a user module that fails, or two rows of one name.
    """
    from ldr_experiments import systems
    from ldr_opennmt import registry
    from ldr_opennmt.errors import UserError

    _spare_gpus()
    for spec in user_modules:
        registry.load_user_module(spec)
    rows = [vanilla_row()]
    for family in registry.families():
        if systems.benchmarked(family):
            rows += family_rows(family, size)
    seen = {}
    for row in rows:
        if row.name in seen:
            raise UserError(
                "benchmark row %s is declared by %s and by %s (rename one)"
                % (row.name, seen[row.name] or VANILLA, row.family or VANILLA)
            )
        seen[row.name] = row.family
    return rows


def _named(name, rows):
    """The names of the rows that one ``--families`` name selects (see :func:`select_rows`)."""
    for matches in (
        lambda row: row.family == name,
        lambda row: (row.family or "").startswith(name + "_"),
        lambda row: name == ENSEMBLES and row.ensemble,
        lambda row: row.name == name,
    ):
        found = [row for row in rows if row.name != VANILLA and matches(row)]
        if found:
            # An ensemble with the row it ensembles (its target compares them).
            bases = {row.model for row in found if name == ENSEMBLES}
            return {row.name for row in rows if row in found or row.name in bases}
    return set()


def family_names(rows):
    """What ``--families`` accepts: the families of :obj:`rows`, their groups (a family
    name's first word, ``ldr``, ``factorized``...), :data:`ENSEMBLES` and row names."""
    families = list(dict.fromkeys(row.family for row in rows if row.family))
    groups = [name.split("_")[0] for name in families if "_" in name]
    names = families + groups + [ENSEMBLES] + [row.name for row in rows if row.name != VANILLA]
    return list(dict.fromkeys(name for name in names if _named(name, rows)))


def select_rows(rows, names=None, strict=True):
    """The rows that ``--families`` names, vanilla always first (the reference).

    Args:
      rows: The row table (:func:`build_rows`).
      names: Registered family names (every row of the family), groups (the families
        whose name begins with ``NAME_``: ``ldr``, ``factorized``, ``mixing``...),
        :data:`ENSEMBLES` (every ensemble row and the row it ensembles) or row names
        (that row); ``None`` or empty: every row.
      strict: Raise for a name that selects nothing (else it is skipped).

    Raises:
      ValueError: naming what is accepted, for a name that selects nothing.
    """
    if not names:
        return list(rows)
    chosen = set()
    for name in names:
        found = _named(name, rows)
        if not found and strict:
            raise ValueError(
                "--families: %r names no benchmark row (registered families with a benchmark,"
                " groups, %s or rows: %s)" % (name, ENSEMBLES, ", ".join(family_names(rows)))
            )
        chosen |= found
    return [row for row in rows if row.name == VANILLA or row.name in chosen]


def config_rows(config):
    """The :class:`Row` objects of a run (its ``config.json``), in table order."""
    return [Row(**row) for row in config.get("rows", [])]


def _row(config, name):
    """The row :obj:`name` of a run (without the registry: CTranslate2 processes too)."""
    for row in config_rows(config):
        if row.name == name:
            return row
    if name == VANILLA:
        return vanilla_row()
    raise KeyError("no row %r in this run's configuration" % name)


def _infer_tasks(rows):
    """``[(runtime, row)]`` of the inference table: SavedModels, their ensembles, then
    CTranslate2 models."""
    return (
        [(TF, row) for row in rows if row.tf and not row.ensemble]
        + [(TF, row) for row in rows if row.tf and row.ensemble]
        + [(CT2, row) for row in rows if row.ct2]
    )


# The targets.

# Targets of the issues: (description, measured, reference, metric, comparison,
# threshold ratio). Measured and reference are (part, family, variant): the row of a
# registered family (None: vanilla) in one part (TRAIN, TF or CT2), variant a training
# mode (its training row), "ensemble" (its ensemble row) or None (its first row of that
# part). The targets name families: they are targets of those methods.
_LDR = "ldr_transformer"
_REFERENCE = {part: (part, None, None) for part in (TRAIN, TF, CT2)}
TARGETS = [
    (
        "LDR joint training tokens/s ≥ 0.95× vanilla",
        (TRAIN, _LDR, "joint"),
        _REFERENCE[TRAIN],
        "tokens_per_s",
        ">=",
        0.95,
    ),
    (
        "LDR Procedure 1 step ≤ 2.05× a vanilla step",
        (TRAIN, _LDR, "procedure1"),
        _REFERENCE[TRAIN],
        "ms_per_step",
        "<=",
        2.05,
    ),
    (
        "LDR SavedModel inference ≥ 0.95× vanilla SavedModel",
        (TF, _LDR, None),
        _REFERENCE[TF],
        "sentences_per_s",
        ">=",
        0.95,
    ),
    (
        "LDR folded CTranslate2 inference ≥ 3× LDR SavedModel",
        (CT2, _LDR, None),
        (TF, _LDR, None),
        "sentences_per_s",
        ">=",
        3.0,
    ),
    (
        "DC folded CTranslate2 inference ≥ 3× DC SavedModel",
        (CT2, "dc_transformer", None),
        (TF, "dc_transformer", None),
        "sentences_per_s",
        ">=",
        3.0,
    ),
]

for _design, _step, _beam in (("sf", 1.15, 1.3), ("df", 1.15, 1.3), ("pa", 1.2, 1.6)):
    _family = "factorized_" + _design
    TARGETS += [
        (
            "Factorized %s training step ≤ %.2f× vanilla (one-domain batches)"
            % (_design.upper(), _step),
            (TRAIN, _family, None),
            _REFERENCE[TRAIN],
            "ms_per_step",
            "<=",
            _step,
        ),
        (
            "Factorized %s training peak memory ≤ 1.3× vanilla" % _design.upper(),
            (TRAIN, _family, None),
            _REFERENCE[TRAIN],
            "peak_rss_mib",
            "<=",
            1.3,
        ),
        (
            "Factorized %s SavedModel beam search ≤ %.1f× vanilla's time (3 domains per batch)"
            % (_design.upper(), _beam),
            (TF, _family, None),
            _REFERENCE[TF],
            "ms_per_sentence",
            "<=",
            _beam,
        ),
    ]

# Ensembles of domain views: K views cost at most K x one view's beam search + 10%.
TARGETS += [
    (
        "Ensemble of %s's %d views (ens-uniform): SavedModel beam search ≤ %d× + 10%% %s's"
        % (title, ENSEMBLE_VIEWS, ENSEMBLE_VIEWS, short),
        (TF, family, "ensemble"),
        (TF, family, None),
        "ms_per_sentence",
        "<=",
        ENSEMBLE_VIEWS * 1.1,
    )
    for family, title, short in ((_LDR, "LDR", "LDR"), ("factorized_pa", "Factorized PA", "PA"))
]

#: The family whose rows get the domain-mixing targets (:func:`mixing_targets`).
MIXING_FAMILY = "mixing_transformer"


def target_where(selector, rows):
    """The ``(table, key)`` of a target's row in :obj:`rows`, or ``None`` (not a row).

    Args:
      selector: ``(part, family, variant)`` (see :data:`TARGETS`).
      rows: The rows of the run.
    """
    part, family, variant = selector
    for row in rows:
        if (row.family if family else row.name) != (family or VANILLA):
            continue
        if part == TRAIN and row.train and variant in (None, row.domain_training):
            return TRAIN, row.name
        if part == TF and row.tf and row.ensemble == (variant == "ensemble"):
            return INFER, "%s:%s" % (TF, row.name)
        if part == CT2 and row.ct2:
            return INFER, "%s:%s" % (CT2, row.name)
    return None


# Pure helpers.


def _read(path):
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError:
        return ""


def ratio(value, reference):
    """``value / reference``, or ``None`` when either is missing or the reference is 0."""
    if value is None or reference is None or reference == 0:
        return None
    return value / reference


def format_number(value, digits=1):
    """A number with :obj:`digits` decimals, or ``n/a``."""
    return "n/a" if value is None else "%.*f" % (digits, value)


def format_ratio(value):
    """A ratio as ``1.23x``, or ``n/a``."""
    return "n/a" if value is None else "%.2fx" % value


def check(value, comparison, threshold):
    """``PASS``, ``MISS``, or ``n/a`` when the value is missing.

    Args:
      value: The measured ratio, or ``None``.
      comparison: ``">="`` or ``"<="``.
      threshold: The target ratio.
    """
    if value is None:
        return "n/a"
    if comparison == ">=":
        passed = value >= threshold
    elif comparison == "<=":
        passed = value <= threshold
    else:
        raise ValueError("unknown comparison %r" % comparison)
    return "PASS" if passed else "MISS"


def metric(results, where, name):
    """A metric of one measurement in :obj:`results`, or ``None`` (missing or failed)."""
    table, row = where
    entry = results.get(table, {}).get(row)
    if not entry or "error" in entry:
        return None
    return entry.get(name)


def transformer_flops(size, vocab, length, decode_length, beam, k=None):
    """Matmul FLOPs of one sentence: (training forward pass, beam-search translation).

    A multiply-add counts 2. ``k=None``: the vanilla Transformer; ``k``: domain mixing
    (E/DC), whose Q/K/V and FFN linears cost ``k`` times theirs, plus the proportion
    layers (``d x k`` per word and layer). Training is teacher-forced on source and
    target of :obj:`length` words (a backward pass costs about twice the forward in
    both models, so the ratio is that of the forward); translation runs the encoder
    once and :obj:`decode_length` incremental decoder steps on :obj:`beam`
    hypotheses, cross-attention keys and values computed once per hypothesis.
    Attention scores, the output projection and the embeddings are not mixed.
    """
    d, f, layers = size["num_units"], size["ffn_inner_dim"], size["num_layers"]
    m = 1 if k is None else k
    extra = 0 if k is None else 2 * d * k  # The proportions of one word in one layer.

    def attention(queries, keys):  # Scores and weighted sum: 2 x (2 * queries * keys * d).
        return 4 * queries * keys * d

    ffn = 2 * 2 * d * f * m
    # Encoder layer, per source word: mixed Q/K/V, shared output projection, FFN.
    encoder = length * (2 * 3 * d * d * m + 2 * d * d + ffn + extra) + attention(length, length)
    memory_kv = length * (2 * 2 * d * d * m + extra)  # Cross-attention K/V of the memory.

    def decoder_word(prefix):
        self_attention = 2 * 3 * d * d * m + 2 * d * d + attention(1, prefix)
        cross = 2 * d * d * m + 2 * d * d + attention(1, length)
        return self_attention + cross + ffn + extra

    output = 2 * d * vocab
    train = layers * (encoder + memory_kv + sum(decoder_word(t + 1) for t in range(length)))
    train += length * output
    decode = layers * (encoder + beam * memory_kv)
    decode += beam * sum(layers * decoder_word(t + 1) + output for t in range(decode_length))
    return train, decode


def mixing_flop_ratios(config, k):
    """(training, translation) FLOP ratios of domain mixing with ``k`` domains to vanilla."""
    args = (config["size"], config["vocab"] + 3, config["length"])
    args += (config["decode_length"], config["beam"])
    vanilla = transformer_flops(*args)
    mixing = transformer_flops(*args, k=k)
    return mixing[0] / vanilla[0], mixing[1] / vanilla[1]


def mixing_targets(config):
    """The domain-mixing targets of a run: each step and translation at most the FLOP
    ratio / 0.8 times vanilla's (80% of the throughput the FLOPs predict), for every row
    of :data:`MIXING_FAMILY` in the run (k: its number of domains)."""
    targets = []
    for row in config_rows(config):
        if row.family != MIXING_FAMILY or row.ensemble:
            continue
        k = len(row.domains)
        train, decode = mixing_flop_ratios(config, k)
        targets += [
            (
                "Domain mixing k = %d training step ≤ %.2f× vanilla (FLOPs %.2f×, / 0.8)"
                % (k, train / 0.8, train),
                (TRAIN, row.name),
                (TRAIN, VANILLA),
                "ms_per_step",
                "<=",
                train / 0.8,
            ),
            (
                "Domain mixing k = %d SavedModel beam search ≤ %.2f× vanilla's time "
                "(FLOPs %.2f×, / 0.8)" % (k, decode / 0.8, decode),
                (INFER, "%s:%s" % (TF, row.name)),
                (INFER, "%s:%s" % (TF, VANILLA)),
                "ms_per_sentence",
                "<=",
                decode / 0.8,
            ),
        ]
    return targets


def run_targets(config=None):
    """The targets of a run, their rows resolved: ``[(description, (table, key) or None,
    (table, key) or None, metric, comparison, threshold)]``.

    Args:
      config: The run configuration (its rows); ``None``: every row of the registry at
        the default size, without the domain-mixing targets (they depend on the sizes).
    """
    if config is None:
        rows = build_rows(make_size(DEFAULTS["layers"], DEFAULTS["units"], DEFAULTS["heads"]))
    else:
        rows = config_rows(config)
    resolved = [
        (description, target_where(where, rows), target_where(reference, rows), *rest)
        for description, where, reference, *rest in TARGETS
    ]
    return resolved + (mixing_targets(config) if config else [])


def check_targets(results, config=None):
    """Checks the targets of the issues.

    Args:
      results: ``{"train": {row: measurement}, "infer": {"tf:ldr": measurement, ...}}``
        (a measurement is a dict of metrics, or ``{"error": ...}``).
      config: The run configuration (see :func:`run_targets`).

    Returns:
      A list of ``(description, measured ratio or None, comparison, threshold,
      "PASS" | "MISS" | "n/a")``, one per target of :func:`run_targets`.
    """
    checks = []
    for description, where, reference, name, comparison, threshold in run_targets(config):
        value = None
        if where and reference:
            value = ratio(metric(results, where, name), metric(results, reference, name))
        checks.append(
            (description, value, comparison, threshold, check(value, comparison, threshold))
        )
    return checks


def parse_cpu_model(cpuinfo):
    """The first ``model name`` of a ``/proc/cpuinfo`` text, or ``None``."""
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("model name", "Model", "cpu model") and value.strip():
            return value.strip()
    return None


def parse_mem_total_gib(meminfo):
    """``MemTotal`` of a ``/proc/meminfo`` text in GiB, or ``None``."""
    for line in meminfo.splitlines():
        if line.startswith("MemTotal:"):
            fields = line.split()
            if len(fields) >= 2 and fields[1].isdigit():
                return int(fields[1]) / (1024 * 1024)
    return None


def parse_peak_rss_mib(status):
    """``VmHWM`` (the peak resident set size) of a ``/proc/<pid>/status`` text in MiB,
    or ``None``."""
    for line in status.splitlines():
        if line.startswith("VmHWM:"):
            fields = line.split()
            if len(fields) >= 2 and fields[1].isdigit():
                return int(fields[1]) / 1024
    return None


def peak_rss_mib():
    """The peak resident set size of this process in MiB.

    On Linux this is ``VmHWM``, the peak of this process's own address space:
    ``ru_maxrss`` would be at least the RSS of the parent process, because the
    kernel carries the peak of the address space replaced by ``exec`` (the parent's,
    with the ``vfork`` that :mod:`subprocess` uses) into ``ru_maxrss``.
    """
    peak = parse_peak_rss_mib(_read("/proc/self/status"))
    if peak is not None:
        return peak
    maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return maxrss / (1024 * 1024 if sys.platform == "darwin" else 1024)  # Bytes on macOS.


def agreement(outputs, reference):
    """The fraction of sentences whose output equals the reference's, or ``None``."""
    if not outputs or reference is None or len(outputs) != len(reference):
        return None
    return sum(a == b for a, b in zip(outputs, reference)) / len(outputs)


def resolve_sizes(args):
    """Fills the size options left unset with the ``--quick`` or default values."""
    base = QUICK if args.quick else DEFAULTS
    for key, value in base.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    return args


def write_atomically(path, text):
    """Writes :obj:`text` to an exclusive temporary file next to :obj:`path`, then renames it.

    ``ldr_opennmt.utils.write_lines_atomic`` does the same, but importing the package
    imports TensorFlow, which this module keeps out of the CTranslate2 processes.
    """
    fd, tmp = tempfile.mkstemp(
        prefix="." + os.path.basename(path) + ".", dir=os.path.dirname(os.path.abspath(path))
    )
    renamed = False
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
        renamed = True
    finally:
        # Only the file created above: once renamed, whatever appears at its name is not ours.
        if not renamed and os.path.lexists(tmp):
            os.remove(tmp)


def directory_size_mib(path):
    """The total size of the files under :obj:`path` in MiB."""
    total = 0
    for root, _, files in os.walk(path):
        total += sum(os.path.getsize(os.path.join(root, name)) for name in files)
    return total / (1024 * 1024)


# The report.


def _version(package):
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def machine_description():
    """The machine and the software versions, as a dict of strings."""
    memory = parse_mem_total_gib(_read("/proc/meminfo"))
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count()
    try:
        load = "%.2f" % os.getloadavg()[0]
    except OSError:
        load = "n/a"
    return {
        "cpu": parse_cpu_model(_read("/proc/cpuinfo")) or platform.processor() or "unknown",
        "arch": platform.machine(),
        "cores": "%d logical CPUs (%d usable)" % (os.cpu_count() or 0, usable or 0),
        "memory": "n/a" if memory is None else "%.1f GiB RAM" % memory,
        "load": load,
        "python": platform.python_version(),
        "tensorflow": _version("tensorflow"),
        "opennmt": _version("opennmt-tf"),
        "ctranslate2": _version("ctranslate2"),
        "date": time.strftime("%Y-%m-%d %H:%M %Z"),
    }


def _and(words):
    """``a``, ``a and b``, ``a, b and c``."""
    words = list(words)
    return words[0] if len(words) == 1 else "%s and %s" % (", ".join(words[:-1]), words[-1])


def _header(config, machine):
    size = config["size"]
    rows = config_rows(config)
    families = list(dict.fromkeys(row.family_title for row in rows if row.family))
    # The builder arguments the rows set (the others are the family's defaults).
    arguments = list(
        dict.fromkeys(
            "%s: %s" % (row.title, ", ".join("%s = %s" % kv for kv in sorted(row.kwargs.items())))
            for row in rows
            if row.kwargs and not row.ensemble
        )
    )
    lines = [
        "# Benchmarks: vanilla OpenNMT-tf Transformer"
        + (" vs %s" % _and(families) if families else ""),
        "",
        "- date: %s" % machine["date"],
        "- machine: %s (%s), %s, %s; 1-minute load average at start: %s"
        % (machine["cpu"], machine["arch"], machine["cores"], machine["memory"], machine["load"]),
        "- software: Python %s, TensorFlow %s, OpenNMT-tf %s, CTranslate2 %s"
        % (machine["python"], machine["tensorflow"], machine["opennmt"], machine["ctranslate2"]),
        "- models: Transformer, %d+%d layers, %d units, %d heads, FFN %d, dropout 0.1 "
        "(training); vocabularies of %d words (+ specials); %d domains (k where a title says "
        "so); every family with its builder's defaults (`ldr-main --list-families`)%s"
        % (
            size["num_layers"],
            size["num_layers"],
            size["num_units"],
            size["num_heads"],
            size["ffn_inner_dim"],
            config["vocab"],
            len(DOMAINS),
            " but for: %s" % "; ".join(arguments) if arguments else "",
        ),
        "- data: synthetic, uniformly random words, every sentence %d tokens, domains "
        "in turn by blocks of one training batch; models untrained (random weights, seed %d)"
        % (config["length"], config["seed"]),
        "- every measurement runs in its own process, one after the other; peak RSS is "
        "that process's peak resident memory (`VmHWM`), runtime and imports included",
    ]
    if config.get("quick"):
        lines.append("- `--quick`: tiny sizes, to check that the benchmark runs; not figures")
    return lines


def _train_section(config, results):
    train = results.get(TRAIN, {})
    base = train.get(VANILLA, {})
    rows = []
    modes = collections.OrderedDict()
    for row in config_rows(config):
        entry = train.get(row.name)
        if entry is None or not row.train:
            continue
        if row.domain_training:
            modes.setdefault(row.domain_training, []).append(row.title)
        if "error" in entry:
            rows.append([row.title, "failed: %s" % entry["error"]] + ["n/a"] * 7)
            continue
        rows.append(
            [
                row.title,
                "{:,}".format(entry["params"]),
                format_number(entry["ms_per_step"]),
                format_number(entry["tokens_per_s"], 0),
                format_ratio(ratio(entry["tokens_per_s"], base.get("tokens_per_s"))),
                format_ratio(ratio(entry["ms_per_step"], base.get("ms_per_step"))),
                format_number(entry["import_rss_mib"], 0),
                format_number(entry["peak_rss_mib"], 0),
                format_ratio(ratio(entry["peak_rss_mib"], base.get("peak_rss_mib"))),
            ]
        )
    headers = [
        "system",
        "parameters",
        "ms/step",
        "tokens/s",
        "tokens/s × vanilla",
        "ms/step × vanilla",
        "RSS after imports MiB",
        "peak RSS MiB",
        "peak RSS × vanilla",
    ]
    tokens = next((e["tokens_per_step"] for e in train.values() if "error" not in e), None)
    described = "; ".join(
        "`%s` (%s): %s" % (mode, MODE_NOTES.get(mode, "its own"), ", ".join(titles))
        for mode, titles in modes.items()
    )
    return [
        "## Training",
        "",
        "OpenNMT-tf's training step (`Trainer._steps`: gradients, accumulation, Adam "
        "update) on the same 16 batches of %d sentences, cached in memory; median of %d "
        "steps after %d warm-up steps. tokens/s counts the source and target tokens of a "
        "step (%s per step, target `</s>` included). Training modes (`params: "
        "domain_training`): %s; every batch has one domain, as `ldr-main`'s sampling gives."
        % (
            config["batch"],
            config["steps"],
            config["warmup"],
            format_number(tokens, 0),
            described or "none",
        ),
        "",
        markdown_table(headers, rows),
    ]


def _infer_row(infer, runtime, row):
    """A row of the inference table, or ``None`` if the row was not measured there."""
    entry = infer.get("%s:%s" % (runtime, row.name))
    if entry is None:
        return None
    if "error" in entry:
        return [row.title, RUNTIMES[runtime], "failed: %s" % entry["error"]] + ["n/a"] * 9
    same_runtime = infer.get("%s:%s" % (runtime, VANILLA), {})
    vanilla_tf = infer.get("%s:%s" % (TF, VANILLA), {})
    own_tf = infer.get("%s:%s" % (TF, row.name), {})
    speed = entry["sentences_per_s"]
    own, same_output = "", ""
    if runtime == CT2:
        own = format_ratio(ratio(speed, own_tf.get("sentences_per_s")))
        same = entry.get("agreement")
        same_output = "n/a" if same is None else "%.0f%%" % (100 * same)
    return [
        row.title,
        RUNTIMES[runtime],
        format_number(speed),
        format_number(entry["tokens_per_s"], 0),
        format_number(entry["tokens_per_sentence"], 2),
        format_ratio(ratio(speed, vanilla_tf.get("sentences_per_s"))),
        format_ratio(ratio(speed, same_runtime.get("sentences_per_s"))),
        own,
        same_output,
        format_number(entry["model_mib"]),
        format_number(entry["peak_rss_mib"], 0),
        format_ratio(ratio(entry["peak_rss_mib"], same_runtime.get("peak_rss_mib"))),
    ]


def _labels_sentence(rows):
    """What the SavedModels of :obj:`rows` are fed, in words."""
    fed = collections.OrderedDict()
    for row in rows:
        if row.tf and row.name != VANILLA:
            fed.setdefault(row.labels, []).append(row.title)
    parts = []
    if fed.get(FEED_DOMAIN):
        parts.append("domain `%s` for %s" % (INFER_DOMAIN, _and(fed[FEED_DOMAIN])))
    if fed.get(FEED_MIXED):
        parts.append(
            "the %d domains in turn within every batch for %s (each sentence selects its "
            "copy)" % (len(DOMAINS), _and(fed[FEED_MIXED]))
        )
    if fed.get(FEED_ENSEMBLE):
        parts.append("`ens-uniform` for the ensembles (every domain view and generic, mixed)")
    if fed.get(FEED_NONE):
        parts.append("no label read by %s" % _and(fed[FEED_NONE]))
    return "; labels: %s" % "; ".join(parts) if parts else ""


def _infer_section(config, results):
    infer = results.get(INFER, {})
    tasks = _infer_tasks(config_rows(config))
    rows = [_infer_row(infer, runtime, row) for runtime, row in tasks]
    rows = [row for row in rows if row is not None]
    folded = [row.title for runtime, row in tasks if runtime == CT2 and row.name != VANILLA]
    uneven = sorted(
        task
        for task, entry in infer.items()
        if "error" not in entry and entry["tokens_per_sentence"] != config["decode_length"]
    )
    headers = [
        "system",
        "runtime",
        "sentences/s",
        "target tokens/s",
        "tokens/sentence",
        "× vanilla SavedModel",
        "× vanilla same runtime",
        "× own SavedModel",
        "same output as own SavedModel",
        "model MiB",
        "peak RSS MiB",
        "peak RSS × vanilla same runtime",
    ]
    quantization = config["quantization"] or "float32 (no quantization)"
    batches = -(-config["sentences"] // config["infer_batch"])
    lines = [
        "## Inference on CPU",
        "",
        "Beam %d; the same %d sentences of %d tokens in %d batches of %d (padded token/length "
        "tensors built before timing)%s; every output forced to L = %d tokens (minimum = "
        "maximum decoding length), target tokens counted from the outputs; median of %d "
        "pass(es) over all batches after 1 warm-up batch, outputs converted to token lists. TF"
        " SavedModel: `tf.saved_model.load` + `signatures['serving_default']`, %d intra-op "
        "threads. CTranslate2 in its throughput setting: `Translator(device='cpu', "
        "inter_threads=%d, intra_threads=1)`, all sentences per call with `max_batch_size` = "
        "the batch size, so batches run in parallel, `translate_batch(beam_size=%d, "
        "min/max_decoding_length=L)`, %s; %svanilla converted by the OpenNMT-tf converter."
        % (
            config["beam"],
            config["sentences"],
            config["length"],
            batches,
            config["infer_batch"],
            _labels_sentence(config_rows(config)),
            config["decode_length"],
            config["passes"],
            config["threads"],
            config["threads"],
            config["beam"],
            quantization,
            "%s folded for `%s`, " % (_and(folded), INFER_DOMAIN) if folded else "",
        ),
        "",
        markdown_table(headers, rows, align="ll" + "r" * (len(headers) - 2)),
    ]
    if uneven:
        lines += [
            "",
            "**Warning**: the outputs of %s are not all of L = %d tokens: tokens/s are "
            "counted from the outputs, but these systems did not do the same work."
            % (", ".join(uneven), config["decode_length"]),
        ]
    return lines


def _measured(where, results):
    """Whether the row of a target's ``(table, key)`` was measured in this run."""
    if where is None:
        return False
    table, key = where
    return key in results.get(table, {})


def _targets_section(results, config=None):
    # Only the targets of the rows this run measured (--families).
    rows = [
        [description, format_ratio(value), "%s %.2fx" % (SYMBOLS[comparison], threshold), status]
        for (description, value, comparison, threshold, status), target in zip(
            check_targets(results, config), run_targets(config)
        )
        if _measured(target[1], results)
    ]
    return [
        "## Targets",
        "",
        markdown_table(["target", "measured", "target ratio", "result"], rows, align="lrrl"),
    ]


def format_report(config, results, machine, elapsed=None):
    """The markdown report of a run.

    Args:
      config: The run configuration (see :func:`make_config`).
      results: The measurements (see :func:`check_targets`).
      machine: The machine description (see :func:`machine_description`).
      elapsed: The run time in seconds, if known.

    Returns:
      The report, ending with a newline.
    """
    lines = _header(config, machine)
    if TRAIN in config["parts"]:
        lines += [""] + _train_section(config, results)
    if INFER in config["parts"]:
        lines += [""] + _infer_section(config, results)
    lines += [""] + _targets_section(results, config)
    if elapsed is not None:
        lines += ["", "Run time: %.1f min." % (elapsed / 60)]
    return "\n".join(lines) + "\n"


# The synthetic data.


def write_labels(path, sentences, domains, block):
    """Writes a label file: :obj:`domains` in turn by blocks of :obj:`block` lines."""
    with open(path, "w") as f:
        for i in range(sentences):
            f.write(domains[(i // block) % len(domains)] + "\n")


def write_data(directory, vocab_size, sentences, length, seed, block=1):
    """Writes random source/target/domain files and the shared vocabulary.

    The domains come in blocks of :obj:`block` sentences (a training batch), in turn:
    each training batch has one domain, as ``ldr-main``'s sampling gives.

    Returns:
      A dict of paths: ``src``, ``tgt``, ``dom`` and ``vocab``.
    """
    rng = random.Random(seed)
    words = ["w%d" % i for i in range(vocab_size)]
    paths = {k: os.path.join(directory, k) for k in ("src", "tgt", "dom", "vocab")}
    with open(paths["src"], "w") as src, open(paths["tgt"], "w") as tgt, open(
        paths["dom"], "w"
    ) as dom:
        for i in range(sentences):
            src.write(" ".join(rng.choices(words, k=length)) + "\n")
            tgt.write(" ".join(rng.choices(words, k=length)) + "\n")
            dom.write(DOMAINS[(i // block) % len(DOMAINS)] + "\n")
    with open(paths["vocab"], "w") as f:
        f.write("\n".join(["<blank>", "<s>", "</s>"] + words) + "\n")
    return paths


def _inference_batches(config):
    """The inference sentences (token lists) in batches."""
    with open(config["paths"]["src"]) as f:
        sentences = [line.split() for _, line in zip(range(config["sentences"]), f)]
    size = config["infer_batch"]
    return [sentences[i : i + size] for i in range(0, len(sentences), size)]


# The measurements (each in its own process).


def _load_user_modules(config):
    """Loads the run's user modules (a TensorFlow process: they register families)."""
    specs = config.get("user_modules") or []
    if specs:
        from ldr_opennmt import registry

        for spec in specs:
            registry.load_user_module(spec)


def _as_row(system, config):
    """The :class:`Row` of :obj:`system`: a row, or the name of one of the run's rows."""
    return system if isinstance(system, Row) else _row(config, system)


def _build_model(system, config):
    """A new model of a row (name or :class:`Row`) at the run's size."""
    import opennmt

    row = _as_row(system, config)
    if row.name == VANILLA:
        return opennmt.models.Transformer(**config["size"])
    if row.family is None:
        raise ValueError("unknown system %r" % row.name)
    from ldr_opennmt import registry

    _load_user_modules(config)
    return registry.get(row.family).build(**config["size"], **row.kwargs)


def _label_file(system, config):
    """The training label file of a row: its domains by blocks of one batch."""
    domains = _as_row(system, config).domains
    if domains == DOMAINS:
        return config["paths"]["dom"]
    path = os.path.join(config["workdir"], "data", "dom_%d" % len(domains))
    if not os.path.exists(path):
        write_labels(path, config["data_sentences"], domains, config["batch"])
    return path


def _domain_token_vocabulary(domains, config):
    """The shared vocabulary followed by the domain tokens of :obj:`domains` (the target
    vocabulary of a model whose targets begin with one)."""
    from ldr_opennmt.models import ttm

    path = os.path.join(config["workdir"], "data", "vocab_domain_tokens_%d" % len(domains))
    if not os.path.exists(path):
        with open(config["paths"]["vocab"]) as f:
            words = f.read().split("\n")[:-1]
        write_atomically(path, "\n".join(words + ttm.domain_tokens(domains)) + "\n")
    return path


def _data_config(system, config):
    row = _as_row(system, config)
    paths = config["paths"]
    data = {"source_vocabulary": paths["vocab"], "target_vocabulary": paths["vocab"]}
    if row.domain_tokens:
        data["target_vocabulary"] = _domain_token_vocabulary(row.domains, config)
    if row.name != VANILLA:
        data["domains"] = row.domains
    return data


def _measure_training(config, system):
    """Median step time of OpenNMT-tf's training step on cached batches."""
    import opennmt
    import tensorflow as tf

    import ldr_opennmt.models  # noqa: F401 (imports counted before the model)
    from ldr_opennmt import compat

    _load_user_modules(config)
    import_rss = peak_rss_mib()
    tf.random.set_seed(config["seed"])
    paths = config["paths"]
    row = _as_row(system, config)
    model = _build_model(system, config)
    params = {"optimizer": "Adam", "learning_rate": 1e-4}
    if row.domain_training:
        params["domain_training"] = row.domain_training
    model.initialize(_data_config(system, config), params=params)
    optimizer = model.get_optimizer()
    features_file = (
        paths["src"] if row.name == VANILLA else [paths["src"], _label_file(system, config)]
    )
    dataset = model.examples_inputter.make_training_dataset(
        features_file,
        paths["tgt"],
        batch_size=config["batch"],
        batch_type="examples",
        shuffle_buffer_size=1,
        length_bucket_width=None,
    )
    # The same 16 batches for every row, held in memory: the step time measures
    # the model, not the text pipeline.
    dataset = dataset.take(16).cache().repeat()
    tokens = [
        int(tf.reduce_sum(features["length"]) + tf.reduce_sum(labels["length"]))
        for features, labels in dataset.take(16)
    ]
    if getattr(model, "requires_base", False):
        optimizer.iterations.assign(1)  # As after restoring a trained base (adapters).
    trainer = opennmt.training.Trainer(model, optimizer)
    times = []
    start = time.perf_counter()
    for i, loss in enumerate(compat.training_steps(trainer, dataset, accum_steps=1)):
        now = time.perf_counter()
        if i >= config["warmup"]:
            times.append(now - start)
        start = now
        if len(times) == config["steps"]:
            break
    step = statistics.median(times)
    tokens_per_step = statistics.mean(tokens)
    return {
        "params": model.count_params(),
        "ms_per_step": 1000 * step,
        "tokens_per_step": tokens_per_step,
        "tokens_per_s": tokens_per_step / step,
        "steps": len(times),
        "last_loss": loss,
        "import_rss_mib": import_rss,
    }


def _model_dirs(config, row):
    """The (SavedModel, CTranslate2) directories of a row's exported models."""
    root = config["workdir"]
    return os.path.join(root, "savedmodel", row.model), os.path.join(root, "ct2", row.model)


def _ct2_model_dir(config, row):
    _, ct2_dir = _model_dirs(config, row)
    return ct2_dir if row.name == VANILLA else os.path.join(ct2_dir, INFER_DOMAIN)


def _prepare_inference(config):
    """Builds each exported model once: the SavedModels and CTranslate2 models of the
    inference rows (an ensemble's is the SavedModel of the row it ensembles)."""
    import tensorflow as tf

    from ldr_opennmt.serving import ct2_export

    _load_user_modules(config)
    exports = collections.OrderedDict()  # Model name: [a row that builds it, tf, ct2].
    for runtime, row in _infer_tasks(config_rows(config)):
        export = exports.setdefault(row.model, [row, False, False])
        export[1 if runtime == TF else 2] = True
    exported = {}
    for name, (row, savedmodel, ct2) in exports.items():
        tf.random.set_seed(config["seed"])
        model = _build_model(row, config)
        params = {
            "beam_width": config["beam"],
            "maximum_decoding_length": config["decode_length"],
            "minimum_decoding_length": config["decode_length"],
        }
        model.initialize(_data_config(row, config), params=params)
        model.create_variables()
        savedmodel_dir, ct2_dir = _model_dirs(config, row)
        if savedmodel:
            model.export(savedmodel_dir)
        if ct2 and row.name == VANILLA:
            ct2_export.convert(model, ct2_dir, quantization=config["quantization"])
        elif ct2:
            ct2_export.export(
                model, ct2_dir, domains=[INFER_DOMAIN], quantization=config["quantization"]
            )
        exported[name] = {"params": model.count_params()}
    return exported


def _time_inference(config, translate, batches):
    """Times passes over the batches after one warm-up batch.

    Returns:
      (median seconds per pass, the outputs of the last pass).
    """
    translate(batches[0])
    times = []
    for _ in range(config["passes"]):
        outputs = []
        start = time.perf_counter()
        for batch in batches:
            outputs.extend(translate(batch))
        times.append(time.perf_counter() - start)
    return statistics.median(times), outputs


def _inference_result(seconds, outputs, model_dir, import_rss):
    tokens = sum(len(output) for output in outputs)
    return {
        "sentences_per_s": len(outputs) / seconds,
        "ms_per_sentence": 1000 * seconds / len(outputs),
        "tokens_per_s": tokens / seconds,
        "tokens_per_sentence": tokens / len(outputs),
        "sentences": len(outputs),
        "model_mib": directory_size_mib(model_dir),
        "import_rss_mib": import_rss,
        "outputs": outputs,
    }


def _measure_savedmodel(config, system):
    """Sentences/s of a SavedModel's ``serving_default`` signature (beam search)."""
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(config["threads"])
    _load_user_modules(config)
    import_rss = peak_rss_mib()
    row = _row(config, system)
    model_dir, _ = _model_dirs(config, row)
    imported = tf.saved_model.load(model_dir)
    signature = imported.signatures["serving_default"]
    inputs = signature.structured_input_signature[1]
    feeds = []
    for batch in _inference_batches(config):
        length = max(len(tokens) for tokens in batch)
        feed = {
            # "<blank>" is OpenNMT-tf's padding token (opennmt.constants.PADDING_TOKEN).
            "tokens": tf.constant([t + ["<blank>"] * (length - len(t)) for t in batch]),
            "length": tf.constant([len(t) for t in batch], tf.int32),
        }
        if "domain" in inputs:
            if row.labels == FEED_ENSEMBLE:
                labels = ["ens-uniform"] * len(batch)
            elif row.labels == FEED_MIXED:
                labels = [DOMAINS[i % len(DOMAINS)] for i in range(len(batch))]
            else:
                labels = [INFER_DOMAIN] * len(batch)
            feed["domain"] = tf.constant(labels)
        feeds.append(feed)

    def _translate(feed):
        outputs = signature(**feed)
        tokens = outputs["tokens"].numpy()[:, 0]
        lengths = outputs["length"].numpy()[:, 0]
        return [[t.decode("utf-8") for t in row[:n]] for row, n in zip(tokens, lengths)]

    seconds, outputs = _time_inference(config, _translate, feeds)
    return _inference_result(seconds, outputs, model_dir, import_rss)


def _measure_ctranslate2(config, system):
    """Sentences/s of a CTranslate2 model (beam search), without TensorFlow (nor the
    registry, nor any user module: the row comes from the configuration)."""
    import ctranslate2

    import_rss = peak_rss_mib()
    model_dir = _ct2_model_dir(config, _row(config, system))
    # CTranslate2's throughput setting: one batch per thread, batches in parallel.
    # Why intra_threads=1: BENCHMARKS.md, "Measurements behind the budgets".
    translator = ctranslate2.Translator(
        model_dir, device="cpu", inter_threads=config["threads"], intra_threads=1
    )
    length = config["decode_length"]

    def _translate(sentences):
        results = translator.translate_batch(
            sentences,
            max_batch_size=config["infer_batch"],
            beam_size=config["beam"],
            max_decoding_length=length,
            min_decoding_length=length,
        )
        return [result.hypotheses[0] for result in results]

    batches = _inference_batches(config)
    # One call per pass with every sentence (CTranslate2 splits them into batches of
    # max_batch_size); _time_inference's warm-up is then a whole pass.
    everything = [tokens for batch in batches for tokens in batch]
    seconds, outputs = _time_inference(config, _translate, [everything])
    result = _inference_result(seconds, outputs, model_dir, import_rss)
    if "tensorflow" in sys.modules:
        result["warning"] = "TensorFlow was imported in the CTranslate2 process"
    return result


def run_task(task, workdir):
    """Runs one measurement (in a process of its own) and writes its result file.

    Args:
      task: ``prepare``, ``train:<row>``, ``tf:<row>`` or ``ct2:<row>``.
      workdir: The run directory (``config.json`` is read from it).
    """
    with open(os.path.join(workdir, "config.json")) as f:
        config = json.load(f)
    kind, _, system = task.partition(":")
    if kind == "prepare":
        result = _prepare_inference(config)
    elif kind == TRAIN:
        result = _measure_training(config, system)
    elif kind == TF:
        result = _measure_savedmodel(config, system)
    elif kind == CT2:
        result = _measure_ctranslate2(config, system)
    else:
        raise ValueError("unknown task %r" % task)
    result["peak_rss_mib"] = peak_rss_mib()
    with open(_result_path(workdir, task), "w") as f:
        json.dump(result, f)


def _result_path(workdir, task):
    return os.path.join(workdir, "results", task.replace(":", "-") + ".json")


# The driver.


def _log(message):
    sys.stderr.write("[bench] %s\n" % message)
    sys.stderr.flush()


def _run_process(task, workdir, number, total):
    """Runs :func:`run_task` in a new process and returns its result (or an error)."""
    log_path = os.path.join(workdir, "logs", task.replace(":", "-") + ".log")
    command = [sys.executable, "-m", "ldr_experiments.benchmarks"]
    command += ["--one", task, "--workdir", workdir]
    env = dict(os.environ)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    env.setdefault("PYTHONWARNINGS", "ignore")
    _log("%d/%d %s ..." % (number, total, task))
    start = time.perf_counter()
    with open(log_path, "w") as log:
        status = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, env=env).returncode
    elapsed = time.perf_counter() - start
    if status != 0:
        lines = [line for line in _read(log_path).splitlines() if line.strip()]
        error = lines[-1] if lines else "exit status %d" % status
        _log(
            "%s failed after %.1f s (exit status %d), last lines of %s:"
            % (task, elapsed, status, log_path)
        )
        for line in lines[-15:]:
            sys.stderr.write("    %s\n" % line)
        return {"error": error.replace("|", "/")}
    with open(_result_path(workdir, task)) as f:
        result = json.load(f)
    _log("%s done in %.1f s (peak RSS %.0f MiB)" % (task, elapsed, result["peak_rss_mib"]))
    if result.get("warning"):
        _log("warning: %s" % result["warning"])
    return result


def make_size(layers, units, heads):
    """The benchmark's model size: the builders' size arguments (FFN 4x the units)."""
    return dict(num_layers=layers, num_units=units, num_heads=heads, ffn_inner_dim=4 * units)


def base_config(args, workdir):
    """The JSON-serializable configuration shared with the measurement processes, but for
    its rows: the sizes and settings of :obj:`args` (:mod:`ldr_experiments.gpu_check` adds rows of its
    own)."""
    keys = list(DEFAULTS) + ["threads", "quantization", "seed", "quick"]
    config = {key: getattr(args, key) for key in keys}
    config["parts"] = list(args.parts)
    config["families"] = list(getattr(args, "families", None) or [])
    config["user_modules"] = list(getattr(args, "user_module", None) or [])
    config["workdir"] = workdir
    config["size"] = make_size(args.layers, args.units, args.heads)
    return config


def make_config(args, workdir):
    """The JSON-serializable configuration shared with the measurement processes.

    Its ``rows`` are the rows that ``args.families`` selects (every row by default, a
    name that selects nothing skipped: :func:`parse_args` has refused it), as plain dicts.
    """
    config = base_config(args, workdir)
    rows = build_rows(config["size"], config["user_modules"])
    selected = select_rows(rows, config["families"], strict=False)
    config["rows"] = [dataclasses.asdict(row) for row in selected]
    return config


def _tasks(parts, rows):
    """The tasks of a run, in order: training, the exports, SavedModels, CTranslate2."""
    tasks = []
    if TRAIN in parts:
        tasks += ["%s:%s" % (TRAIN, row.name) for row in rows if row.train]
    if INFER in parts:
        tasks.append("prepare")
        tasks += ["%s:%s" % (runtime, row.name) for runtime, row in _infer_tasks(rows)]
    return tasks


def make_workdir(path):
    """Creates the ``--workdir`` given by the user, or checks it is an empty directory.

    Checked again here, right before use (``parse_args`` checks it too): the run writes
    its data, models and logs there and must not overwrite anything it did not create.
    A symbolic link given as the directory is resolved once, with a message. The
    directory is never removed (only the temporary one made without ``--workdir`` is).

    Returns:
      The absolute path of the directory (of its target, for a link).

    Raises:
      SystemExit: with a one-line message, if the path is not a directory or not empty.
    """
    path = os.path.abspath(path)
    if os.path.islink(path):
        target = os.path.realpath(path)
        _log("--workdir %s is a symbolic link: writing into %s" % (path, target))
        path = target
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        os.mkdir(path)
        return path
    except FileExistsError:
        pass
    except OSError as e:
        raise SystemExit("run/bench.sh: error: --workdir %s: %s" % (path, e.strerror or e))
    if not os.path.isdir(path):
        raise SystemExit("run/bench.sh: error: --workdir %s is not a directory" % path)
    if os.listdir(path):
        raise SystemExit("run/bench.sh: error: --workdir %s is not empty" % path)
    return path


def run_benchmarks(args, workdir):
    """Runs every measurement in turn; returns (config, results, any failure)."""
    for name in ("data", "results", "logs"):
        os.makedirs(os.path.join(workdir, name), exist_ok=True)
    config = make_config(args, workdir)
    sentences = max(3000, config["sentences"], 16 * config["batch"])
    config["data_sentences"] = sentences
    config["paths"] = write_data(
        os.path.join(workdir, "data"),
        args.vocab,
        sentences,
        args.length,
        args.seed,
        block=config["batch"],
    )
    with open(os.path.join(workdir, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    results = {TRAIN: {}, INFER: {}}
    rows = config_rows(config)
    tasks = _tasks(args.parts, rows)
    failed = False
    prepared = True
    for number, task in enumerate(tasks, start=1):
        kind, _, system = task.partition(":")
        if kind in (TF, CT2) and not prepared:
            results[INFER][task] = {"error": "the export failed"}
            continue
        result = _run_process(task, workdir, number, len(tasks))
        failed = failed or "error" in result
        if kind == "prepare":
            prepared = "error" not in result
        elif kind == TRAIN:
            results[TRAIN][system] = result
        else:
            results[INFER][task] = result
    for row in rows:
        entry = results[INFER].get("%s:%s" % (CT2, row.name))
        reference = results[INFER].get("%s:%s" % (TF, row.name))
        if row.ct2 and entry and "error" not in entry:
            entry["agreement"] = agreement(entry.get("outputs"), (reference or {}).get("outputs"))
    return config, results, failed


def _user_module_spec(spec):
    """A user module as the measurement processes load it: a file by its absolute path."""
    return os.path.abspath(spec) if spec.endswith(".py") or os.sep in spec else spec


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        prog="run/bench.sh",
        description="Training and CPU inference speed and peak memory of vanilla OpenNMT-tf "
        "and the registered model families, side by side (markdown on standard output).",
    )
    parser.add_argument(
        "--quick", action="store_true", help="Tiny sizes (a 1-2 minute check, not figures)."
    )
    parser.add_argument("--out", help="Also write the markdown report to this file.")
    parser.add_argument(
        "--parts", nargs="+", choices=PARTS, default=list(PARTS), help="What to measure."
    )
    parser.add_argument(
        "--families",
        nargs="+",
        help="What to measure besides vanilla (always measured, the reference); default: "
        "every registered family with a benchmark (`ldr-main --list-families`). Registered "
        "family names (e.g. ldr_transformer), groups of families (their name's first word: "
        "ldr, factorized, mixing...), %s (every ensemble row and the row it ensembles) or "
        "row names (e.g. ldr_joint)." % ENSEMBLES,
    )
    parser.add_argument(
        "--user_module",
        action="extend",
        nargs="+",
        metavar="FILE",
        help="A Python file (or an importable module name) that registers families of its "
        "own (ldr_opennmt.registry); their benchmark rows are measured like the package's. "
        "Repeatable.",
    )
    sizes = parser.add_argument_group(
        "sizes", "Unset options take the default (or --quick) values shown."
    )
    for key, help_text in (
        ("layers", "Encoder and decoder layers."),
        ("units", "Model units (FFN: 4x)."),
        ("heads", "Attention heads."),
        ("vocab", "Words in the synthetic (shared) vocabulary."),
        ("length", "Tokens in every synthetic source and target sentence."),
        ("batch", "Training batch size in sentences."),
        ("steps", "Timed training steps per system."),
        ("warmup", "Training steps before timing."),
        ("sentences", "Inference sentences."),
        ("infer_batch", "Inference batch size in sentences."),
        ("decode_length", "L: the length of every translation (min = max decoding length)."),
        ("beam", "Beam size."),
        ("passes", "Timed inference passes over all sentences (the median is reported)."),
    ):
        sizes.add_argument(
            "--" + key,
            type=int,
            help="%s Default: %d (--quick: %d)." % (help_text, DEFAULTS[key], QUICK[key]),
        )
    parser.add_argument(
        "--threads",
        type=int,
        default=len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        help="CPU threads for inference (TF intra-op, CTranslate2 intra_threads). "
        "Default: the usable CPUs.",
    )
    parser.add_argument(
        "--quantization",
        help="CTranslate2 weight type of the converted models (e.g. int8); default: "
        "float32 like the TF models.",
    )
    parser.add_argument("--seed", type=int, default=1, help="Data and weights seed.")
    parser.add_argument(
        "--workdir",
        help="Keep the data, exported models, logs and raw results in this new or empty "
        "directory (default: a temporary directory, removed at the end).",
    )
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        if not args.workdir:
            parser.error("--one needs --workdir")
        return args
    resolve_sizes(args)
    if args.threads is None:
        args.threads = os.cpu_count() or 1
    for key in list(DEFAULTS) + ["threads"]:
        minimum = 0 if key == "warmup" else 1
        if getattr(args, key) < minimum:
            parser.error("--%s must be >= %d" % (key, minimum))
    if args.quantization:
        from ctranslate2.specs.model_spec import ACCEPTED_MODEL_TYPES

        if args.quantization not in ACCEPTED_MODEL_TYPES:
            parser.error(
                "--quantization: %r is not a CTranslate2 weight type (%s)"
                % (args.quantization, ", ".join(ACCEPTED_MODEL_TYPES))
            )
    if args.workdir and os.path.lexists(args.workdir):
        if not os.path.isdir(args.workdir):
            parser.error("--workdir %s is not a directory" % args.workdir)
        if os.listdir(args.workdir):
            parser.error("--workdir %s is not empty" % args.workdir)
    # The row table (the registry, the user modules) is read here, to refuse a wrong
    # name or module before anything runs.
    args.user_module = [_user_module_spec(spec) for spec in args.user_module or []]
    from ldr_opennmt.errors import UserError

    try:
        rows = build_rows(make_size(args.layers, args.units, args.heads), args.user_module)
        select_rows(rows, args.families)
    except (UserError, ValueError) as e:
        parser.error(str(e))
    return args


def main(argv=None):
    """The ``run/bench.sh`` entry point; returns the exit status (1 if a measurement failed)."""
    args = parse_args(argv)
    if args.one:
        run_task(args.one, os.path.abspath(args.workdir))
        return 0
    start = time.perf_counter()
    machine = machine_description()
    if args.workdir:
        workdir = make_workdir(args.workdir)
        config, results, failed = run_benchmarks(args, workdir)
    else:
        # Made here, exclusively: the only directory this script ever removes.
        workdir = tempfile.mkdtemp(prefix="ldr-bench-")
        try:
            config, results, failed = run_benchmarks(args, workdir)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
    report = format_report(config, results, machine, elapsed=time.perf_counter() - start)
    sys.stdout.write(report)
    sys.stdout.flush()
    if args.out:
        write_atomically(args.out, report)
        _log("report written to %s" % args.out)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
