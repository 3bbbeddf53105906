"""The host's speed (ldr_experiments.host_speed): measured for real in a lane, and what the
suite and the demo make of the figure."""

import json
import os
import subprocess
import sys
import types
import unittest
from unittest import mock

import pytest

from ldr_experiments import demo, engine, host_speed

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.slow
class MeasureTest(unittest.TestCase):
    def test_one_lane_in_a_process_of_its_own(self):
        # run/test.sh measured this host with the same command (every lane, 40 steps) before
        # the suite and exported the figure only if the measurement succeeded: check it. Run
        # otherwise (pytest alone), measure a rough figure here (3 timed steps, first core).
        measured = os.environ.get("LDR_HOST_SPEED")
        if measured:
            self.assertGreater(float(measured), 1 / 60)
            self.assertLess(float(measured), 1000)
            return
        result = subprocess.run(
            [sys.executable, "-m", "ldr_experiments.host_speed", "--json", "--core", "0"]
            + ["--steps", "3"],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=600,
        )
        self.assertEqual(result.returncode, 0, result.stderr[-2000:])
        figure = json.loads(result.stdout.strip().splitlines()[-1])["steps_per_s"]
        # A training step of a 2-layer, 64-unit model: between a millisecond and a minute.
        self.assertGreater(figure, 1 / 60)
        self.assertLess(figure, 1000)

    def test_bad_steps_is_one_line(self):
        result = subprocess.run(
            [sys.executable, "-m", "ldr_experiments.host_speed", "--steps", "0"],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=120,
        )
        self.assertEqual(result.returncode, 2)
        self.assertRegex(result.stderr.strip().splitlines()[-1], r"error: --steps: at least 1")


class FigureTest(unittest.TestCase):
    def test_the_record_host_is_its_own_reference(self):
        # A host whose calibration predicts the record's Mixed speed takes the record's time.
        record = host_speed.DEMO_MIXED_STEPS_PER_S / host_speed.DEMO_PER_CALIBRATION
        self.assertAlmostEqual(host_speed.demo_steps_per_s(record), 12.75)
        self.assertAlmostEqual(host_speed.demo_minutes(record), host_speed.DEMO_MINUTES)
        # Half as fast: twice the time.
        self.assertAlmostEqual(host_speed.demo_minutes(record / 2), 2 * host_speed.DEMO_MINUTES)
        line = host_speed.describe(8.1)
        self.assertIn("host speed: 8.10 steps/s", line)
        self.assertIn("about 6.7 steps/s here, 12.75 on the host of", line)

    def test_a_failed_lane_gives_no_figure(self):
        failing = types.SimpleNamespace(
            communicate=lambda timeout: (b"", b"Traceback"), returncode=1, kill=lambda: None
        )
        with mock.patch("subprocess.Popen", return_value=failing):
            self.assertIsNone(host_speed.measure_lanes(2))


class DemoAnnouncesItsTimeTest(unittest.TestCase):
    def _args(self, directory, **changes):
        values = dict(quick=False, full=False, out=directory)
        values.update(changes)
        return types.SimpleNamespace(**values)

    def test_before_it_trains(self):
        out = os.path.join(ROOT, "results", "no-such-demo-dir-for-tests")
        budget = dict(demo.BUDGETS["default"])
        record = host_speed.DEMO_MIXED_STEPS_PER_S / host_speed.DEMO_PER_CALIBRATION
        with mock.patch.object(demo.common, "log") as log:
            minutes = demo.announce_time(self._args(out), budget, measure=lambda: record / 2)
        self.assertAlmostEqual(minutes, 2 * host_speed.DEMO_MINUTES)
        said = "\n".join(call.args[0] for call in log.call_args_list)
        self.assertIn("this run takes about 30 minutes on this host (15.2 on the host of", said)
        self.assertIn("bash run/demo.sh --quick", said)
        # Half the steps, half the time; --full adds its trainings.
        half = dict(budget, steps=budget["steps"] // 2)
        with mock.patch.object(demo.common, "log"):
            self.assertAlmostEqual(
                demo.announce_time(self._args(out), half, measure=lambda: record),
                host_speed.DEMO_MINUTES / 2,
            )
            full = demo.announce_time(self._args(out, full=True), budget, measure=lambda: record)
        self.assertAlmostEqual(full, host_speed.DEMO_MINUTES + demo.FULL_EXTRA_MINUTES)

    def test_nothing_measured_for_quick_dry_runs_and_finished_runs(self):
        def measure():
            raise AssertionError("measured")

        budget = dict(demo.BUDGETS["default"])
        out = os.path.join(ROOT, "results", "no-such-demo-dir-for-tests")
        with mock.patch.object(demo.common, "log"):
            self.assertIsNone(demo.announce_time(self._args(out, quick=True), budget, measure))
            with mock.patch.object(engine, "dry_run", return_value=True):
                self.assertIsNone(demo.announce_time(self._args(out), budget, measure))
            with mock.patch.object(os.path, "exists", return_value=True):
                self.assertIsNone(demo.announce_time(self._args(out), budget, measure))
            with mock.patch.object(demo.common, "log") as log:
                self.assertIsNone(demo.announce_time(self._args(out), budget, lambda: None))
        self.assertIn("could not be measured", log.call_args_list[-1].args[0])


if __name__ == "__main__":
    unittest.main()
