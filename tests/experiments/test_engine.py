"""The workflow engine (ldr_experiments/engine.py) runs a driver's stages through Snakemake:
lanes, skip when done, rerun on a changed input or code, resume after a crash, dry run, picture.

One toy driver (tests/experiments/engine_driver.py) with three stages; every run is a real
Snakemake run whose jobs are real processes (about 10-25 s each here).
"""

import io
import json
import os
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

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="engine-")
        cls.out = os.path.join(cls.dir, "out")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def _main(self, *args):
        stderr = io.StringIO()
        with redirect_stderr(stderr):
            status = engine_driver.main(["--out", self.out] + list(args))
        return status, stderr.getvalue()

    def _runs(self):
        return [line.split()[0] for line in _lines(os.path.join(self.out, "runs.log"))]

    def test_1_runs_then_skips_then_reruns_what_changed(self):
        status, log = self._main()
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
        starts = {line.split("started=")[1] for line in lanes.values()}
        self.assertEqual(len(starts), 1, starts)
        self.assertNotEqual(starts, {"None"})
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

    def test_2_a_crash_resumes_where_it_stopped(self):
        before = len(self._runs())
        with self.assertRaisesRegex(RuntimeError, "a stage failed"):
            self._main("--value", "3", "--fail-once", "a")
        self.assertFalse(json.load(open(os.path.join(self.out, "stages", "a.json")))["complete"])
        status, log = self._main("--value", "3", "--fail-once", "a")
        self.assertEqual(status, 0)
        self.assertIn("make a: runs (the run that wrote them did not finish)", log)
        self.assertEqual(self._runs()[before:], ["a", "a", "b"])

    def test_3_changed_code_makes_every_stage_due(self):
        before = len(self._runs())
        with mock.patch.object(engine, "stage_code", return_value="other code"):
            status, log = self._main("--value", "3", "--dry-run")
        self.assertEqual(status, 0)
        for name in "abc":
            self.assertIn("[engine-test] make %s: due again (code differs)" % name, log)
        self.assertEqual(len(self._runs()), before)

    def test_4_only_some_stages(self):
        before = len(self._runs())
        status, log = self._main("--value", "4", "--only", "c")
        self.assertEqual(status, 0)
        self.assertEqual(self._runs()[before:], [])  # c is done: a and b are not run.
        status, log = self._main("--value", "4", "--only", "a")
        self.assertEqual(self._runs()[before:], ["a"])
        self.assertIn("[engine] --only: a done", log)
        with self.assertRaisesRegex(UserError, "--only nope: no such stage among a, b, c"):
            self._main("--only", "nope")

    def test_5_the_picture_of_the_plan(self):
        path = os.path.join(self.dir, "plan.dot")
        status, _ = self._main("--value", "4", "--dry-run", "--dag", path)
        self.assertEqual(status, 0)
        with open(path) as f:
            text = f.read()
        self.assertIn("digraph", text)
        for name in ("stage_a", "stage_b", "stage_c"):
            self.assertIn(name, text)


class KillTest(unittest.TestCase):
    """kill -9 of the whole command (engine, Snakemake, the stage's process), then the same
    command: it resumes, and a second engine on the same directory is refused meanwhile."""

    def test_kill_then_resume(self):
        directory = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, directory)
        out = os.path.join(directory, "out")
        code = "import sys\nfrom tests.experiments import engine_driver\n"
        code += "sys.exit(engine_driver.main(sys.argv[1:]))\n"
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        process = subprocess.Popen(
            [sys.executable, "-c", code, "--out", out, "--slow", "a"],
            cwd=root,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            deadline = time.time() + 120
            while not os.path.exists(os.path.join(out, "started-a")):
                self.assertLess(time.time(), deadline, "stage a never started")
                time.sleep(0.5)
            # Another engine on the same directory meanwhile: one line, nothing run.
            with self.assertRaisesRegex(UserError, "another ldr-experiments runs on this"):
                with redirect_stderr(io.StringIO()):
                    engine_driver.main(["--out", out])
        finally:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        stderr = io.StringIO()
        with redirect_stderr(stderr):
            self.assertEqual(engine_driver.main(["--out", out]), 0)
        self.assertIn("make a: reruns (the run that wrote them did not finish)", stderr.getvalue())
        self.assertEqual(_lines(os.path.join(out, "b.txt")), ["A=1"])


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
