"""Shared steps of the experiment drivers: run a command with progress, write
configurations, and declare stages (:class:`Stage`) that the workflow engine runs
(:mod:`ldr_experiments.engine`) and that are skipped while their stamp
(:mod:`ldr_opennmt.stamps`) matches: a training, a translation, a score.

A driver works where it is started: its results, the default corpus (``data/default``) and
every relative path it writes are under the working directory (``run/*.sh`` start from the
repository's root). The model definitions and data configurations it names
(``model_defs/small/ldr_transformer.py``, ``data_configs/default_corpora.yml``) are found by
:func:`resource`: in the working directory, else in the checkout the package runs from
(:data:`ROOT`), else in the copies an installed package carries (:data:`PACKAGED`)."""

import functools
import os
import re
import shlex
import shutil
import subprocess
import sys
import time

import yaml

from ldr_experiments import engine
from ldr_opennmt import config_loader, stamps
from ldr_opennmt.data import corpus as corpus_lib
from ldr_opennmt.errors import UserError
from ldr_opennmt.utils import (
    DEFAULT_CACHE,
    atomic_output,
    check_writable,
    make_directories,
    open_for_append,
    resolve_output_root,
    write_lines_atomic,
)

# The checkout the package runs from (an editable install): this file is
# <root>/ldr_experiments/common.py. An installed package's has no model_defs/ there.
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: The copies of ``model_defs/`` and ``data_configs/`` that an installed package carries
#: (setup.py's ``build_py`` copies its ``RESOURCE_DIRS`` into the package it builds).
PACKAGED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "resources")


def resource(path):
    """A model definition or data configuration named as in the repository
    (``model_defs/small/ldr_transformer.py``, ``data_configs/default.yml``), as a path the
    commands open from the working directory.

    The path itself when it exists from the working directory (a checkout's root, where
    ``run/*.sh`` run: the commands and reports read as before) or names no file anywhere
    (the command that opens it says so); else the checkout's file (:data:`ROOT`); else the
    installed package's copy (:data:`PACKAGED`). A user's path (``--config my.yml``) is
    resolved from the working directory as any path given on the command line.
    """
    if os.path.isabs(path) or os.path.exists(path):
        return path
    for base in (ROOT, PACKAGED):
        candidate = os.path.join(base, path)
        if os.path.exists(candidate):
            return candidate
    return path


# Batches mix domains (data: domain_batches: false) with P(domain) ~ |C_i|^alpha
# (train: domain_sampling_alpha). With one domain per batch (Procedure 1's sampling,
# the default of data_configs/default_corpora.yml) these 64-unit models trained
# markedly worse at this budget: Mixed reached a loss of 5.11 at step 1000 instead of
# 4.42 and translated every medical sentence alike (BLEU avg 0.2 instead of 8.0 at
# 1500 steps). The option stays one line away for experiments at the paper's scale.
# MIXED_BATCHES is a fragment of the data section (train_config's ``data``):
# OpenNMT-tf deep-merges the run configuration's ``data`` into that of the data
# configuration file given before it on the command line.
MIXED_BATCHES = {"domain_batches": False}


def log(message):
    """Prints a progress line on stderr."""
    print(message, file=sys.stderr, flush=True)


def command_line(args):
    """The shell form of a command."""
    return " ".join(shlex.quote(a) for a in args)


def run_streaming(
    args, log_path, keep=("Step =", "Restored", "Saved checkpoint", "error"), cores=None, tag=None
):
    """Runs a command, writing its whole output to a log and echoing progress lines.

    Args:
      args: The command.
      log_path: Its log file (appended to).
      keep: The output lines echoed on stderr (those containing one of these).
      cores: Optional CPU cores the command is confined to (its TensorFlow thread pools
        sized to them); ``None``: all of this process's cores.
      tag: Optional prefix of the echoed lines (which job they come from).
    """
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONWARNINGS="ignore")
    confine = None
    if cores is not None:
        cores = sorted(cores)
        env["TF_NUM_INTRAOP_THREADS"] = str(len(cores))
        env["TF_NUM_INTEROP_THREADS"] = str(min(len(cores), 2))
        confine = functools.partial(os.sched_setaffinity, 0, cores)

    prefix = "    " + ("[%s] " % tag if tag else "")
    # Line-buffered (tail -f works); never appended to through a planted link.
    with open_for_append(log_path) as log_file:
        log_file.write("$ %s\n" % command_line(args))
        process = subprocess.Popen(
            args,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            preexec_fn=confine,
        )
        last = []
        for line in process.stdout:
            log_file.write(line)
            last = (last + [line.rstrip()])[-5:]
            if any(k in line for k in keep):
                log(prefix + line.rstrip().split("] ", 1)[-1])
        process.wait()
    if process.returncode != 0:
        raise RuntimeError(
            "command failed (%d): %s\n%s\nfull log: %s"
            % (process.returncode, command_line(args), "\n".join(last), log_path)
        )


