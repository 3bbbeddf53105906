"""The experiments' workflow engine: a driver's declared stages run by Snakemake.

A driver (the demo, the tables, the studies) declares its stages
(:class:`ldr_experiments.common.Stage`: a name, what it comes after, what it writes, its stamp)
and hands them to :meth:`ldr_experiments.common.Steps.run_stages`, which calls :func:`run`
here. This module writes them as a plan (``OUT/workflow/phase-K.json``), each stage pickled
beside it (``OUT/workflow/stages/NAME.pickle``: the stage with its closures and the driver's
:class:`~ldr_experiments.common.Steps`, by cloudpickle), and runs Snakemake on the package's
one generic workflow (``workflow.smk``): one rule per stage, whose job is
``python -m ldr_experiments.engine stage PLAN NAME``. That process loads the stage the engine
declared and runs it (:func:`run_stage`); the driver runs once, in the engine's process, never
again inside a job. A phase's stages are declared from what the earlier phases made (the
corpus's sizes): a driver calls :meth:`~ldr_experiments.common.Steps.run_stages` once per phase.

One rule decides whether a stage runs again: its stamp (:meth:`ldr_experiments.common.Steps.due`:
its inputs, configuration, options, outputs and the code it runs, :func:`stage_code`). The
engine reads every stamp before Snakemake starts and hands it the stages due as forced
(``--forcerun``), saying why; a stage whose inputs are made by a stage that runs first is
judged by its own job, which skips it when its stamp matches. Snakemake's own rerun rule is
reduced to the times of the markers (``--rerun-triggers mtime``): a stage runs when it never
finished (no marker), when it is forced, or after a stage it comes after ran again.

What Snakemake brings (and the hand-written scheduler it replaces did not): two lanes on this
machine (a training per core, as before: each job takes a free lane and is confined to its
cores), or one job per stage on a SLURM cluster (``--executor slurm``, each training with its
GPU request); the order of the stages; a run killed half-way resumes (a half-done stage has no
marker: it reruns and continues from its last checkpoint); a dry run lists what would run and
why; ``--dag`` draws the plan.

Added here: one command at a time on a results directory (:func:`lock_results`: a second one is
refused in one line), and SIGTERM, SIGINT or SIGHUP to the engine stops Snakemake and every
stage under it before the engine ends (:func:`_stopped_by_signals`): nothing keeps writing into
the results directory unseen, and the same command resumes.

Why Snakemake: the common engine of research computing, pure Python (installs from PyPI beside
TensorFlow 2.13 at 9.15), with a SLURM executor maintained by its authors, provenance-based
reruns (parameters, code, inputs) and dry runs with reasons. Nextflow needs a JVM and Groovy
workflows; Luigi and Airflow have no SLURM executor of their own.

Options (every sub-command of ``ldr-experiments`` that runs stages; see :func:`add_arguments`)
are taken off the command line by :func:`driver` before the driver parses its own.
"""

import argparse
import ast
import contextlib
import dataclasses
import fcntl
import functools
import getpass
import hashlib
import importlib.util
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
from typing import Dict, List, Optional, Tuple

from ldr_opennmt import locks
from ldr_opennmt.errors import UserError

#: Where a results directory keeps the engine's plans, markers, lane locks and Snakemake's
#: own records (``OUT/workflow``).
WORKFLOW_DIR = "workflow"

#: The generic workflow: one rule per stage of a plan file.
SNAKEFILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "workflow.smk")

#: Stage kinds: trainings and translations are cluster jobs (with a GPU request for a
#: training); the rest (corpus, scores, report) run where the engine runs.
TRAIN, EVALUATE, LOCAL = "train", "evaluate", "local"

#: The packages whose code a stage's results depend on (:func:`code_digest`).
LIBRARY, EXPERIMENTS = "ldr_opennmt", "ldr_experiments"


@dataclasses.dataclass
class Options:
    """How the engine runs a plan.

    Attributes:
      lanes: Stages side by side on this machine (each confined to its share of the cores).
      executor: ``"local"`` (this machine) or ``"slurm"`` (a job per stage).
      slurm_partition: The partition of the cluster jobs.
      slurm_account: The account charged.
      gpus_per_training: GPUs requested by each training (and translation) job.
      cpus_per_training: CPU cores of each training and translation job.
      mem_mb_per_training: Memory (MB) of each training and translation job.
      minutes_per_training: The time limit of each training and translation job (a cluster
        kills a job that outlives its limit; the stage then resumes from its last checkpoint
        when the engine runs again).
      jobs: Cluster jobs submitted at once.
      dry_run: List what would run and why; run nothing.
      dag: Where to write the picture of the plan (``.dot``, or ``.png``/``.svg``/``.pdf``
        with Graphviz's ``dot`` installed).
      only: Stage names: run these and what they come after, then stop (the phases before
        theirs run whole: the stages of a phase are declared from what the earlier ones made).
    """

    lanes: int = 2
    executor: str = "local"
    slurm_partition: Optional[str] = None
    slurm_account: Optional[str] = None
    gpus_per_training: int = 0
    cpus_per_training: int = 4
    mem_mb_per_training: int = 16000
    minutes_per_training: int = 720
    jobs: int = 20
    dry_run: bool = False
    dag: Optional[str] = None
    only: Tuple[str, ...] = ()


