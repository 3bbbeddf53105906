"""The workflow engine (ldr_experiments/engine.py) runs a driver's stages through Snakemake:
lanes, skip when done, rerun on a changed input or code, resume after a crash, dry run, picture.

One toy driver (tests/experiments/engine_driver.py) with three stages; every run is a real
Snakemake run whose jobs are real processes (about 10-25 s each here).
"""

import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest
from contextlib import redirect_stderr
from unittest import mock

from ldr_experiments import engine
from ldr_opennmt.errors import UserError
from tests.experiments import engine_driver


def _lines(path):
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        return f.read().splitlines()


class EngineRunTest(unittest.TestCase):
    """One results directory taken through the engine's cases in order (each a Snakemake run)."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="engine-")
        self.addCleanup(shutil.rmtree, self.dir, ignore_errors=True)
        self.out = os.path.join(self.dir, "out")

    def _main(self, *args):
        stderr = io.StringIO()
        with redirect_stderr(stderr):
            status = engine_driver.main(["--out", self.out] + list(args))
        return status, stderr.getvalue()

    def _runs(self):
        return [line.split()[0] for line in _lines(os.path.join(self.out, "runs.log"))]

    def test_one_results_directory_through_every_case(self):
        # One test: each case starts from the results directory the one before left (run
        # apart, a case would test another state than the one it names).
        self._step_1_runs_then_skips_then_reruns_what_changed()
        self._step_2_a_crash_resumes_where_it_stopped()
        self._step_3_changed_code_makes_every_stage_due()
        self._step_4_only_some_stages()
        self._step_5_the_picture_of_the_plan()
        self._step_6_a_lost_or_unreadable_stage_record()

    def _step_1_runs_then_skips_then_reruns_what_changed(self):
        # a and c wait for each other: side by side even on a loaded machine (else a could end
        # before c starts, and c take a's lane).
        status, log = self._main("--together", "a", "c")
        self.assertEqual(status, 0)
        self.assertCountEqual(self._runs(), ["a", "b", "c"])
        self.assertEqual(self._runs()[-1], "b")  # After a.
        self.assertEqual(_lines(os.path.join(self.out, "b.txt")), ["A=1"])
        self.assertIn("reason: Missing output files: done/a", log)
        self.assertIn("[engine-test] 1/1 make a: runs (no stamp", log)
        for name in "abc":
            record = json.load(open(os.path.join(self.out, "stages", name + ".json")))
            self.assertTrue(record["complete"])
            self.assertIn("code", record["inputs"])  # The code it ran is part of its stamp.
        # The two lanes: a and c side by side, each on its own core(s).
        lanes = {line.split()[0]: line for line in _lines(os.path.join(self.out, "runs.log"))}
        if len(os.sched_getaffinity(0)) >= 2:
            cores = {k: v.split(" started=")[0].split(" ", 1)[1] for k, v in lanes.items()}
            self.assertNotEqual(cores["a"], cores["c"])
        # Every stage's process knows when the command started (a report's total time).
        starts = {line.split("started=")[1].split(" cwd=")[0] for line in lanes.values()}
        self.assertEqual(len(starts), 1, starts)
        self.assertNotEqual(starts, {"None"})
        # Each stage ran in its own job, in the driver's working directory, and the driver
        # ran once, here (a job loads its stage; it does not run the driver again).
        self.assertEqual({v.split(" cwd=")[1] for v in lanes.values()}, {os.getcwd()})
        self.assertEqual(_lines(os.path.join(self.out, "mains.log")), [str(os.getpid())])
        with open(os.path.join(self.out, "workflow", "phase-1.json"), encoding="utf-8") as f:
            self.assertEqual(json.load(f)["root"], os.getcwd())
        for name in "abc":
            self.assertTrue(
                os.path.isfile(os.path.join(self.out, "workflow", "stages", name + ".pickle"))
            )
        # The time table of the report: every stage, none from an earlier run.
        self.assertEqual(
            _lines(os.path.join(self.out, "timings.txt")), ["make a", "make b", "make c"]
        )

        # Nothing changed: nothing runs, the times are those of the earlier run.
        status, log = self._main()
        self.assertEqual(status, 0)
        self.assertEqual(len(self._runs()), 3)
        self.assertIn("Nothing to be done", log)
        self.assertEqual(
            _lines(os.path.join(self.out, "timings.txt")),
            ["make a (earlier run)", "make b (earlier run)", "make c (earlier run)"],
        )

        # A dry run after a changed input lists what would run and why, and runs nothing.
        status, log = self._main("--value", "2", "--dry-run")
        self.assertEqual(status, 0)
        self.assertEqual(len(self._runs()), 3)
        self.assertIn("[engine-test] make a: due again (v: ", log)
        self.assertIn("reason: Forced execution", log)
        self.assertIn("rule stage_b:", log)  # After a.
        self.assertNotIn("rule stage_c:", log)

        # The changed input: a reruns, then b (it comes after a); c is skipped.
        status, log = self._main("--value", "2")
        self.assertEqual(status, 0)
        self.assertEqual(self._runs()[3:], ["a", "b"])
        self.assertIn("make a: runs (v: ", log)
        self.assertEqual(_lines(os.path.join(self.out, "b.txt")), ["A=2"])

    def _step_2_a_crash_resumes_where_it_stopped(self):
        before = len(self._runs())
        with self.assertRaisesRegex(RuntimeError, "a stage failed"):
            self._main("--value", "3", "--fail-once", "a")
        self.assertFalse(json.load(open(os.path.join(self.out, "stages", "a.json")))["complete"])
        status, log = self._main("--value", "3", "--fail-once", "a")
        self.assertEqual(status, 0)
        self.assertIn("make a: runs (the run that wrote them did not finish)", log)
        self.assertEqual(self._runs()[before:], ["a", "a", "b"])

    def _step_3_changed_code_makes_every_stage_due(self):
        before = len(self._runs())
        with mock.patch.object(engine, "stage_code", return_value="other code"):
            status, log = self._main("--value", "3", "--dry-run")
        self.assertEqual(status, 0)
        for name in "abc":
            self.assertIn("[engine-test] make %s: due again (code differs)" % name, log)
        self.assertEqual(len(self._runs()), before)

    def _step_4_only_some_stages(self):
        before = len(self._runs())
        status, log = self._main("--value", "4", "--only", "c")
        self.assertEqual(status, 0)
        self.assertEqual(self._runs()[before:], [])  # c is done: a and b are not run.
        status, log = self._main("--value", "4", "--only", "a")
        self.assertEqual(self._runs()[before:], ["a"])
        self.assertIn("[engine] --only: a done", log)
        with self.assertRaisesRegex(UserError, "--only nope: no such stage among a, b, c"):
            self._main("--only", "nope")

    def _step_5_the_picture_of_the_plan(self):
        path = os.path.join(self.dir, "plan.dot")
        status, _ = self._main("--value", "4", "--dry-run", "--dag", path)
        self.assertEqual(status, 0)
        with open(path) as f:
            text = f.read()
        self.assertIn("digraph", text)
        for name in ("stage_a", "stage_b", "stage_c"):
            self.assertIn(name, text)

    def _step_6_a_lost_or_unreadable_stage_record(self):
        # Round six (issue 71, item 4): with its record deleted, a stage whose marker was there
        # was never run again ("Nothing to be done"); with a record that could not be read,
        # its outputs were deleted as made from other inputs (a finished training among them).
        status, _ = self._main("--value", "4")
        self.assertEqual(status, 0)
        before = len(self._runs())
        record = os.path.join(self.out, "stages", "c.json")
        os.remove(record)
        status, log = self._main("--value", "4")
        self.assertEqual(status, 0)
        self.assertEqual(self._runs()[before:], ["c"])
        self.assertIn("make c: due again (its stage record %s is missing" % record, log)
        with open(os.path.join(self.out, "stages", "a.json"), "w", encoding="utf-8") as f:
            f.write("{not json")
        status, log = self._main("--value", "4")
        self.assertEqual(status, 0)
        self.assertEqual(self._runs()[before + 1 :], ["a"])  # b: a.txt is the same.
        self.assertIn(
            "make a: runs (its stage record %s cannot be read: its outputs are kept"
            % (os.path.join(self.out, "stages", "a.json")),
            log,
        )
        self.assertNotIn("made from other inputs", log)


ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

#: The toy driver as a command: a stopped run's one line and exit status, as ldr-experiments.
DRIVER_COMMAND = """import sys
from ldr_experiments import engine
from tests.experiments import engine_driver
try:
    sys.exit(engine_driver.main(sys.argv[1:]))