_STEP_LOG = re.compile(
    r"Step = \d+ ; steps/s = ([\d.]+), tokens/s = \d+ \(\d+ source, (\d+) target\)"
)


def training_speed(log_path):
    """The mean (steps/s, target tokens/s) of the step logs of the last training command
    in a log file (``None`` when it has none: e.g. a training skipped as done)."""
    if not os.path.exists(log_path):
        return None
    with open(log_path) as f:
        text = f.read()
    last = text.rsplit("\n$ ", 1)[-1]  # run_streaming writes "$ command" before each run.
    # The first report after a restore covers no timed interval (steps/s = 0.00).
    found = [(float(a), float(b)) for a, b in _STEP_LOG.findall(last) if float(a) > 0]
    if not found:
        return None
    return tuple(sum(values) / len(found) for values in zip(*found))


def write_config(config, path):
    """Writes a YAML configuration (atomically: a link at :obj:`path` is replaced, never
    written through) and returns its path."""
    with atomic_output(path) as tmp:
        with open(tmp, "w") as f:
            yaml.safe_dump(config, f, sort_keys=False)
    return path


#: Written first into a results directory a driver creates (or finds empty): marks it as
#: the drivers', so that a later run may resume there.
OWNER_FILE = ".ldr-experiment"


def results_directory(out):
    """Creates or checks a driver's results directory; returns it.

    A new or empty directory is marked with :data:`OWNER_FILE`; an existing one is
    written into only if a driver made it (the marker, or the ``configs`` and ``logs``
    directories of a run before the marker existed): a driver never overwrites the
    files of a directory it did not make. A symbolic link given as the directory is
    resolved once, with a message.

    Raises:
      UserError: ``OUT: not empty and not made by an experiment driver (...)``.
    """
    root = resolve_output_root(out, "results directory", log=lambda m: log("[results] " + m))
    if root != os.path.abspath(out):
        out = root
    check_writable(root, "--out")  # One line, not the traceback of makedirs or of the lock.
    if os.path.isdir(root):
        names = set(os.listdir(root))
        if names and OWNER_FILE not in names and not {"configs", "logs"} <= names:
            raise UserError(
                "%s: not empty and not made by an experiment driver (no %s in it): refused,"
                " so that nothing in it is overwritten; give a new or empty --out"
                % (out, OWNER_FILE)
            )
    else:
        try:
            os.makedirs(root)
        except FileExistsError:
            return results_directory(out)
    if not os.path.lexists(os.path.join(root, OWNER_FILE)):
        write_lines_atomic(
            os.path.join(root, OWNER_FILE), ["Written by the experiment drivers (run/)."]
        )
    return out


#: The directory of the stages' stamp files in a results directory.
STAGES_DIR = "stages"


