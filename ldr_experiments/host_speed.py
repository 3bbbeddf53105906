"""This host's speed in one figure: training steps per second of the demo's Mixed.

Hosts of one kind differ several-fold in speed (the demo's Mixed trained at 12.75 steps/s on
one 2-core host and at 2.35 on another, same code and batch). A time measured on one host (the
test suite's, the demo's) means something on another only beside this figure: the suite
prints it with its time (``run/test.sh``), and the demo predicts its own duration from it
before it trains (:func:`demo_minutes`).

What is timed is what the demo's lanes run: the demo's Mixed (``model_defs/small/
mixed_transformer_tied.py``: 2 + 2 layers, 64 units) with one TensorFlow thread, one lane per
core, every lane at once (:func:`lanes`), on batches of about the demo's size (40 sentences of
24 target tokens: the demo's 1024-token batches held 973 target tokens on average) over
vocabularies of the demo's size, held in memory; the figure is the lanes' mean of their median
step after a warm-up (OpenNMT-tf's training step, through the benchmark's
:func:`~ldr_experiments.benchmarks.measure.measure_training`). It takes about 25 s.

The demo itself trains somewhat slower than this figure (its text pipeline, padding,
summaries and checkpoints run in the same lanes): measured on one host on 2026-12-07, this
calibration gave 8.1 steps/s and the demo's Mixed 6.7 in its logs (both lanes busy, the
machine otherwise quiet), a ratio of :data:`DEMO_PER_CALIBRATION`. The demo's record
(:data:`DEMO_RECORD`) trained its Mixed at 12.75 steps/s and took 15.2 minutes: on another
host, the demo takes about ``15.2 * 12.75 / (0.83 * figure)`` minutes (:func:`demo_minutes`).

``python -m ldr_experiments.host_speed`` prints one line; ``--json`` the figure alone.
"""

import argparse
import json
import os
import sys
import tempfile
import time

#: The demo's record: the host it timed, the demo's Mixed speed there, the demo's minutes.
DEMO_RECORD = "docs/records/demo-2026-11-29"
DEMO_MIXED_STEPS_PER_S = 12.75
DEMO_MINUTES = 15.2
#: The demo's Mixed steps per second over this calibration's, on one host (2026-12-07: 6.7
#: in the demo's logs, 8.1 here).
DEMO_PER_CALIBRATION = 0.83
#: The size of the calibration's batches and vocabularies (the demo's, rounded).
BATCH = 40
LENGTH = 24
VOCAB = 8000
WARMUP = 10
STEPS = 40


def _config(workdir, steps=STEPS, batch=BATCH, length=LENGTH, vocab=VOCAB):
    from ldr_experiments.benchmarks import measure
    from ldr_experiments.benchmarks.rows import DOMAINS

    os.makedirs(os.path.join(workdir, "data"))
    paths = measure.write_data(
        os.path.join(workdir, "data"), vocab, 16 * batch, length, seed=1, block=batch
    )
    return {
        "seed": 1,
        "paths": paths,
        "batch": batch,
        "warmup": min(WARMUP, steps),
        "steps": steps,
        "workdir": workdir,
        "data_sentences": 16 * batch,
        "domains": DOMAINS,
    }


def measure(core=0, steps=STEPS, batch=BATCH, length=LENGTH, vocab=VOCAB):
    """Times the demo's Mixed on one core; returns its steps per second (on batches of
    :obj:`batch` sentences of :obj:`length` tokens over vocabularies of :obj:`vocab` words: the
    calibration's by default, other sizes for :mod:`ldr_experiments.levers`).

    Confines this process to core :obj:`core` (of those it may use) and TensorFlow to one
    thread, as a demo lane: call it in a process of its own (:func:`measure_lanes`).
    """
    if hasattr(os, "sched_setaffinity"):
        cores = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(0, [cores[core % len(cores)]])
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    from ldr_experiments.benchmarks import measure as bench
    from ldr_experiments.benchmarks.rows import DOMAINS, Row
    from ldr_opennmt import registry

    row = Row(name="mixed", title="Mixed", family="mixed_transformer", domains=DOMAINS)

    def build(system, config):
        return registry.preset("mixed_transformer", "small", "tied")()

    with tempfile.TemporaryDirectory(prefix="ldr-host-speed-") as workdir:
        config = _config(workdir, steps, batch, length, vocab)
        result = bench.measure_training(config, row, build=build)
    return 1000.0 / result["ms_per_step"]


