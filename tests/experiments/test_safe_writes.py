"""The scripts of ``run/`` never write through a link nor over what they did not make."""

import os
import re
import subprocess
import sys
from unittest import mock

import tensorflow as tf

from ldr_experiments import common
from ldr_experiments.benchmarks import cli as bench_cli
from ldr_experiments.benchmarks import measure as bench_measure
from ldr_opennmt.errors import UserError
from tests import corpus as tiny
from tests import helpers


class ExperimentOutputTest(tf.test.TestCase):
    def setUp(self):
        super().setUp()
        self.dir = self.get_temp_dir()
        self.victim = tiny.write_lines(os.path.join(self.dir, "victim"), ["precious"])

    def test_configuration_replaces_a_planted_link(self):
        path = os.path.join(self.dir, "mixed.yml")
        os.symlink(self.victim, path)
        self.assertEqual(common.write_config({"model_dir": "runs/mixed"}, path), path)
        self.assertEqual(tiny.read_lines(self.victim), ["precious"])
        self.assertFalse(os.path.islink(path))
        self.assertEqual(common.load_yaml(path), {"model_dir": "runs/mixed"})

    def test_log_is_never_appended_through_a_link(self):
        log_path = os.path.join(self.dir, "train.log")
        os.symlink(self.victim, log_path)
        with self.assertRaisesRegex(UserError, "^%s: a symbolic link: not appended to" % log_path):
            common.run_streaming([sys.executable, "-c", "print('Step = 1')"], log_path)
        self.assertEqual(tiny.read_lines(self.victim), ["precious"])

    def test_results_directory_of_someone_else_is_refused(self):
        out = os.path.join(self.dir, "mine")
        os.makedirs(out)
        report = tiny.write_lines(os.path.join(out, "report.md"), ["my notes"])
        with self.assertRaises(UserError) as context:
            common.Steps(out)
        self.assertEqual(
            str(context.exception),
            "%s: not empty and not made by an experiment driver (no .ldr-experiment in it):"
            " refused, so that nothing in it is overwritten; give a new or empty --out" % out,
        )
        self.assertEqual(os.listdir(out), ["report.md"])
        self.assertEqual(tiny.read_lines(report), ["my notes"])
        # A directory a driver made is written again (a resumed run).
        made = os.path.join(self.dir, "made")
        common.Steps(made)
        tiny.write_lines(os.path.join(made, "report.md"), ["a former report"])
        steps = common.Steps(made)
        self.assertEqual(steps.configs_dir, os.path.join(made, "configs"))

    def test_a_results_directory_that_cannot_be_written_is_one_line(self):
        # Issue 71 (7): the traceback of os.makedirs (or of the lock file).
        locked = helpers.unwritable_directory(self, self.dir)
        for out in (locked, os.path.join(locked, "results")):
            with self.assertRaisesRegex(
                UserError, r"^--out %s: cannot write in %s \(" % (re.escape(out), locked)
            ):
                common.Steps(out)
        self.assertEqual(sorted(os.listdir(self.dir)), ["read_only", "victim"])

    def test_driver_refuses_in_one_line(self):
        out = os.path.join(self.dir, "theirs")
        os.makedirs(out)
        tiny.write_lines(os.path.join(out, "report.md"), ["my notes"])
        result = subprocess.run(
            [sys.executable, "-m", "ldr_experiments.cli", "region-sweep", "--quick", "--out", out],
            cwd=common.ROOT,
            capture_output=True,
            text=True,
        )
        self.assertEqual(result.returncode, 2, result.stderr)
        self.assertNotIn("Traceback", result.stderr)
        self.assertEqual(
            result.stderr.strip().splitlines()[-1],
            "ldr-experiments region-sweep: error: %s: not empty and not made by an experiment"
            " driver (no .ldr-experiment in it): refused, so that nothing in it is overwritten;"
            " give a new or empty --out" % out,
        )
        self.assertEqual(os.listdir(out), ["report.md"])

    def test_directory_links_in_the_results_are_refused(self):
        out = os.path.join(self.dir, "out")
        common.Steps(out)
        outside = os.path.join(self.dir, "outside")
        os.makedirs(outside)
        os.rmdir(os.path.join(out, "configs"))
        os.symlink(outside, os.path.join(out, "configs"))
        self.addCleanup(os.remove, os.path.join(out, "configs"))  # For tf's cleanup.
        with self.assertRaisesRegex(UserError, "configs: a symbolic link inside the output"):
            common.Steps(out)

    def test_results_link_is_resolved_once(self):
        real = os.path.join(self.dir, "real")
        os.makedirs(real)
        link = os.path.join(self.dir, "link")
        os.symlink(real, link)
        self.addCleanup(os.remove, link)  # For tf's cleanup.
        steps = common.Steps(link)
        self.assertEqual(steps.out, real)
        self.assertTrue(os.path.isdir(os.path.join(real, "configs")))


class BenchmarkWorkdirTest(tf.test.TestCase):
    def test_workdir_must_be_new_or_empty(self):
        directory = self.get_temp_dir()
        new = os.path.join(directory, "new", "work")
        self.assertEqual(bench_cli.make_workdir(new), new)
        self.assertTrue(os.path.isdir(new))
        self.assertEqual(bench_cli.make_workdir(new), new)  # Still empty: fine.
        tiny.write_lines(os.path.join(new, "mine"), ["x"])
        with self.assertRaisesRegex(SystemExit, "--workdir %s is not empty" % new):
            bench_cli.make_workdir(new)
        a_file = os.path.join(new, "mine")
        with self.assertRaisesRegex(SystemExit, "--workdir %s is not a directory" % a_file):
            bench_cli.make_workdir(a_file)
        with mock.patch.object(sys, "stderr"):
            with self.assertRaises(SystemExit):
                bench_cli.parse_args(["--quick", "--workdir", a_file])
        self.assertEqual(tiny.read_lines(a_file), ["x"])

    def test_report_never_removes_what_appears_at_its_temporary_name(self):
        replace = os.replace
        planted = []

        def replace_then_plant(src, dst):
            replace(src, dst)
            tiny.write_lines(src, ["someone else's"])
            planted.append(src)

        out = os.path.join(self.get_temp_dir(), "BENCH.md")
        with mock.patch.object(bench_measure.os, "replace", side_effect=replace_then_plant):
            bench_measure.write_atomically(out, "report\n")
        self.assertEqual(tiny.read_lines(planted[0]), ["someone else's"])
        self.assertEqual(tiny.read_lines(out), ["report"])


if __name__ == "__main__":
    tf.test.main()