class Stage:
    """A step of an experiment declared with what it depends on and what it writes.

    A stage is skipped while its stamp file (``OUT/stages/NAME.json``, see
    :mod:`ldr_opennmt.stamps`) records the stamp its inputs have now and its outputs are all
    there; otherwise it runs, and the log says why: no stamp, what differs, what is missing.
    When the stamp differs, what the stage owns (:attr:`owns`) is removed first (it was made
    from other inputs); when it is the same but an output is missing (a run killed
    half-way), the stage runs again on what is there (a training resumes from its last
    checkpoint).

    Args:
      name: A unique name: its :class:`Job`'s, its stamp file's, what :obj:`after` names.
      title: What it does, in the log and the report's time table (``"train Mixed"``).
      progress: The prefix of its log line (``"2/6"``).
      stamp: A callable returning its stamp (:func:`ldr_opennmt.stamps.make_stamp`), called
        when the stage is due: after the stages it comes after.
      outputs: The files it writes: all there (and the stamp the same), it is skipped.
      run: A callable taking the CPU cores it may use (a list, or ``None``: all).
      after: Names of the stages that must finish first (in the same :meth:`Steps.run_stages`;
        stages of an earlier call have finished).
      owns: Files and directories under the results directory that only this stage writes:
        removed before it runs on other inputs. Default: :obj:`outputs`.
      stamp_path: Its stamp file, when :obj:`run` writes it itself (the corpus's ``DONE``);
        default ``OUT/stages/NAME.json``, written before the run (``complete: false``) and
        after it (with its time and cores).
      log_path: A training log, whose steps/s the time table shows.
      timed: Whether it has a row in the time table.
      label: What its log line names after :obj:`progress` (default: :obj:`title`).
      kind: :data:`ldr_experiments.engine.TRAIN` (a training: a cluster job with its GPUs),
        :data:`~ldr_experiments.engine.EVALUATE` (translations: a cluster job) or
        :data:`~ldr_experiments.engine.LOCAL` (runs where the engine runs); the code it depends
        on (:func:`ldr_experiments.engine.stage_code`) follows from it.
    """

    def __init__(
        self,
        name,
        title,
        progress,
        stamp,
        outputs,
        run,
        after=(),
        owns=None,
        stamp_path=None,
        log_path=None,
        timed=True,
        label=None,
        kind=engine.LOCAL,
    ):
        self.name = name
        self.title = title
        self.progress = progress
        self.stamp = stamp
        self.outputs = list(outputs)
        self.run = run
        self.after = tuple(after)
        self.owns = list(self.outputs if owns is None else owns)
        self.stamp_path = stamp_path
        self.log_path = log_path
        self.timed = timed
        self.label = label or title
        self.kind = kind


def data_files(config):
    """The files a run configuration's ``data`` section names (corpora, vocabularies, label
    files), in order, each once: what a training reads."""
    found = []

    def _walk(value):
        if isinstance(value, dict):
            for item in value.values():
                _walk(item)
        elif isinstance(value, (list, tuple)):
            for item in value:
                _walk(item)
        elif isinstance(value, str) and os.path.isfile(value) and value not in found:
            found.append(value)

    _walk((config or {}).get("data"))
    return found


_LATEST = re.compile(r'^model_checkpoint_path: "(?:.*/)?ckpt-(\d+)"\s*$', re.MULTILINE)


def latest_step(model_dir):
    """The step of the checkpoint that ``model_dir/checkpoint`` names (TensorFlow's record of
    the latest complete checkpoint, what a training resumes from), or ``None``.

    A checkpoint's files are not enough: TensorFlow writes ``ckpt-N_temp/``, moves its files
    to ``ckpt-N.*``, and only then names ``ckpt-N`` in ``checkpoint``; a training killed in
    between leaves a ``ckpt-N.index`` that ``checkpoint`` does not name, and the next run
    resumes from the one it names (read without TensorFlow: the engine's process loads none).
    """
    try:
        with open(os.path.join(model_dir, "checkpoint"), encoding="utf-8") as f:
            match = _LATEST.search(f.read())
    except (OSError, UnicodeDecodeError):
        return None
    return int(match.group(1)) if match else None


def checkpoint_digest(path):
    """The SHA-256 of a checkpoint's files (:func:`ldr_opennmt.stamps.checkpoint_digest`):
    :obj:`path` is a checkpoint prefix, or a model directory (its latest checkpoint).

    Raises:
      UserError: when the directory has no checkpoint.
    """
    import tensorflow as tf  # Here: a stage's process that reads no checkpoint loads none.

    prefix = tf.train.latest_checkpoint(path) if os.path.isdir(path) else path
    if prefix is None:
        raise UserError("%s: no checkpoint" % path)
    return stamps.checkpoint_digest(prefix)


def training_stamp(model_def, config_paths, options=()):
    """What a training depends on: the model definition's bytes, the merged run
    configuration, the bytes of the data files it names, the checkpoint a ``finetune:
    base`` starts from, and the command's options (``--seed 1``)."""
    config = config_loader.load_run_config(config_paths)
    base = (config.get("finetune") or {}).get("base")
    return stamps.make_stamp(
        model_definition=stamps.file_digest(model_def),
        config=config,
        data=stamps.files_digest(data_files(config)),
        base=checkpoint_digest(base) if base else None,
        options=list(options),
    )