def add_arguments(parser):
    """Adds the engine's options to :obj:`parser`."""
    group = parser.add_argument_group("workflow engine (Snakemake)")
    group.add_argument(
        "--lanes",
        type=int,
        default=2,
        help="stages side by side on this machine, each on its share of the cores (default 2)",
    )
    group.add_argument("--executor", choices=["local", "slurm"], default="local")
    group.add_argument("--slurm-partition", help="the SLURM partition of the jobs")
    group.add_argument("--slurm-account", help="the SLURM account charged")
    group.add_argument(
        "--gpus-per-training",
        type=int,
        default=0,
        help="GPUs requested by each training and translation job on SLURM (default 0)",
    )
    group.add_argument(
        "--cpus-per-training", type=int, default=4, help="CPU cores of each such job (default 4)"
    )
    group.add_argument(
        "--mem-mb-per-training",
        type=int,
        default=16000,
        help="memory of each such job in MB (default 16000)",
    )
    group.add_argument(
        "--minutes-per-training",
        type=int,
        default=720,
        help="time limit of each such job (default 720; a training cut by it resumes on the"
        " next run)",
    )
    group.add_argument("--jobs", type=int, default=20, help="cluster jobs at once (default 20)")
    group.add_argument(
        "--dry-run", action="store_true", help="list what would run and why; run nothing"
    )
    group.add_argument("--dag", metavar="FILE", help="write the plan's picture (.dot, .png, .svg)")
    group.add_argument(
        "--only",
        nargs="+",
        default=(),
        metavar="STAGE",
        help="run these stages and what they come after, then stop (stage names as in"
        " OUT/stages/: mixed, eval_mixed, ...)",
    )
    return parser


def _engine_help():
    parser = argparse.ArgumentParser(add_help=False, usage=argparse.SUPPRESS)
    return add_arguments(parser).format_help().strip()


def parse_options(argv):
    """``(Options, the driver's own arguments)`` of a command line."""
    parser = add_arguments(argparse.ArgumentParser(add_help=False, allow_abbrev=False))
    known, rest = parser.parse_known_args(argv)
    if min(known.lanes, known.jobs, known.cpus_per_training, known.mem_mb_per_training) < 1:
        raise UserError("--lanes, --jobs, --cpus/--mem-mb-per-training must be >= 1")
    if known.minutes_per_training < 1 or known.gpus_per_training < 0:
        raise UserError("--minutes-per-training must be >= 1, --gpus-per-training >= 0")
    if known.executor != "slurm" and (known.slurm_partition or known.slurm_account):
        raise UserError("--slurm-partition and --slurm-account need --executor slurm")
    values = {f.name: getattr(known, f.name) for f in dataclasses.fields(Options)}
    values["only"] = tuple(values["only"])
    return Options(**values), rest


@dataclasses.dataclass
class _Driver:
    module: str  # The driver's module (``ldr_experiments.demo``): its main runs the stages.
    command: str  # The sub-command of ldr-experiments (``demo``).
    argv: List[str]  # Its arguments, without the engine's options.
    options: Options
    phase: int = 0
    started: float = dataclasses.field(default_factory=time.time)
    # The results directories this command holds (lock_results): realpath -> locks' key.
    locks: Dict[str, str] = dataclasses.field(default_factory=dict)
    # In a dry run: an earlier phase has stages to run (planning_ahead).
    pending_ahead: bool = False


#: The driver running in this process (set by :func:`driver`).
_DRIVER: Optional[_Driver] = None

#: In a stage's process: when the engine's driver started (:func:`started`).
_STARTED: Optional[float] = None

#: Where a plan's stages are pickled (``OUT/workflow/stages/NAME.pickle``).
STAGES_DIR = "stages"


class StageDone(Exception):
    """Raised in the engine's process when the command stops before its driver's end:
    ``--only`` ran the stages named, or a dry run cannot declare the later phases."""


class StageFailed(RuntimeError):
    """A stage failed: ``ldr-experiments`` says so in one line (its log is named), exit 1."""

    status = 1


class Interrupted(StageFailed):
    """The engine was stopped by a signal (SIGTERM, SIGINT, SIGHUP) while its stages ran: it
    stopped them (:func:`_stop_tree`) before it ended. ``ldr-experiments`` says so in one line
    and exits with 128 + the signal's number (143 for SIGTERM), as a process the signal ended.
    """

    def __init__(self, signum, message):
        super().__init__(message)
        self.status = 128 + signum