except engine.StageFailed as e:
    sys.stderr.write("engine-test: error: %s\\n" % e)
    sys.exit(e.status)
"""


def _start_driver(*args, stderr=subprocess.DEVNULL):
    return subprocess.Popen(
        [sys.executable, "-c", DRIVER_COMMAND] + list(args),
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=stderr,
        text=True,
        start_new_session=True,
    )


def _wait_for_stage(test, out, name):
    """The process id of the stage :obj:`name` once it runs (the driver's ``--slow``)."""
    path = os.path.join(out, "started-" + name)
    deadline = time.time() + 120
    while not os.path.exists(path) or not _lines(path):
        test.assertLess(time.time(), deadline, "stage %s never started" % name)
        time.sleep(0.5)
    return int(_lines(path)[0])


def _processes_on(out):
    """The processes whose command line names :obj:`out` (Snakemake, the stages)."""
    import psutil

    found = []
    for process in psutil.process_iter(["cmdline"]):
        if any(out in part for part in process.info["cmdline"] or ()):
            found.append(process)
    return found


def _ended(pid):
    """Whether the process :obj:`pid` ended (gone, or a zombie its new parent did not reap)."""
    import psutil

    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _assert_resumes(test, out):
    """The same command again on :obj:`out` ends well, running again the stage a kill cut."""
    stderr = io.StringIO()
    with redirect_stderr(stderr):
        test.assertEqual(engine_driver.main(["--out", out]), 0)
    test.assertIn("make a: reruns (the run that wrote them did not finish)", stderr.getvalue())


class KillTest(unittest.TestCase):
    """kill -9 of the whole command (engine, Snakemake, the stage's process), then the same
    command: it resumes, and a second engine on the same directory is refused meanwhile."""

    def test_kill_then_resume(self):
        directory = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, directory)
        out = os.path.join(directory, "out")
        process = _start_driver("--out", out, "--slow", "a")
        try:
            _wait_for_stage(self, out, "a")
            plan = os.path.join(out, "workflow", "phase-1.json")
            with open(plan, "rb") as f:
                before = f.read()
            # Another engine on the same directory meanwhile (another --value, so that its
            # plan would differ): one line naming the first, nothing written.
            with self.assertRaises(UserError) as refused:
                with redirect_stderr(io.StringIO()):
                    engine_driver.main(["--out", out, "--value", "9"])
            self.assertRegex(
                str(refused.exception),
                r"^%s is in use by pid %d: -c --out %s --slow a: wait for it to end, or"
                r" give another --out$" % (re.escape(out), process.pid, re.escape(out)),
            )
            with open(plan, "rb") as f:
                self.assertEqual(f.read(), before)
        finally:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        # No lock of Snakemake's left to refuse the next run (it runs with --nolock).
        self.assertEqual(os.listdir(os.path.join(out, "workflow", ".snakemake", "locks")), [])
        _assert_resumes(self, out)
        self.assertEqual(_lines(os.path.join(out, "b.txt")), ["A=1"])