class Steps:
    """Runs the stages of an experiment, recording commands and timings for a report."""

    def __init__(self, out, name="demo", options=()):
        """Creates ``out`` (see :func:`results_directory`) and its ``configs``, ``logs``
        and ``stages`` directories, never through a link (``runs`` is made by training).
        Paths are relative to the working directory. :obj:`options` go
        to every training command before ``train`` (e.g. ``--mixed_precision``)."""
        self.name = name
        self.options = list(options)
        self.out = out = results_directory(out)
        # One command at a time here (refused in one line), before anything else is written.
        engine.lock_results(out)
        self.runs_dir, self.configs_dir, self.logs_dir, self.stages_dir = (
            os.path.join(out, d) for d in ("runs", "configs", "logs", STAGES_DIR)
        )
        for directory in (self.configs_dir, self.logs_dir, self.stages_dir):
            make_directories(directory, os.path.abspath(out))
        self.commands = []
        self.timings = []
        # Training speed of each trained system: title -> (steps/s, target tokens/s).
        self.speeds = {}
        # The cores each timed step ran on (absent or None: all of them).
        self.cores = {}
        self.ldr_main = os.path.join(os.path.dirname(sys.executable), "ldr-main")

    def train(
        self, title, slug, model_def, config_paths, model_dir, final_step, progress, options=()
    ):
        """Trains a system now, with all cores, unless its stage is done (see
        :meth:`train_stage`)."""
        stage = self.train_stage(
            title, slug, model_def, config_paths, model_dir, final_step, progress, options
        )
        self.run_stages([stage])

    def train_stage(
        self,
        title,
        slug,
        model_def,
        config_paths,
        model_dir,
        final_step,
        progress,
        options=(),
        after=(),
        train_options=(),
    ):
        """The :class:`Stage` named :obj:`slug` that trains a system with ``ldr-main``
        (:obj:`options` before ``train``, :obj:`train_options` after it: ``--with_eval``).

        Its stamp is :func:`training_stamp`; its output the checkpoint of
        :obj:`final_step`; it owns ``model_dir`` (removed when the stamp differs). A
        training killed half-way continues from its last checkpoint (the one
        ``model_dir/checkpoint`` names, :func:`latest_step`; a ``ckpt-N.index`` it does not
        name was left by a run killed while it wrote it); a model directory trained before
        stamps existed, with the final checkpoint, is kept (adopted). Its log is
        ``logs/<slug>.train.log``; its time and training speed go to the report as ``train
        <title>``.
        """
        model_def = resource(model_def)  # Configurations: resolved where they are parsed.
        command = ["ldr-main", "--model", model_def, "--config", *config_paths]
        command += ["--auto_config"] + self.options + list(options) + ["train"]
        command += list(train_options)
        self.commands.append(("Train %s" % title, command))
        final = os.path.join(model_dir, "ckpt-%d.index" % final_step)
        log_path = os.path.join(self.logs_dir, "%s.train.log" % slug)
        # "train (1/3) LDR", not "train (1/3) train LDR".
        label = title if "train" in progress.split() else "train %s" % title

        def run(cores):
            # Its checkpoint file names the final checkpoint (latest_step): not only its files.
            if (latest_step(model_dir) or 0) >= final_step and os.path.exists(final):
                log("[%s] %s %s: already trained (%s)" % (self.name, progress, label, final))
                return
            run_streaming([self.ldr_main] + command[1:], log_path, cores=cores, tag=slug)

        return Stage(
            slug,
            "train %s" % title,
            progress,
            functools.partial(
                training_stamp,
                model_def,
                config_paths,
                self.options + list(options) + list(train_options),
            ),
            [final],
            run,
            after=after,
            owns=[model_dir],
            log_path=log_path,
            label=label,
            kind=engine.TRAIN,
        )

    def run_command(self, name, command, cores=None):
        """Runs an installed command (``ldr-main``, ``ldr-eval``, ...) of this environment,
        its output in ``logs/<name>.log`` and its progress lines on stderr."""
        path = os.path.join(os.path.dirname(sys.executable), command[0])
        log_path = os.path.join(self.logs_dir, "%s.log" % name)
        run_streaming([path] + command[1:], log_path, cores=cores, tag=name)

    def run_stages(self, stages, lanes=None, ahead=False):
        """Runs :obj:`stages` through the workflow engine (:func:`ldr_experiments.engine.run`:
        up to :obj:`lanes` side by side on this machine, or one cluster job each), each after
        the stages it names among them, each skipped while its stamp matches.

        Args:
          stages: The :class:`Stage` list.
          lanes: How many may run side by side (``None``: one at a time).
          ahead: Whether a dry run goes on to the stages after these before these have run
            (the driver declares them without what these make: see
            :func:`ldr_experiments.engine.planning_ahead`).
        """
        engine.run(self, stages, lanes, ahead=ahead)

    def _stamp_path(self, stage):
        return stage.stamp_path or os.path.join(self.stages_dir, stage.name + ".json")

    def lost_record(self, stage):
        """Why :obj:`stage`, which ran before (its marker says so), must run again for want of
        its stage record (its stamp file is gone), or ``None``: with no record, whether its
        outputs are from the same inputs is unknown, and running it again checks them (a
        training resumes from its last checkpoint, or says it is trained)."""
        path = self._stamp_path(stage)
        if os.path.exists(path):
            return None
        return (
            "its stage record %s is missing: it runs again to check its outputs (a training"
            " resumes from its last checkpoint)" % path
        )

    def stage_stamp(self, stage):
        """The stamp :obj:`stage` has now; its own stamp file also records the code it runs
        (:func:`ldr_experiments.engine.stage_code`): a changed statement there reruns it."""
        stamp = stage.stamp()
        if stage.stamp_path is None:
            stamp = dict(stamp, code=engine.stage_code(stage.kind))
        return stamp

    def due(self, stage):
        """Why :obj:`stage` must run again although it ran before (its stamp differs, an
        output is missing, its run did not finish), or ``None``: done from the same inputs,
        never run, or not known yet (its inputs are made by a stage that runs first)."""
        path = self._stamp_path(stage)
        if not os.path.exists(path):
            return None
        try:
            stamp = self.stage_stamp(stage)
        except (OSError, UserError, ValueError):
            return None
        decision = stamps.reusable(stage.outputs, path, stamp)
        return None if decision else decision.reason

    def made_before(self, stage):
        """Whether :obj:`stage` has a stamp file that says its run finished."""
        record = stamps.read(self._stamp_path(stage))
        return bool(record) and record.get("complete") is not False

    def run_stage(self, stage, cores=None):
        """Runs one stage here, now, unless its stamp matches (see :class:`Stage`): what the
        engine's job of a stage does."""
        own_stamp = stage.stamp_path is None
        stamp_path = self._stamp_path(stage)
        prefix = "[%s] %s %s" % (self.name, stage.progress, stage.label)
        t0 = time.time()
        stamp = self.stage_stamp(stage)
        decision = stamps.reusable(stage.outputs, stamp_path, stamp)
        if decision:
            log("%s: skipped, done from the same inputs (%s)" % (prefix, stamp_path))
            return
        # A record that cannot be read says nothing of the outputs' inputs: they are kept (a
        # finished training is never deleted for it) and the stage runs on what is there.
        unknown = decision.record is not None and not isinstance(
            decision.record.get(stamps.INPUTS), dict
        )
        if unknown:
            log(
                "%s: runs (its stage record %s cannot be read: its outputs are kept and checked"
                " by running it again; a training resumes from its last checkpoint)"
                % (prefix, stamp_path)
            )
        else:
            log("%s: runs (%s)" % (prefix, decision.reason))
        if decision.stale and not unknown:
            for path in stage.owns:
                self._remove(path)
        if own_stamp:
            stamps.write(stamp_path, stamp, complete=False)
        stage.run(cores)
        if own_stamp:
            seconds = time.time() - t0
            stamps.write(
                stamp_path, stamp, complete=True, seconds=seconds, cores=cores, finished=time.time()
            )

    def record_timings(self, stages):
        """Adds the times of :obj:`stages` (run or found done) to the report's time table, read
        from their stamp files: ``(earlier run)`` after the title of one that finished before
        this driver started, and the training speed of each training (its log)."""
        started = engine.started()
        for stage in stages:
            if not stage.timed:
                continue
            record = stamps.read(self._stamp_path(stage)) or {}
            title = stage.title
            if record.get("seconds") is None:
                seconds, cores = 0.0, None
            else:
                seconds, cores = record["seconds"], record.get("cores")
                finished = record.get("finished")
                if started is not None and (finished is None or finished < started):
                    title += " (earlier run)"
            self.timings.append((title, seconds))
            self.cores[title] = cores
            speed = training_speed(stage.log_path) if stage.log_path else None
            if speed is not None:
                self.speeds[title] = speed

    def _remove(self, path):
        """Removes a stage's file or directory made from other inputs (under the results
        directory only; a link is removed, never followed)."""
        root = os.path.realpath(self.out)
        parent = os.path.realpath(os.path.dirname(os.path.abspath(path)))
        if parent != root and not parent.startswith(root + os.sep):
            raise UserError("%s: not under the results directory %s" % (path, self.out))
        if not os.path.lexists(path):
            return
        log("[%s] removing %s (made from other inputs)" % (self.name, path))
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        else:
            os.remove(path)

    def timing_lines(self, total):
        """The timings as a markdown table, with the total (seconds) in the last row, the
        cores each step ran on (steps side by side on their own cores overlap in time) and
        the training speed (OpenNMT-tf's step logs, averaged) of each training."""
        lines = [
            "| step | cores | minutes | steps/s | target tokens/s |",
            "|---|---|---:|---:|---:|",
        ]
        for name, seconds in self.timings:
            speed = self.speeds.get(name)
            cells = ("%.2f" % speed[0], "%.0f" % speed[1]) if speed else ("", "")
            cores = self.cores.get(name)
            cores = "all" if cores is None else ",".join(str(c) for c in cores)
            lines.append("| %s | %s | %.1f | %s | %s |" % ((name, cores, seconds / 60) + cells))
        return lines + ["| total | all | %.1f | | |" % (total / 60)]

    def write_report(self, lines, tables, total):
        """Writes ``out/report.md`` (atomically): :obj:`lines`, the timings and the
        commands; prints :obj:`tables`."""
        lines = lines + [""] + self.timing_lines(total) + ["", "Commands:", ""]
        lines += ["- %s: `%s`" % (title, command_line(c)) for title, c in self.commands]
        path = os.path.join(self.out, "report.md")
        write_lines_atomic(path, lines)
        print(tables)
        log("[%s] report: %s (total %.1f min)" % (self.name, path, total / 60))