def driver(command):
    """Decorates a driver's ``main(argv)``: takes the engine's options off :obj:`argv` and
    records the driver (its sub-command and arguments), which :func:`run` writes into each
    plan (what declared it: its stages' jobs load the stages, they do not run the driver)."""

    def decorate(main):
        @functools.wraps(main)
        def wrapped(argv=None):
            global _DRIVER
            argv = sys.argv[1:] if argv is None else list(argv)
            options, rest = parse_options(argv)
            previous, _DRIVER = _DRIVER, _Driver(main.__module__, command, rest, options)
            try:
                return main(rest)
            except StageDone:
                return 0
            except SystemExit:
                if "-h" in rest or "--help" in rest:  # The driver's help, then the engine's.
                    print("\n" + _engine_help())
                raise
            finally:
                for key in _DRIVER.locks.values():
                    locks.release(key)  # The results directory is free again.
                _DRIVER = previous

        return wrapped

    return decorate


def started():
    """When the driver started: in a stage's process, the engine's driver (the stages done
    before are from an earlier run); ``None`` outside a driver."""
    if _STARTED is not None:
        return _STARTED
    return _DRIVER.started if _DRIVER else None


def dry_run():
    """Whether the driver runs with ``--dry-run`` (nothing is run)."""
    return bool(_DRIVER and _DRIVER.options.dry_run)


def planning_ahead():
    """Whether this is a dry run in which an earlier phase's stages have not run: the driver
    declares its later phases from what it knows beforehand (``ahead=True`` in
    :func:`run`), and reads nothing those stages would make."""
    return bool(_DRIVER and _DRIVER.pending_ahead)


# The code a stage depends on.