class OrphanTest(unittest.TestCase):
    """kill -9 of the engine alone (no handler sees it): what it started ends with it, and a
    rerun says what still runs meanwhile (round six, issue 71, item 6: Snakemake and the
    stages ran on, the lock was free, and the orphaned Snakemake hung on its dead pipe)."""

    def test_kill_9_of_the_engine_alone_ends_what_it_started(self):
        import psutil

        directory = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, directory)
        out = os.path.join(directory, "out")
        process = _start_driver("--out", out, "--slow", "a")
        try:
            stage = _wait_for_stage(self, out, "a")
            started = [p.pid for p in psutil.Process(process.pid).children(recursive=True)]
            self.assertIn(stage, started)
            os.kill(process.pid, signal.SIGKILL)
            process.wait()
            deadline = time.time() + 60
            while not all(_ended(pid) for pid in started) and time.time() < deadline:
                time.sleep(0.2)
            self.assertEqual([pid for pid in started if not _ended(pid)], [])
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
            for pid in _processes_on(out):
                pid.kill()
        self.assertEqual(engine.still_running(out), [])
        _assert_resumes(self, out)

    def test_a_rerun_names_what_still_runs(self):
        directory = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, directory)
        out = os.path.join(directory, "out")
        plan = os.path.join(out, "workflow", "phase-1.json")
        # A stage's job of an earlier run that has not stopped yet (its command line).
        left = subprocess.Popen(
            [sys.executable, "-c", "import time; time.sleep(60)", "ldr_experiments.engine"]
            + ["stage", plan, "a"]
        )
        # A user's own process that names the folder is not one of them.
        tail = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", plan])
        self.addCleanup(tail.wait)
        self.addCleanup(tail.kill)
        self.addCleanup(left.wait)
        self.addCleanup(left.kill)
        with self.assertRaisesRegex(
            UserError,
            r"^%s: 1 process\(es\) of an earlier run still run \(pid %d: .*ldr_experiments\.engine"
            r" stage .*\): they stop within seconds" % (re.escape(out), left.pid),
        ):
            with redirect_stderr(io.StringIO()):
                engine_driver.main(["--out", out])
        self.assertFalse(os.path.exists(os.path.join(out, "runs.log")))  # Nothing ran.