#: The default corpus, under the working directory (its first stage builds it).
DEFAULT_CORPUS = "data/default"


def corpus_argument(value):
    """The corpus directory of ``--corpus`` (``--data``): ``None`` is the default corpus
    (:data:`DEFAULT_CORPUS`, relative to the working directory as every path of the drivers);
    a given directory must hold a corpus ``ldr-data build`` made (files, OPUS or default)."""
    if value is None:
        return DEFAULT_CORPUS
    path = os.path.abspath(value)
    if path == os.path.abspath(DEFAULT_CORPUS):
        return DEFAULT_CORPUS
    return path


def corpus_info(data_dir):
    """The ``corpus.json`` of :obj:`data_dir`; in a dry run before the default corpus is built
    (:func:`ldr_experiments.engine.planning_ahead`), what is known of it beforehand: its
    domains and languages, no sizes (``"planned": True``; the budgets that depend on sizes are
    set once it is built).

    Raises:
      UserError: on a corpus that is not built (outside such a dry run), or of one domain.
    """
    built = os.path.exists(os.path.join(data_dir, "corpus.json"))
    if not built and data_dir == DEFAULT_CORPUS and engine.planning_ahead():
        return {
            "planned": True,
            "domains": list(corpus_lib.DEFAULT_DOMAINS),
            "source_lang": "en",
            "target_lang": "fr",
            "stats": {},
        }
    info = corpus_lib.load_info(data_dir)
    if len(info["domains"]) < 2:
        # Its domain classifier, wrong labels, contrastive test and FT_<domain> rows would
        # say nothing (issue 71): refused before anything is trained.
        raise UserError(
            "--corpus %s: one domain (%s): the demo and the tables compare multi-domain systems"
            " (a domain classifier, wrong labels, the contrastive test, per-domain FT), which"
            " need two or more; for one domain, train with ldr-main and score with ldr-eval"
            % (data_dir, ", ".join(info["domains"]))
        )
    return info


