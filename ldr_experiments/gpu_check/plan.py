"""The GPU check's settings (modes, sizes, the rows' roles) and the plan of a run: which
family trains in which mode, for how many steps."""

import sys

from ldr_experiments.benchmarks import rows as bench_rows

PROG = "run/gpu_check.sh"

FP32 = "fp32"
MIXED = "mixed"
MIXED_XLA = "mixed_xla"
MODES = (FP32, MIXED, MIXED_XLA)
MODE_NAMES = {FP32: "float32", MIXED: "mixed precision", MIXED_XLA: "mixed precision + XLA"}
#: ``onmt-main --mixed_precision``'s policy on a GPU (opennmt.utils.misc).
GPU_POLICY = "mixed_float16"

VANILLA = bench_rows.VANILLA
#: The architecture the benchmark builds at its size; the others' rows carry theirs.
TRANSFORMER = "transformer"
#: The builder argument that puts LDR embeddings on the target side too: a family of the
#: benchmark whose builder takes it gets a row with it (:func:`check_rows`).
TARGET_SIDE = "target_ldr"
#: The family of the translation check (its SavedModel with labels, its fold into
#: CTranslate2): LDR, the method of the issues' CTranslate2 targets.
TRANSLATE_FAMILY = "ldr_transformer"
#: The domain trained alone in the second phase of the bit-identity check.
PRESENT_DOMAIN = "d0"

PAPER = dict(layers=6, units=512, heads=8, vocab=32000, length=24, batch=128)
DEFAULTS = dict(PAPER, steps=300, timing_steps=100, warmup=20, frozen_steps=20)
QUICK = dict(bench_rows.QUICK, steps=6, timing_steps=3, warmup=2, frozen_steps=2, batch=16)
RNN_SIZE = dict(embedding_size=512, hidden_size=1024)
QUICK_RNN_SIZE = dict(embedding_size=64, hidden_size=64)

_log_prefix = "[gpu_check]"


def log(message):
    sys.stderr.write("%s %s\n" % (_log_prefix, message))
    sys.stderr.flush()


def long_mode(config, system):
    """The mode of a family's long run (``--steps`` steps, loss checked): mixed precision +
    XLA, else mixed precision, else its last mode; ``None`` if it trains in none of the
    run's modes (``--modes mixed_xla`` for a family that refuses XLA)."""
    modes = [mode for mode in config["modes"] if (mode, system) in _trained(config)]
    for mode in (MIXED_XLA, MIXED):
        if mode in modes:
            return mode
    return modes[-1] if modes else None


def _trained(config):
    """``[(mode, system)]`` of a run's training tasks, XLA left out for the rows whose
    model refuses it (``config["no_xla"]``)."""
    return [
        (mode, system)
        for mode in config["modes"]
        for system in config["systems"]
        if not (mode == MIXED_XLA and system in config["no_xla"])
    ]


def steps_of(config, mode, system):
    """Timed steps of one family in one mode: ``--steps`` for its long run, else
    ``--timing_steps``."""
    return config["steps"] if mode == long_mode(config, system) else config["timing_steps"]


def tasks_of(config):
    """The training tasks (``train:MODE:SYSTEM``), XLA left out for the rows whose model
    refuses it (``config["no_xla"]``)."""
    return ["train:%s:%s" % task for task in _trained(config)]


def check_tasks(config, frozen=True, translate=True):
    """Every task of a run, in order: :func:`tasks_of`; with :obj:`frozen`, the bit-identity
    check of each row of ``config["frozen_systems"]``, run on the model of its mixed
    precision + XLA long run (``train:mixed_xla:SYSTEM:frozen``: one training, one process),
    else, without such a run (``--modes``), in a task of its own (``frozen:SYSTEM``); with
    :obj:`translate`, the translation check last."""
    tasks = tasks_of(config)
    for system in config["frozen_systems"] if frozen else []:
        shared = "train:%s:%s" % (MIXED_XLA, system)
        if shared in tasks and long_mode(config, system) == MIXED_XLA:
            tasks[tasks.index(shared)] = shared + ":frozen"
        else:
            tasks.append("frozen:%s" % system)
    return tasks + (["translate"] if translate else [])


def row_titles(config):
    """``{row name: title}`` of a run's rows."""
    return {row.name: row.title for row in bench_rows.config_rows(config)}