class SigtermTest(unittest.TestCase):
    """SIGTERM to the engine alone (``kill PID``, as a batch system or a careless user sends
    it): its stages are stopped with it, nothing keeps running unseen, and the same command
    resumes."""

    def test_sigterm_stops_the_stages_then_the_same_command_resumes(self):
        directory = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, directory)
        out = os.path.join(directory, "out")
        process = _start_driver("--out", out, "--slow", "a", stderr=subprocess.PIPE)
        try:
            stage = _wait_for_stage(self, out, "a")
            os.kill(process.pid, signal.SIGTERM)
            _, stderr = process.communicate(timeout=60)
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        self.assertEqual(process.returncode, 128 + signal.SIGTERM, stderr[-2000:])
        self.assertEqual(
            stderr.splitlines()[-1],
            "engine-test: error: stopped by SIGTERM: the stages that were running were stopped;"
            " run the same command again: what finished is kept, what was stopped runs again",
        )
        # Snakemake and the stages ended with the engine (SIGTERM alone ended the engine only).
        deadline = time.time() + 10
        while _processes_on(out) and time.time() < deadline:
            time.sleep(0.2)
        self.assertEqual(_processes_on(out), [])
        self.assertTrue(_ended(stage))
        self.assertFalse(os.path.exists(os.path.join(out, "a.txt")))
        self.assertFalse(os.path.exists(os.path.join(out, "workflow", "done", "a")))
        _assert_resumes(self, out)
        self.assertEqual(_lines(os.path.join(out, "b.txt")), ["A=1"])