def user_path(value):
    """A path the user gave (``--out``, ``--config``), made absolute; ``None`` stays ``None``
    (the driver's default, relative to the working directory)."""
    return None if value is None else os.path.abspath(value)


def corpus_data_section(data_dir, info):
    """The ``data`` entries of a corpus built by ``ldr-data`` (its ``corpus.json``:
    :obj:`info`): per-domain training and dev corpora and the vocabularies, with the
    corpus's domains and languages."""
    source, target = info["source_lang"], info["target_lang"]

    def corpora(split):
        return {
            domain: [
                os.path.join(data_dir, "%s.%s.%s" % (split, domain, lang))
                for lang in (source, target)
            ]
            for domain in info["domains"]
        }

    return {
        "train_corpora": corpora("train"),
        "eval_corpora": corpora("dev"),
        "source_vocabulary": os.path.join(data_dir, "vocab.%s" % source),
        "target_vocabulary": os.path.join(data_dir, "vocab.%s" % target),
    }


def prepare_corpus(data_dir, cache):
    """Builds the default corpus when :obj:`data_dir` is ``data/default``; otherwise
    checks that a corpus was built there (``ldr-data build ...``)."""
    if data_dir == DEFAULT_CORPUS:
        return corpus_lib.build_default(data_dir, cache, log=log)
    return corpus_lib.load_info(data_dir)  # Fails clearly on a corpus not built.


