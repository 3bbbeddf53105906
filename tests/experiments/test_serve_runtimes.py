"""ldr_experiments/serve_runtimes.py's report, from figures (no server is started; the
measurement itself: bash run/serve_bench.sh --runtimes)."""

import argparse
import datetime
import unittest
from unittest import mock

from ldr_experiments import machine, serve_runtimes

PARIS = datetime.timezone(datetime.timedelta(hours=1))


def _environment(python, ctranslate2, speed):
    load = [
        dict(clients=clients, sentences_per_s=speed * share, p50_ms=20.0, p99_ms=p99, errors=0)
        for clients, share, p99 in ((1, 0.2, 25.0), (32, 0.9, 90.0))
    ]
    serve = dict(startup_s=1.25, rss_start=300.0, rss_after=420.0, hwm_after=450.0, load=load)
    offline = [
        dict(ctranslate2=ctranslate2, python=python, compute_type=kind, sentences_per_s=speed,
             batch_ms=50.0)
        for kind in ("float32", "int8_float32")
    ]  # fmt: skip
    return {"serve": serve, "offline": offline}


class ReportTest(unittest.TestCase):
    def test_report(self):
        args = argparse.Namespace(
            invoked_as="bash run/serve_bench.sh --runtimes",
            model_dir="export/ct2",
            sentences="test.medical.en",
            domain="medical",
            max_decoding_length=64,
            max_batch_size=32,
        )
        environments = {
            "`.venv` (training)": _environment("3.11", "3.24.0", 100.0),
            "`.venv-serve`": _environment("3.12", "4.5.0", 120.0),
        }
        date = datetime.datetime(2026, 11, 27, 9, 30, tzinfo=PARIS)
        with mock.patch.object(machine, "description", return_value="AMD EPYC 7B13 (2 cores)"):
            text = serve_runtimes.report(args, date, environments, ["a"] * 64, "1.00 0.90 0.80")
        lines = text.splitlines()
        # The heading in UTC; the machine described by ldr_experiments.machine.
        self.assertEqual(lines[0], "### Run of 2026-11-27 08:30 UTC")
        self.assertEqual(
            lines[2], "- machine: AMD EPYC 7B13 (2 cores); load average at start: 1.00 0.90 0.80"
        )
        self.assertIn("| `.venv-serve` | 1.2 | 300 | 420 / 450 |", lines)
        self.assertIn("| `.venv-serve` | 32 | 108.0 | 90% | 20 | 90 | 1.8 | 0 | PASS |", lines)
        self.assertIn(
            "| `.venv-serve` | CTranslate2 4.5.0 (Python 3.12) | int8_float32 | 120.0 | 50 |", lines
        )


if __name__ == "__main__":
    unittest.main()
