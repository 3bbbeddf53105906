"""A tiny driver for the engine's tests (tests/experiments/test_engine.py): three stages that
write small files, run by Snakemake like the demo's.

    a: writes a.txt (``--value``), after nothing
    b: writes b.txt from a.txt, after a
    c: writes c.txt, after nothing (beside a, on the other lane)

Each stage appends its name, its process's cores and working directory to ``runs.log``, and
each run of ``main`` its process's id to ``mains.log`` (the driver runs in the engine's
process only, never again inside a stage's job); ``--fail-once STAGE``
makes that stage fail the first time it runs (a flag file), as a run killed half-way;
``--slow STAGE`` makes it wait two minutes (to be killed; its process's id in
``started-STAGE``); ``--together A C`` makes those stages wait (a minute at most) until each
has started, so that they run side by side however loaded the machine is. ``--ahead`` runs
a alone first, then b and c (two phases, as the demo's corpus and then the rest), declaring
the second in a dry run before the first has run.
"""

import argparse
import os
import time

from ldr_experiments import common, engine
from ldr_opennmt import stamps


def _write(path, text):
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def stages(steps, args):
    out = steps.out
    runs = os.path.join(out, "runs.log")

    def stage(name, after, make, stamp):
        def run(cores):
            with open(runs, "a", encoding="utf-8") as f:
                f.write(
                    "%s %s %s started=%r cwd=%s\n"
                    % (name, cores, sorted(os.sched_getaffinity(0)), engine.started(), os.getcwd())
                )
            if name in args.together:
                _write(os.path.join(out, "together-" + name), "")
                deadline = time.monotonic() + 60
                while time.monotonic() < deadline and not all(
                    os.path.exists(os.path.join(out, "together-" + other))
                    for other in args.together
                ):
                    time.sleep(0.1)
            if args.slow == name:
                _write(os.path.join(out, "started-" + name), "%d\n" % os.getpid())
                time.sleep(120)  # Killed meanwhile (test_engine's KillTest).
            flag = os.path.join(out, "failed-" + name)
            if args.fail_once == name and not os.path.exists(flag):
                _write(flag, "")
                raise RuntimeError("stage %s killed" % name)
            _write(os.path.join(out, name + ".txt"), make())

        return common.Stage(
            name,
            "make " + name,
            "1/1",
            stamp,
            [os.path.join(out, name + ".txt")],
            run,
            after=after,
            kind=engine.TRAIN if name == "a" else engine.LOCAL,
        )

    def read(name):
        with open(os.path.join(out, name + ".txt"), encoding="utf-8") as f:
            return f.read()

    return [
        stage("a", [], lambda: "a=%s\n" % args.value, lambda: stamps.make_stamp(v=args.value)),
        stage(
            "b",
            ["a"],
            lambda: read("a").upper(),
            lambda: stamps.make_stamp(a=stamps.file_digest(os.path.join(out, "a.txt"))),
        ),
        stage("c", [], lambda: "c\n", lambda: stamps.make_stamp(c=1)),
    ]


@engine.driver("engine-test")
def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--value", default="1")
    parser.add_argument("--fail-once")
    parser.add_argument("--slow")
    parser.add_argument("--ahead", action="store_true")
    parser.add_argument("--together", nargs="+", default=[])
    args = parser.parse_args(argv)
    steps = common.Steps(args.out, name="engine-test")
    with open(os.path.join(steps.out, "mains.log"), "a", encoding="utf-8") as f:
        f.write("%d\n" % os.getpid())
    if args.ahead:
        first, *rest = stages(steps, args)
        steps.run_stages([first], ahead=True)
        steps.run_stages(rest, lanes=2)
    else:
        steps.run_stages(stages(steps, args), lanes=2)
    with open(os.path.join(steps.out, "timings.txt"), "w", encoding="utf-8") as f:
        f.write("".join("%s\n" % title for title, _ in steps.timings))
    return 0