def load_yaml(path):
    """Reads a YAML file (a data configuration: found by :func:`resource`)."""
    return config_loader.load_config_file(resource(path))


def curriculum_configs(slug, budget, runs_dir, model_dim=64):
    """The Factorized curriculum's two run configurations: (stage 1, stage 2).

    Stage 1 (``<slug>_stage1``) trains the shared parameters and general copies on
    every sentence as generic for ``budget["steps"]``; stage 2 (``<slug>``) restores
    it, unfolds (every domain block := its general copy) and trains the domain blocks
    alone for ``budget["stage2_steps"]``, the rest frozen (``domain_training:
    domains``, the unfold default). Batches mix domains (:data:`MIXED_BATCHES`).
    """
    stage1 = train_config(
        slug + "_stage1", {"domain_training": "general"}, {}, budget, runs_dir, data=MIXED_BATCHES
    )
    stage1["params"]["decay_params"]["model_dim"] = model_dim
    steps = budget["stage2_steps"]
    # Stage 2 keeps stage 1's schedule (its step count continues from stage 1's).
    params = {k: v for k, v in stage1["params"].items() if k != "domain_training"}
    stage2 = {
        "model_dir": os.path.join(runs_dir, slug),
        "data": dict(MIXED_BATCHES),
        "finetune": {"base": stage1["model_dir"], "steps": steps, "unfold": True},
        "params": params,
        "train": {"save_summary_steps": max(steps // 4, 1), "save_checkpoints_steps": steps},
    }
    return stage1, stage2


def train_curriculum(steps, name, slug, model_def, data_config, budget, progress, model_dim=64):
    """Trains one Factorized system through both stages (each skipped when done).

    Args:
      steps: The driver's :class:`Steps`.
      name: The system's row name.
      slug: Its directory name (stage 1 in ``<slug>_stage1``).
      model_def: Its model definition file.
      data_config: The data configuration file.
      budget: The driver's budget (``steps``, ``stage2_steps``, ...).
      progress: The progress prefix of the log lines.
      model_dim: The model size (the learning-rate schedule's ``model_dim``).

    Returns:
      The configuration files of the final (stage 2) model.
    """
    stage1, stage2 = curriculum_configs(slug, budget, steps.runs_dir, model_dim=model_dim)
    paths = [
        write_config(config, os.path.join(steps.configs_dir, "%s_%s.yml" % (slug, stage)))
        for stage, config in (("stage1", stage1), ("stage2", stage2))
    ]
    steps.train(
        "%s stage 1 (domain-agnostic, %d steps)" % (name, budget["steps"]),
        slug + "_stage1",
        model_def,
        [data_config, paths[0]],
        stage1["model_dir"],
        budget["steps"],
        progress,
    )
    steps.train(
        "%s stage 2 (unfold, domain blocks, %d steps)" % (name, budget["stage2_steps"]),
        slug,
        model_def,
        [data_config, paths[1]],
        stage2["model_dir"],
        budget["steps"] + budget["stage2_steps"],
        progress,
    )
    return [data_config, paths[1]]


def train_config(slug, params, train, budget, runs_dir, data=None):
    """The run configuration of a small system: Noam schedule scaled to 64 units, the
    budget's steps, warmup and decoding length.

    Args:
      slug: The system's directory name under :obj:`runs_dir`.
      params: ``params`` options added to the defaults.
      train: ``train`` options added to the defaults.
      budget: The driver's budget (steps, warmup, log steps, decoding length; optional
        ``alpha``, ``max_length`` and ``batch_size``: the training sampling, length cap
        and batch size in tokens, default the data configuration's).
      runs_dir: The directory of the model directories.
      data: ``data`` options (e.g. :data:`MIXED_BATCHES`) merged over those of the
        data configuration file; no ``data`` section when ``None``.
    """
    config = {"model_dir": os.path.join(runs_dir, slug)}
    if data is not None:
        config["data"] = dict(data)
    config["params"] = dict(
        {
            "learning_rate": 1.0,
            "decay_params": {
                "model_dim": budget.get("model_dim", 64),
                "warmup_steps": budget["warmup"],
            },
            "maximum_decoding_length": budget["max_decoding_length"],
        },
        **params,
    )
    defaults = {
        "max_step": budget["steps"],
        "save_summary_steps": budget["log_steps"],
        "save_checkpoints_steps": max(budget["steps"] // 4, 1),
    }
    # The recipe's optional keys: P(domain) ~ |C_i|^alpha and the training length cap.
    if "alpha" in budget:
        defaults["domain_sampling_alpha"] = budget["alpha"]
    if "max_length" in budget:
        defaults["maximum_features_length"] = budget["max_length"]
        defaults["maximum_labels_length"] = budget["max_length"]
    if "batch_size" in budget:
        defaults["batch_size"] = budget["batch_size"]
    config["train"] = dict(defaults, **train)
    return config


def add_experiment_arguments(parser, name, sizes):
    """Adds the options every experiment driver shares (size, budget, corpus, output,
    OpenNMT-tf options) to an ``argparse`` parser.

    Args:
      parser: The driver's ``argparse.ArgumentParser``.
      name: The experiment's name (its default results directory).
      sizes: The model sizes the driver knows (``--size`` choices; ``small`` is the default).
    """
    parser.add_argument("--size", choices=sorted(sizes), default="small")
    parser.add_argument("--quick", action="store_true", help="tiny budgets (a smoke run)")
    parser.add_argument("--config", default="data_configs/default_corpora.yml", type=resource)
    parser.add_argument("--data", default="data/default", help="corpus directory (ldr-data)")
    parser.add_argument("--out", help="results directory (default results/%s[-quick])" % name)
    parser.add_argument("--cache", default=DEFAULT_CACHE)
    parser.add_argument(
        "--onmt-options",
        default="",
        help="comma-separated options given to every training command before `train` "
        "(e.g. --mixed_precision,--jit_compile on a GPU)",
    )


def experiment_budget(args, budgets, **overrides):
    """``(mode, budget)`` of parsed :func:`add_experiment_arguments`: the ``quick`` or
    ``full`` budget of :obj:`budgets`, with the step options given on the command line
    (:obj:`overrides`: budget key -> option value, ``None`` when not given)."""
    mode = "quick" if args.quick else "full"
    budget = dict(budgets[mode])
    budget.update((key, value) for key, value in overrides.items() if value)
    return mode, budget


def experiment_output(args, name):
    """``(results directory, OpenNMT-tf options)`` of parsed :func:`add_experiment_arguments`."""
    out = args.out or ("results/%s-quick" % name if args.quick else "results/%s" % name)
    return out, [option for option in args.onmt_options.split(",") if option]


#: The checkpoint key of a decoder output layer of its own (untied from the target embeddings).
_OUTPUT_KERNEL = "model/decoder/output_layer/kernel/"


def output_layer_tied(checkpoint):
    """Whether a trained model's decoder output layer is its target embedding table (no
    output kernel of its own in the checkpoint)."""
    import tensorflow as tf

    return not any(
        name.startswith(_OUTPUT_KERNEL) for name, _ in tf.train.list_variables(checkpoint)
    )


def output_layers(plan):
    """``{row: whether its output layer is tied}`` of the trained rows (:func:`output_layer_tied`
    on their latest checkpoints; rows without one are left out)."""
    import tensorflow as tf

    tied = {}
    for trained in plan.trained:
        checkpoint = tf.train.latest_checkpoint(trained.model_dir)
        if checkpoint:
            tied[trained.name] = output_layer_tied(checkpoint)
    return tied