class ConcurrentCommandTest(unittest.TestCase):
    """A second ``ldr-experiments`` on a results directory in use: one line, nothing written."""

    def test_a_second_command_is_refused_in_one_line(self):
        directory = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, directory)
        out = os.path.join(directory, "demo-quick")
        os.makedirs(out)
        with open(os.path.join(out, ".ldr-experiment"), "w") as f:
            f.write("Written by the experiment drivers (run/).\n")
        # The first command, as ldr-experiments demo names itself in the lock (engine.lock_results).
        holder = subprocess.Popen(
            [
                sys.executable,
                "-c",
                "import sys; sys.argv = ['ldr-experiments', 'demo', '--quick']\n"
                "from ldr_opennmt import locks\n"
                "locks.acquire(%r); print('held', flush=True); sys.stdin.read()" % out,
            ],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.addCleanup(holder.wait)
        self.addCleanup(holder.stdin.close)
        self.assertEqual(holder.stdout.readline(), "held\n")
        before = sorted(os.listdir(out))
        second = subprocess.run(
            [sys.executable, "-m", "ldr_experiments.cli", "demo", "--quick", "--out", out],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=300,
        )
        self.assertEqual(second.returncode, 2, second.stderr[-2000:])
        self.assertEqual(
            second.stderr.splitlines(),
            [
                "ldr-experiments demo: error: %s is in use by pid %d: ldr-experiments demo"
                " --quick: wait for it to end, or give another --out" % (out, holder.pid)
            ],
        )
        self.assertEqual(sorted(os.listdir(out)), before)  # Nothing written.


class DryRunTest(unittest.TestCase):
    """A dry run stops after the first phase with work to do, naming what is already done."""

    def test_a_directory_of_the_former_drivers(self):
        directory = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, directory)
        out = os.path.join(directory, "out")
        with redirect_stderr(io.StringIO()):
            engine_driver.main(["--out", out])
        # As the drivers of run/ left it: stamps without the code, no engine records.
        shutil.rmtree(os.path.join(out, "workflow"))
        for name in "abc":
            path = os.path.join(out, "stages", name + ".json")
            record = json.load(open(path))
            del record["inputs"]["code"]
            with open(path, "w") as f:
                json.dump(record, f)
        stderr = io.StringIO()
        with redirect_stderr(stderr):
            self.assertEqual(engine_driver.main(["--out", out, "--dry-run"]), 0)
        log = stderr.getvalue()
        self.assertIn("[engine-test] make a: reruns (code added)", log)
        self.assertIn("[engine] dry run: the stages after these are declared", log)
        self.assertEqual(len(_lines(os.path.join(out, "runs.log"))), 3)  # Nothing ran.

    def test_the_later_phases_before_the_first_has_run(self):
        # As the demo and the tables before the default corpus exists: the whole plan.
        directory = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, directory)
        out = os.path.join(directory, "out")
        stderr = io.StringIO()
        with redirect_stderr(stderr):
            self.assertEqual(engine_driver.main(["--out", out, "--ahead", "--dry-run"]), 0)
        log = stderr.getvalue()
        self.assertIn("[engine] dry run: the stages after these are declared from what is", log)
        for name in "abc":
            self.assertIn("rule stage_%s:" % name, log)
        self.assertFalse(os.path.exists(os.path.join(out, "runs.log")))  # Nothing ran.


class OutsideADriverTest(unittest.TestCase):
    """Steps.run_stages called as a library (no command): here, in order, one at a time."""

    def test_in_order_and_circles_refused(self):
        from ldr_experiments import common

        directory = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, directory)
        steps = common.Steps(os.path.join(directory, "out"), name="lib")
        order = []

        def stage(name, after=()):
            return common.Stage(
                name, name, "", dict, [], lambda cores: order.append(name), after=after
            )

        with redirect_stderr(io.StringIO()):
            steps.run_stages([stage("b", ["a"]), stage("a"), stage("c", ["b", "elsewhere"])])
        self.assertEqual(order, ["a", "b", "c"])
        with self.assertRaisesRegex(ValueError, "circular"), redirect_stderr(io.StringIO()):
            steps.run_stages([stage("x", ["y"]), stage("y", ["x"])])