def _strip_docstrings(tree):
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (
            isinstance(body, list)
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            node.body = body[1:] or [ast.Pass()]
    return tree


@functools.lru_cache(maxsize=None)
def code_digest(*packages):
    """The SHA-256 of the code of :obj:`packages` (importable package names), read as syntax
    trees without docstrings: a changed comment, docstring or layout leaves it unchanged, a
    changed statement changes it."""
    digest = hashlib.sha256()
    for package in sorted(packages):
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            raise ValueError("not a package: %s" % package)
        root = list(spec.submodule_search_locations)[0]
        for directory, dirs, files in os.walk(root):
            dirs[:] = sorted(d for d in dirs if not d.startswith((".", "__pycache__")))
            for name in sorted(f for f in files if f.endswith(".py")):
                path = os.path.join(directory, name)
                with open(path, encoding="utf-8") as f:
                    tree = _strip_docstrings(ast.parse(f.read(), path))
                digest.update(os.path.relpath(path, root).encode("utf-8") + b"\0")
                digest.update(ast.dump(tree).encode("utf-8") + b"\0")
    return digest.hexdigest()


def stage_code(kind):
    """The code digest of a stage of this kind: a training or a translation runs the library's
    commands on inputs its declaration stamps (configurations, checkpoints, test files), so it
    depends on the library's code; the local stages (corpus, scores, findings, reports) also
    on the experiments'. A change to a report's code thus rewrites the report, not the hours
    of trainings and translations under it."""
    return code_digest(LIBRARY) if kind in (TRAIN, EVALUATE) else code_digest(LIBRARY, EXPERIMENTS)


# The plan file.


def _rule_name(name):
    return "stage_" + "".join(c if c.isalnum() else "_" for c in name)


def write_stages(directory, steps, stages):
    """Pickles each of :obj:`stages` with :obj:`steps` into ``directory/stages/NAME.pickle``
    (atomically), what its job loads (:func:`load_stage`).

    A stage's ``run`` and ``stamp`` are closures of the driver that declared it; cloudpickle
    stores them by value, with what they capture (the driver's arguments, its plan), and the
    package's functions they call by reference (the job imports the same code: a changed
    library or experiments package makes the stage due again, :func:`stage_code`).

    Raises:
      TypeError: a stage holds something that cannot be pickled (its name is said).
    """
    os.makedirs(os.path.join(directory, STAGES_DIR), exist_ok=True)
    for stage in stages:
        path = os.path.join(directory, STAGES_DIR, stage.name + ".pickle")
        data = _pickled(stage, {"steps": steps, "stage": stage})
        with open(path + ".tmp", "wb") as f:
            f.write(data)
        os.replace(path + ".tmp", path)


def _pickled(stage, record):
    """:obj:`record` (what holds :obj:`stage`) pickled by cloudpickle, or a ``TypeError``
    naming the stage."""
    import cloudpickle  # The experiments' extra (setup.py), as Snakemake.

    try:
        return cloudpickle.dumps(record)
    except Exception as e:  # pickle raises TypeError, PicklingError, AttributeError...
        raise TypeError("stage %s cannot be pickled for its job: %s" % (stage.name, e)) from e


def load_stage(plan_path, name):
    """``(steps, stage)``: the stage :obj:`name` of a plan, as the engine declared it."""
    import pickle

    path = os.path.join(os.path.dirname(plan_path), STAGES_DIR, name + ".pickle")
    try:
        with open(path, "rb") as f:
            record = pickle.load(f)
    except FileNotFoundError:
        raise UserError("%s: no stage %r declared: rerun the command" % (plan_path, name)) from None
    return record["steps"], record["stage"]


def write_plan(steps, stages, options, phase, driver_record):
    """Writes the plan of one call of :meth:`Steps.run_stages` and its stages
    (:func:`write_stages`); returns its path."""
    directory = os.path.join(os.path.abspath(steps.out), WORKFLOW_DIR)
    os.makedirs(os.path.join(directory, "done"), exist_ok=True)
    write_stages(directory, steps, stages)
    names = {stage.name for stage in stages}
    done = os.path.join(directory, "done")
    plan = {
        "format": 2,
        # What declared it (the job does not run it again: it loads the stage's pickle).
        "driver": {
            "module": driver_record.module,
            "command": driver_record.command,
            "argv": driver_record.argv,
        },
        # The driver's working directory: its stages' relative paths are relative to it, and
        # their jobs start there (workflow.smk).
        "root": os.getcwd(),
        "python": sys.executable,
        "lanes": options.lanes,
        "started": driver_record.started,
        # On this machine, each stage's process stops when this one ends (kill -9 included:
        # :func:`_watch_engine`); a cluster job's node cannot see it.
        "engine_process": _this_process() if options.executor == "local" else None,
        "stages": [
            {
                "name": stage.name,
                "rule": _rule_name(stage.name),
                "title": stage.title,
                # Stages of an earlier phase have finished: their markers are plain inputs
                # (a name of no stage, ignored as the drivers always did, has none).
                "after": [
                    a for a in stage.after if a in names or os.path.exists(os.path.join(done, a))
                ],
                "kind": stage.kind,
                # A free lane takes the first ready stage in the driver's order.
                "priority": len(stages) - index,
            }
            for index, stage in enumerate(stages)
        ],
    }
    path = os.path.join(directory, "phase-%d.json" % phase)
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(plan, f, indent=2)
    os.replace(path + ".tmp", path)
    return path


def snakemake_command(plan_path, options, forced=(), targets=()):
    """The Snakemake command line that runs a plan (:obj:`forced`: the rules of stages that
    must run again although Snakemake's records say they are done; :obj:`targets`: the rules
    to run, with what they come after, instead of every rule)."""
    directory = os.path.dirname(plan_path)
    command = [sys.executable, "-m", "snakemake", "--snakefile", SNAKEFILE]
    config = ["plan=%s" % plan_path]
    if options.executor == "slurm":  # One --config: a second one replaces the first.
        config.append("gpus_per_training=%d" % options.gpus_per_training)
        config.append("cpus_per_training=%d" % options.cpus_per_training)
        config.append("mem_mb_per_training=%d" % options.mem_mb_per_training)
        config.append("minutes_per_training=%d" % options.minutes_per_training)
    command += ["--directory", directory, "--config"] + config
    # --nolock: the engine's own lock (lock_results) keeps other engines out.
    command += ["--rerun-incomplete", "--printshellcmds", "--show-failed-logs", "--nolock"]
    # The stamps decide what is due (run: --forcerun); Snakemake follows the markers' times.
    command += ["--rerun-triggers", "mtime"]
    if options.executor == "slurm":
        command += ["--executor", "slurm", "--jobs", str(options.jobs)]
        resources = []
        if options.slurm_partition:
            resources.append("slurm_partition=%s" % options.slurm_partition)
        if options.slurm_account:
            resources.append("slurm_account=%s" % options.slurm_account)
        if resources:
            command += ["--default-resources"] + resources
    else:
        command += ["--cores", str(options.lanes), "--resources", "lanes=%d" % options.lanes]
    if forced:
        command += ["--forcerun"] + list(forced)
    if options.dry_run:
        command += ["--dry-run"]
    if targets:
        command += ["--"] + list(targets)
    return command


def run(steps, stages, lanes, ahead=False):
    """Runs :obj:`stages` (one call of :meth:`Steps.run_stages`) through Snakemake; outside
    a driver (no command: a test, a notebook), in this process, one at a time.

    Args:
      steps: The driver's :class:`ldr_experiments.common.Steps`.
      stages: The stages, each after those it names among them (those of an earlier call
        have finished).
      lanes: How many may run side by side here (``None``: one at a time, with every core).
      ahead: In a dry run where some of these would run: whether the driver declares the
        stages after these without what these make (:func:`planning_ahead`), so that the dry
        run lists them too; otherwise it stops here and says so.

    Raises:
      StageFailed: when a stage fails (its log is named).
      StageDone: ``--only`` ran its stages, or a dry run cannot declare the later phases.
      UserError: another engine runs on the results directory; ``--only`` names no stage.
    """
    if _DRIVER is None:
        # Called as a library (a test, a notebook), not by a command: here, one at a time.
        _run_here(steps, stages)
        return
    record = _DRIVER
    options = dataclasses.replace(record.options, lanes=min(record.options.lanes, lanes or 1))
    lock_results(steps.out)  # Taken when the driver made its Steps; here for any other.
    record.phase += 1
    plan = write_plan(steps, stages, options, record.phase, record)
    if options.dag:
        write_dag(plan, options, options.dag, record.phase)
    forced, checks = [], []
    done = os.path.join(os.path.dirname(plan), "done")
    for stage in stages:
        reason = steps.due(stage)
        if os.path.exists(os.path.join(done, stage.name)):
            reason = reason or steps.lost_record(stage)  # Its marker alone: not known done.
            if reason:
                sys.stderr.write("[%s] %s: due again (%s)\n" % (steps.name, stage.title, reason))
                forced.append(_rule_name(stage.name))
        elif reason:  # Made before the engine (the drivers of run/): its job reruns it.
            sys.stderr.write("[%s] %s: reruns (%s)\n" % (steps.name, stage.title, reason))
        elif steps.made_before(stage):
            checks.append(_rule_name(stage.name))
            sys.stderr.write(
                "[%s] %s: done from the same inputs before the engine ran it: its job only"
                " checks\n" % (steps.name, stage.title)
            )
    names = {stage.name for stage in stages}
    targets = [_rule_name(name) for name in options.only if name in names]
    if options.only and not targets and any(stage.kind == TRAIN for stage in stages):
        # Not a prerequisite to run whole (a corpus): the names are not this plan's.
        raise UserError(
            "--only %s: no such stage among %s" % (" ".join(options.only), ", ".join(sorted(names)))
        )
    if targets:  # Forced or not, a stage the targets do not come after is not run.
        needed, queue = set(), [n for n in options.only if n in names]
        after = {stage.name: stage.after for stage in stages}
        while queue:
            name = queue.pop()
            if name in names and name not in needed:
                needed.add(name)
                queue.extend(after[name])
        forced = [rule for rule in forced if rule in {_rule_name(n) for n in needed}]
    pending = _call_snakemake(snakemake_command(plan, options, forced, targets), steps)
    if targets:
        steps.record_timings([stage for stage in stages if stage.name in options.only])
        sys.stderr.write(
            "[engine] --only: %s done; the later stages are not run\n"
            % (", ".join(n for n in options.only if n in names))
        )
        raise StageDone()
    if options.dry_run and pending - set(checks) and ahead:
        if not record.pending_ahead:
            sys.stderr.write(
                "[engine] dry run: the stages after these are declared from what is known"
                " before these run (the corpus's sizes are read once it is built)\n"
            )
        record.pending_ahead = True
    elif options.dry_run and pending - set(checks):
        sys.stderr.write(
            "[engine] dry run: the stages after these are declared from what these make; run"
            " without --dry-run, then ask again\n"
        )
        raise StageDone()
    if not options.dry_run:
        steps.record_timings(stages)


#: The lines of a stage's process (the drivers' ``[demo] ...`` log lines and the progress
#: lines they echo), not Snakemake's own (``[Fri Nov 27 08:01:52 2026]``, ``rule ...``).
_STAGE_RULE = re.compile(r"^\s*(?:local)?rule (stage_\w+):")
_STAGE_LINE = re.compile(r"^\s*\[(?![A-Z][a-z]{2} [A-Z][a-z]{2} )")


def lock_results(out):
    """Takes the lock of the results directory :obj:`out` for the command running in this
    process, held until the command ends (:func:`driver`): one command at a time on a results
    directory, a second one refused in one line, ``OUT is in use by pid N: COMMAND``, before
    it writes anything there but the directory's marker. It is the training lock of
    :mod:`ldr_opennmt.locks` (an ``fcntl.flock`` on ``OUT/.ldr-opennmt.lock``): the operating
    system releases it when the command ends, ``kill -9`` included, so no stale lock is ever
    left. Snakemake runs with ``--nolock`` (its own lock, under ``.snakemake/locks``, would
    outlive a ``kill -9`` and refuse every run after it): with this lock held, nothing else
    runs there. Nothing is taken in a stage's process (no driver runs there: its engine holds
    the lock) nor outside a command (a test, a notebook)."""
    if _DRIVER is None:
        return
    key = os.path.realpath(out)
    if key in _DRIVER.locks:
        return
    try:
        _DRIVER.locks[key] = locks.acquire(out)
    except UserError as e:
        if "another training uses" not in str(e):
            raise  # Not held by another process: the lock file cannot be opened.
        raise UserError(
            "%s is in use by %s: wait for it to end, or give another --out"
            % (out, _lock_holder(key))
        ) from None
    # The lock is free, but what an earlier command started may not have ended yet (its
    # stages stop within a second or so of its end: _watch_engine).
    running = still_running(out)
    if running:
        locks.release(_DRIVER.locks.pop(key))
        raise UserError(
            "%s: %d process(es) of an earlier run still run (%s%s): they stop within seconds of"
            " the end of the command that started them; run again then"
            % (out, len(running), running[0], ", ..." if len(running) > 1 else "")
        )


def _lock_holder(directory):
    """What the lock file of :obj:`directory` says about its holder (``pid N: COMMAND``)."""
    try:
        with open(os.path.join(directory, locks.LOCK_FILE), encoding="utf-8") as f:
            text = " ".join(f.read().split())
    except OSError:
        text = ""
    return text or "another process"


def _run_here(steps, stages):
    """Runs :obj:`stages` in this process, one at a time, each after those it names. Each is
    pickled first, as for its job (:func:`write_stages`), though the original runs here: a
    stage that could not be pickled for its job fails here too (the drivers' tests run their
    stages this way)."""
    names = {stage.name for stage in stages}
    pending, done = list(stages), set()
    while pending:
        ready = [s for s in pending if all(a in done or a not in names for a in s.after)]
        if not ready:
            raise ValueError("circular dependencies: %s" % [s.name for s in pending])
        _pickled(ready[0], ready[0])
        steps.run_stage(ready[0])
        done.add(ready[0].name)
        pending.remove(ready[0])
    steps.record_timings(stages)


#: The signals that stop the engine: it stops its stages first (:func:`_stop_tree`).
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)

