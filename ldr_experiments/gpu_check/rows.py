"""The GPU check's rows, from the family registry (a TensorFlow process: the registry builds
tiny models), and the configuration of a run that holds them."""

import argparse
import dataclasses
import json
import os

from ldr_experiments.benchmarks import cli as bench_cli
from ldr_experiments.benchmarks import rows as bench_rows
from ldr_experiments.gpu_check.plan import (
    QUICK_RNN_SIZE,
    RNN_SIZE,
    TARGET_SIDE,
    TRANSFORMER,
    TRANSLATE_FAMILY,
)

# The rows (a TensorFlow process: the registry builds tiny models).


def _xla_refusal(family):
    """Why :obj:`family`'s model refuses XLA (``set_jit_compile``), or ``None``."""
    from ldr_opennmt.errors import UserError

    try:
        family.build_tiny().set_jit_compile(True)
    except UserError as e:
        return str(e)
    return None


def _own_row(family, name, title, size, **fields):
    """A row of :obj:`family` that the benchmark's table does not have, trained in its
    default mode on the benchmark's domains; at :obj:`size` (its builder arguments) for
    a family of another architecture than the Transformer."""
    from ldr_opennmt import probe

    caps = probe.capabilities(family.name)
    model = family.build_tiny()
    values = dict(
        family=family.name,
        family_title=family.title,
        kwargs=dict(size) if family.architecture != TRANSFORMER else {},
        domains=list(bench_rows.DOMAINS),
        domain_training=caps.default_domain_training,
        tf=False,
        model=name,
        labels=(
            bench_rows.FEED_NONE if caps.labels == probe.LABEL_NONE else bench_rows.FEED_DOMAIN
        ),
        domain_tokens=isinstance(getattr(type(model), "domain_tokens", None), property),
    )
    values.update(fields)
    return bench_rows.Row(name, title, **values)


def check_rows(table, rnn_size):
    """The rows this check trains, from the family registry (none is written here).

    Args:
      table: The benchmark's row table (``bench_rows.build_rows``).
      rnn_size: The size (builder arguments) of the families of another architecture.

    Returns:
      A list of ``bench_rows.Row``, vanilla first: the training rows of :obj:`table`;
      after the rows of a family whose builder takes :data:`TARGET_SIDE`, its model with
      that argument (``PREFIX_target``, PREFIX its name's first word), in the family's
      default training mode; then a row for each registered family with no row in
      :obj:`table` (the RNNs), named after it, in its default training mode.
    """
    import inspect

    from ldr_opennmt import registry

    trained = [row for row in table if row.train]
    rows = []
    for index, row in enumerate(trained):
        rows.append(row)
        following = trained[index + 1].family if index + 1 < len(trained) else None
        if row.family is None or following == row.family:
            continue
        family = registry.get(row.family)
        if TARGET_SIDE in inspect.signature(family.builder).parameters:
            name = "%s_target" % family.name.split("_")[0]
            title = "%s, source and target" % family.title
            rows.append(_own_row(family, name, title, rnn_size, kwargs={TARGET_SIDE: True}))
    measured = {row.family for row in table}
    for family in registry.families():
        if family.name not in measured:
            rows.append(_own_row(family, family.name, family.title, rnn_size))
    return rows


def translate_row(table):
    """The row of the translation check: :data:`TRANSLATE_FAMILY`'s SavedModel row."""
    return next(r for r in table if r.family == TRANSLATE_FAMILY and r.tf and not r.ensemble)


def row_checks(rows):
    """What the rows get besides training, from their families' capabilities.

    Returns:
      ``(no_xla, frozen)``: the names of the rows whose model refuses XLA (no mixed
      precision + XLA run), and of those whose absent domains' parameters must stay
      bit-identical: their family has domain parameters that each sentence selects by its
      label (labels needed), trains without a frozen base (``requires_base``: its base
      model is frozen by design) and takes XLA.
    """
    from ldr_opennmt import probe, registry

    no_xla, frozen = [], []
    for row in rows:
        if row.family is None:
            continue
        family = registry.get(row.family)
        caps = probe.capabilities(family.name)
        if _xla_refusal(family):
            no_xla.append(row.name)
        elif (
            caps.domain_parameters and caps.labels == probe.LABEL_NEEDED and not caps.requires_base
        ):
            frozen.append(row.name)
    return no_xla, frozen


# The driver.


def make_config(args, workdir):
    """The configuration shared with the child processes: :func:`bench_cli.base_config`'s
    (sizes, data, inference settings), the rows that ``--families`` selects
    (:func:`check_rows`) and this check's settings.

    Reads the registry, hence imports TensorFlow: :func:`run_checks` calls it in a child
    process.

    Raises:
      ValueError: for a ``--families`` name that selects no row.
    """
    values = dict(bench_rows.QUICK if args.quick else bench_rows.DEFAULTS)
    for key in ("layers", "units", "heads", "vocab", "length", "batch", "warmup", "steps"):
        values[key] = getattr(args, key)
    bench_args = argparse.Namespace(
        threads=os.cpu_count() or 1,
        quantization=None,
        seed=args.seed,
        quick=args.quick,
        parts=[bench_rows.TRAIN],
        families=list(args.families or []),
        **values,
    )
    config = bench_cli.base_config(bench_args, workdir)
    table = bench_rows.build_rows(config["size"])
    rows = check_rows(table, QUICK_RNN_SIZE if args.quick else RNN_SIZE)
    for name in args.families or []:
        try:
            bench_rows.select_rows(rows, [name])
        except ValueError:
            raise ValueError(
                "--families: %r names no row of this check (registered families, groups or "
                "rows: %s)" % (name, ", ".join(bench_rows.family_names(rows)))
            ) from None
    selected = bench_rows.select_rows(rows, args.families)
    no_xla, frozen = row_checks(selected)
    config.update(
        rows=[dataclasses.asdict(row) for row in selected],
        systems=[row.name for row in selected],
        no_xla=no_xla,
        frozen_systems=frozen,
        translate=dataclasses.asdict(translate_row(table)),
        timing_steps=args.timing_steps,
        frozen_steps=args.frozen_steps,
        modes=list(args.modes),
        mixed_policy=args.mixed_policy,
    )
    return config


def config_task(workdir):
    """The child process of :func:`make_config`: the arguments from ``args.json``."""
    with open(os.path.join(workdir, "args.json")) as f:
        args = argparse.Namespace(**json.load(f))
    try:
        return make_config(args, workdir)
    except ValueError as e:
        return {"usage_error": str(e)}