class PickledStagesTest(unittest.TestCase):
    """A stage's job loads the stage its engine pickled, closures and all (no driver again)."""

    def setUp(self):
        from ldr_experiments import common

        self.directory = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.directory)
        self.steps = common.Steps(os.path.join(self.directory, "out"), name="lib")
        self.common = common

    def test_a_closure_comes_back_with_what_it_captured(self):
        captured = {"value": 41}
        target = os.path.join(self.directory, "made.txt")

        def run(cores):
            with open(target, "w", encoding="utf-8") as f:
                f.write("%d\n" % (captured["value"] + 1))

        stage = self.common.Stage("make", "make", "", dict, [target], run)
        engine.write_stages(self.directory, self.steps, [stage])
        steps, loaded = engine.load_stage(os.path.join(self.directory, "phase-1.json"), "make")
        self.assertEqual(
            (loaded.name, loaded.outputs, steps.out), ("make", [target], self.steps.out)
        )
        loaded.run(None)
        self.assertEqual(_lines(target), ["42"])

    def test_what_cannot_be_pickled_is_named_and_a_missing_stage_refused(self):
        import threading

        lock = threading.Lock()
        stage = self.common.Stage("locked", "locked", "", dict, [], lambda cores: lock.acquire())
        with self.assertRaisesRegex(TypeError, "stage locked cannot be pickled"):
            engine.write_stages(self.directory, self.steps, [stage])
        with self.assertRaisesRegex(UserError, "no stage 'other' declared: rerun the command"):
            engine.load_stage(os.path.join(self.directory, "phase-1.json"), "other")


class CodeDigestTest(unittest.TestCase):
    def _digest(self, source):
        directory = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, directory)
        package = os.path.join(directory, "toy_pkg_%d" % abs(hash(source)))
        os.makedirs(package)
        with open(os.path.join(package, "__init__.py"), "w") as f:
            f.write(source)
        with mock.patch("sys.path", [directory] + __import__("sys").path):
            return engine.code_digest(os.path.basename(package))

    def test_docstrings_and_comments_do_not_count_statements_do(self):
        plain = self._digest("def f():\n    return 1\n")
        documented = self._digest(
            '"""Module."""\n\n\ndef f():  # note\n    """Doc."""\n    return 1\n'
        )
        changed = self._digest("def f():\n    return 2\n")
        self.assertEqual(plain, documented)
        self.assertNotEqual(plain, changed)

    def test_trainings_and_translations_depend_on_the_library_reports_also_on_experiments(self):
        # A change to a report's code rewrites the report, not the trainings and translations
        # under it (their inputs are in their stamps); the local stages read both packages.
        library = engine.code_digest(engine.LIBRARY)
        self.assertEqual(engine.stage_code(engine.TRAIN), library)
        self.assertEqual(engine.stage_code(engine.EVALUATE), library)
        self.assertEqual(
            engine.stage_code(engine.LOCAL), engine.code_digest(engine.LIBRARY, engine.EXPERIMENTS)
        )
        self.assertNotEqual(engine.stage_code(engine.LOCAL), library)


class OptionsTest(unittest.TestCase):
    def test_engine_options_are_taken_off_the_drivers_arguments(self):
        options, rest = engine.parse_options(
            ["--quick", "--lanes", "1", "--executor", "slurm", "--slurm-partition", "gpu"]
        )
        self.assertEqual(rest, ["--quick"])
        self.assertEqual(
            (options.lanes, options.executor, options.slurm_partition), (1, "slurm", "gpu")
        )
        command = engine.snakemake_command("/o/workflow/phase-1.json", options)
        self.assertIn("--executor", command)
        self.assertIn("slurm_partition=gpu", command)
        # One --config with both values (Snakemake keeps the last --config only).
        self.assertEqual(command.count("--config"), 1)
        at = command.index("--config")
        self.assertEqual(
            command[at + 1 : at + 3], ["plan=/o/workflow/phase-1.json", "gpus_per_training=0"]
        )

    def test_slurm_options_need_the_slurm_executor(self):
        with self.assertRaisesRegex(UserError, "need --executor slurm"):
            engine.parse_options(["--slurm-partition", "gpu"])

    def test_local_lanes(self):
        options, _ = engine.parse_options(["--lanes", "2"])
        command = engine.snakemake_command("/o/workflow/phase-1.json", options)
        self.assertEqual(command[command.index("--cores") + 1], "2")
        self.assertIn("lanes=2", command)


if __name__ == "__main__":
    unittest.main()