#: Seconds the engine's stages have to end after SIGTERM, before SIGKILL.
STOP_GRACE_S = 20.0


def _stop_tree(pid, grace=STOP_GRACE_S, root_signal=signal.SIGINT):
    """Stops Snakemake (:obj:`pid`) and every process under it: its jobs' shells, the stages'
    processes, their ``ldr-main`` and ``ldr-eval``. Snakemake gets :obj:`root_signal`, SIGINT
    (it then cancels its jobs, ``scancel`` on SLURM; after SIGTERM it would wait for them to
    finish), the others SIGTERM; those alive after :obj:`grace` seconds get SIGKILL. The
    processes are looked up again until none is left: one started meanwhile, or whose parent
    ended first (it is then no longer under Snakemake), is stopped too. With
    :obj:`root_signal` ``None``, only the processes under :obj:`pid` are stopped (a stage's
    process stopping its own, :func:`_watch_engine`)."""
    import psutil  # A dependency of Snakemake.

    def alive(process):
        try:
            return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
        except psutil.Error:
            return False

    def signal_(process, signum):
        try:
            process.send_signal(signum)
        except psutil.Error:
            pass

    try:
        root = psutil.Process(pid)
    except psutil.Error:
        return
    seen, deadline = {root.pid: root}, time.monotonic() + grace
    if root_signal is not None:
        signal_(root, root_signal)
    while True:
        for process in list(seen.values()):
            try:
                children = process.children(recursive=True)
            except psutil.Error:
                continue
            for child in children:
                if child.pid not in seen:
                    seen[child.pid] = child
                    signal_(child, signal.SIGTERM)
        left = [
            process
            for process in seen.values()
            if alive(process) and (root_signal is not None or process is not root)
        ]
        if not left:
            return
        if time.monotonic() > deadline:
            for process in left:
                signal_(process, signal.SIGKILL)
            return
        time.sleep(0.2)


