"""The benchmark's systems: one table of rows (:class:`Row`), read from the family registry,
and the sizes of a run.

Building the table (:func:`build_rows`) imports the registry, hence TensorFlow: only the
parent process does it, and writes the rows into the run's ``config.json``, where each
measurement process reads its own (:func:`config_rows`, :func:`find_row`) without the
registry.
"""

import collections
import dataclasses
import json
import sys
from typing import Any, Dict, List, Optional

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
    from ldr_opennmt import probe
    from ldr_opennmt.errors import UserError

    if family.architecture != "transformer":
        log("%s: not measured (the benchmark compares Transformers)" % family.name)
        return []
    caps = probe.capabilities(family.name)
    model = family.build_tiny()
    folds = caps.ctranslate2 is None and caps.domain_parameters
    if caps.labels == probe.LABEL_NONE:
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
            log("%s: row %s not measured: %s" % (family.name, name, caps.ensembles))
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


def find_row(config, name):
    """The row :obj:`name` of a run (without the registry: CTranslate2 processes too)."""
    for row in config_rows(config):
        if row.name == name:
            return row
    if name == VANILLA:
        return vanilla_row()
    raise KeyError("no row %r in this run's configuration" % name)


def infer_tasks(rows):
    """``[(runtime, row)]`` of the inference table: SavedModels, their ensembles, then
    CTranslate2 models."""
    return (
        [(TF, row) for row in rows if row.tf and not row.ensemble]
        + [(TF, row) for row in rows if row.tf and row.ensemble]
        + [(CT2, row) for row in rows if row.ct2]
    )


def make_size(layers, units, heads):
    """The benchmark's model size: the builders' size arguments (FFN 4x the units)."""
    return dict(num_layers=layers, num_units=units, num_heads=heads, ffn_inner_dim=4 * units)


def log(message):
    """A line of the benchmark's progress on standard error."""
    sys.stderr.write("[bench] %s\n" % message)
    sys.stderr.flush()