def lanes():
    """The demo's lanes on this machine: two, or one on a single core."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return 2 if (cores or 1) >= 2 else 1


def measure_lanes(count=None, steps=STEPS, batch=BATCH, length=LENGTH, vocab=VOCAB):
    """:func:`measure` in :obj:`count` processes at once (default :func:`lanes`), each on a
    core of its own, as the demo's lanes train side by side (both cores busy: the figure
    includes what two trainings cost each other, as the demo's logs do).

    Returns:
      The lanes' mean steps per second, or ``None`` when a measurement failed.
    """
    import subprocess

    count = count or lanes()
    command = [sys.executable, "-m", "ldr_experiments.host_speed", "--json"]
    command += ["--steps", str(steps), "--batch", str(batch), "--length", str(length)]
    command += ["--vocab", str(vocab), "--core"]
    processes = [
        subprocess.Popen(command + [str(core)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for core in range(count)
    ]
    figures = []
    for process in processes:
        try:
            output, _ = process.communicate(timeout=600)
            if process.returncode == 0:
                figures.append(json.loads(output.decode().strip().splitlines()[-1])["steps_per_s"])
        except (subprocess.SubprocessError, ValueError, KeyError, IndexError):
            process.kill()
    if len(figures) != count:
        return None
    return sum(figures) / count


def demo_steps_per_s(steps_per_s):
    """The demo's Mixed speed this calibration figure predicts (steps per second)."""
    return DEMO_PER_CALIBRATION * steps_per_s


def demo_minutes(steps_per_s):
    """The default demo's expected minutes on a host of calibration figure :obj:`steps_per_s`
    (its record's minutes scaled by the demo's speed there over the predicted one here: the
    demo is its trainings, one per lane)."""
    return DEMO_MINUTES * DEMO_MIXED_STEPS_PER_S / demo_steps_per_s(steps_per_s)


def describe(steps_per_s):
    """One line: the figure, and the demo's speed it predicts beside the record's."""
    return (
        "host speed: %.2f steps/s (the demo's Mixed, one lane per core, batches in memory;"
        " the demo itself would train it at about %.1f steps/s here, %.2f on the host of %s)"
        % (steps_per_s, demo_steps_per_s(steps_per_s), DEMO_MIXED_STEPS_PER_S, DEMO_RECORD)
    )


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m ldr_experiments.host_speed", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--json", action="store_true", help="Print the figure as JSON.")
    parser.add_argument(
        "--steps", type=int, default=STEPS, help="Timed steps per lane (default %(default)s)."
    )
    for name, default, what in (
        ("--batch", BATCH, "sentences per batch"),
        ("--length", LENGTH, "tokens per sentence"),
        ("--vocab", VOCAB, "words per vocabulary"),
    ):
        parser.add_argument(
            name, type=int, default=default, help="%s (default %%(default)s)." % what.capitalize()
        )
    parser.add_argument(
        "--core",
        type=int,
        default=None,
        help="Measure one lane on this core, in this process (default: every lane at once).",
    )
    args = parser.parse_args(argv)
    for name in ("steps", "batch", "length", "vocab"):
        if getattr(args, name) < 1:
            parser.error("--%s: at least 1, got %d" % (name, getattr(args, name)))
    start = time.monotonic()
    sizes = dict(batch=args.batch, length=args.length, vocab=args.vocab)
    if args.core is not None:
        steps_per_s = measure(args.core, args.steps, **sizes)
    else:
        steps_per_s = measure_lanes(steps=args.steps, **sizes)
        if steps_per_s is None:
            print("host speed: the measurement failed", file=sys.stderr)
            return 1
    if args.json:
        print(json.dumps({"steps_per_s": round(steps_per_s, 3)}))
    else:
        print("%s [%.0f s]" % (describe(steps_per_s), time.monotonic() - start))
    return 0


if __name__ == "__main__":
    sys.exit(main())