@contextlib.contextmanager
def _stopped_by_signals():
    """While the block runs, SIGTERM, SIGINT or SIGHUP to this process stops the process the
    block gives to what it yields (``watch(process)``: Snakemake) and everything under it
    (:func:`_stop_tree`, in a thread: the block goes on reading its output until it ends);
    then :class:`Interrupted` is raised. Without it, SIGTERM would end the engine alone and
    leave Snakemake and its stages running, unseen, writing into the results directory after
    its lock was released."""
    if threading.current_thread() is not threading.main_thread():
        yield lambda process: None  # Signals are the main thread's.
        return
    received, watched, stoppers = [], [], []

    def stop_watched():
        if received and watched and not stoppers:
            stoppers.append(threading.Thread(target=_stop_tree, args=(watched[0].pid,)))
            stoppers[0].start()

    def on_signal(signum, frame):
        received.append(signum)
        stop_watched()

    def watch(process):
        watched.append(process)
        stop_watched()  # A signal that came before.

    # Before Snakemake starts: no moment where a signal would end this process alone.
    previous = {signum: signal.signal(signum, on_signal) for signum in STOP_SIGNALS}
    try:
        yield watch
        for stopper in stoppers:
            stopper.join()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    if received:
        raise Interrupted(
            received[0],
            "stopped by %s: the stages that were running were stopped; run the same command"
            " again: what finished is kept, what was stopped runs again"
            % signal.Signals(received[0]).name,
        )


def _call_snakemake(command, steps):
    """Runs Snakemake with its output in ``OUT/workflow/snakemake.log`` and its summary lines
    (jobs, reasons, errors) on stderr; returns the stages it ran (or would run), by the
    names of their rules.

    Raises:
      StageFailed: a stage failed.
      Interrupted: a signal stopped the engine (:func:`_stopped_by_signals`).
    """
    log_path = os.path.join(os.path.abspath(steps.out), WORKFLOW_DIR, "snakemake.log")
    keep = ("rule ", "reason:", "Error", "error", "Would run", "Nothing to be done", "jobs")
    pending = set()
    with open(log_path, "a", encoding="utf-8") as log:
        log.write("$ %s\n" % " ".join(shlex.quote(a) for a in command))
        log.flush()
        # Snakemake's SLURM executor names the account after $USER, absent in some shells.
        env = dict(os.environ)
        env.setdefault("USER", getpass.getuser())
        with _stopped_by_signals() as watch:
            local = "--executor" not in command  # A cluster's jobs do not end with it.
            process = subprocess.Popen(
                command,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                env=env,
                preexec_fn=_die_with_parent(os.getpid()) if local else None,
            )
            watch(process)
            for line in process.stdout:
                log.write(line)
                match = _STAGE_RULE.match(line)
                if match:
                    pending.add(match.group(1))
                if _STAGE_LINE.match(line):
                    sys.stderr.write(line)
                elif any(k in line for k in keep):
                    sys.stderr.write("    [snakemake] %s\n" % line.rstrip())
            process.wait()
    if process.returncode != 0:
        raise StageFailed(
            "a stage failed (Snakemake exit %d): its log is named above; the engine's log: %s"
            " (run the same command again: what finished is kept)" % (process.returncode, log_path)
        )
    return pending


def write_dag(plan_path, options, path, phase):
    """Writes the plan's picture: Snakemake's DOT graph, rendered by Graphviz's ``dot`` when
    :obj:`path` ends in ``.png``, ``.svg`` or ``.pdf``. A driver with several phases writes
    one file per phase after the first (``dag-2.png``)."""
    if phase > 1:
        stem, ext = os.path.splitext(path)
        path = "%s-%d%s" % (stem, phase, ext)
    command = snakemake_command(plan_path, dataclasses.replace(options, dry_run=False))
    dot = subprocess.run(command + ["--dag"], capture_output=True, text=True)
    if dot.returncode != 0:
        raise RuntimeError("snakemake --dag failed: %s" % dot.stderr[-2000:])
    text = dot.stdout[dot.stdout.find("digraph") :]
    ext = os.path.splitext(path)[1].lstrip(".")
    if ext in ("png", "svg", "pdf"):
        try:
            subprocess.run(["dot", "-T" + ext, "-o", path], input=text, text=True, check=True)
        except FileNotFoundError:
            path = os.path.splitext(path)[0] + ".dot"
            sys.stderr.write("[engine] no Graphviz 'dot' here: the plan's graph is %s\n" % path)
            ext = "dot"
    if ext not in ("png", "svg", "pdf"):
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    sys.stderr.write("[engine] the plan's picture: %s\n" % path)


# A stage's process.


@contextlib.contextmanager
def _lane(plan_path, lanes):
    """The cores of a free lane of :obj:`lanes` (a lock file per lane beside the plan, held
    while the stage runs), or ``None`` (every core) with one lane or on a cluster node."""
    if lanes < 2 or os.environ.get("SLURM_JOB_ID") or not hasattr(os, "sched_getaffinity"):
        yield None
        return
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < lanes:
        yield None
        return
    size = len(cores) // lanes
    directory = os.path.join(os.path.dirname(plan_path), "lanes")
    os.makedirs(directory, exist_ok=True)
    for lane in range(lanes):
        handle = open(os.path.join(directory, "lane-%d.lock" % lane), "w")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            continue
        mine = cores[lane * size : (lane + 1) * size]
        os.sched_setaffinity(0, mine)  # This process too (a stage that works in-process).
        try:
            yield mine
        finally:
            handle.close()
        return
    yield None  # More jobs than lanes (another engine on this directory): share the cores.


#: Seconds between two looks of a stage's process at its engine (:func:`_watch_engine`).
WATCH_S = 0.5


def _this_process():
    """This process as :func:`_watch_engine` recognizes it: its id and start time (an id alone
    may be reused by another process)."""
    import psutil  # A dependency of Snakemake.

    return {"pid": os.getpid(), "created": psutil.Process().create_time()}


def _process_gone(process):
    """Whether the process :obj:`process` (of :func:`_this_process`) has ended."""
    import psutil

    try:
        return psutil.Process(process["pid"]).create_time() != process["created"]
    except psutil.Error:
        return True


def _watch_engine(process):
    """In a stage's process: stops the stage (its processes, then itself) once the engine
    that started it has ended, whatever ended it (``kill -9`` included, which no handler
    sees): a stage never keeps writing into a results directory whose command is gone
    (issue 71). Snakemake itself ends with the engine (:func:`_die_with_parent`)."""
    if not process:
        return

    def _watch():
        while not _process_gone(process):
            time.sleep(WATCH_S)
        try:  # Into the stage's log; Snakemake, which read it, may have ended first.
            sys.stderr.write(
                "[engine] the command that started this stage (pid %d) has ended: the stage"
                " stops\n" % process["pid"]
            )
            sys.stderr.flush()
        except (OSError, ValueError):
            pass
        _stop_tree(os.getpid(), root_signal=None)
        os._exit(128 + signal.SIGTERM)  # pylint: disable=protected-access

    threading.Thread(target=_watch, name="engine-watch", daemon=True).start()


def _die_with_parent(parent):
    """For ``Popen(preexec_fn=...)``: the child gets SIGKILL when its parent (the engine) ends
    (Linux's ``PR_SET_PDEATHSIG``), so that Snakemake never outlives it, hanging on the pipe
    nobody reads; elsewhere, nothing."""

    def _set():
        try:
            import ctypes  # pylint: disable=import-outside-toplevel

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            return
        if os.getppid() != parent:  # The parent ended before the call.
            os._exit(1)  # pylint: disable=protected-access

    return _set


#: What names a process of the experiments in its command line: Snakemake, a stage's job.
OURS = ("snakemake", "ldr_experiments.engine")


def still_running(out):
    """The processes but this one whose command line names :obj:`out`'s workflow and is one
    of the experiments' (:data:`OURS`: Snakemake, the stages' jobs and their shells):
    ``["pid N: COMMAND", ...]``."""
    import psutil

    workflow = os.path.join(os.path.realpath(out), WORKFLOW_DIR)
    found = []
    for process in psutil.process_iter(["pid", "cmdline"]):
        cmdline = process.info.get("cmdline") or []
        if process.info["pid"] == os.getpid() or not any(workflow in arg for arg in cmdline):
            continue
        if not any(mark in arg for arg in cmdline for mark in OURS):
            continue  # A user's own (tail -f OUT/workflow/snakemake.log).
        found.append("pid %d: %s" % (process.info["pid"], " ".join(cmdline)[:120]))
    return found


def run_stage(plan_path, name):
    """Runs the stage :obj:`name` of a plan, as its engine declared it (:func:`load_stage`),
    in a free lane, then writes its marker: what a Snakemake job of the plan does. It starts
    in the plan's ``root`` (the rule's shell changes there), where the stage's relative paths
    lead."""
    global _STARTED
    with open(plan_path, encoding="utf-8") as f:
        plan = json.load(f)
    if plan.get("format") != 2:
        raise UserError("%s: a plan of an earlier version: rerun the command" % plan_path)
    _watch_engine(plan.get("engine_process"))
    steps, stage = load_stage(plan_path, name)
    _STARTED = plan.get("started")
    try:
        with _lane(plan_path, plan.get("lanes", 1)) as cores:
            steps.run_stage(stage, cores)
    finally:
        _STARTED = None
    _mark_done(plan_path, name)
    return 0


def _mark_done(plan_path, name):
    """Writes the marker Snakemake waits for (in a stage's process, once it has run)."""
    path = os.path.join(os.path.dirname(plan_path), "done", name)
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        f.write("%s\n" % time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()))
    os.replace(path + ".tmp", path)


def main(argv=None):
    """``python -m ldr_experiments.engine stage PLAN NAME``: one stage of a plan."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if len(argv) != 3 or argv[0] != "stage":
        sys.stderr.write("usage: python -m ldr_experiments.engine stage PLAN NAME\n")
        return 2
    from ldr_opennmt import errors

    return errors.run_main("ldr-experiments stage", run_stage, argv[1], argv[2])


if __name__ == "__main__":
    # The module the stages import, not this __main__ copy: its _STARTED is what they read.
    from ldr_experiments import engine as _engine

    sys.exit(_engine.main())
