"""The benchmark's Markdown report, from measurements (none is run)."""

import unittest

from ldr_experiments.benchmarks import report
from tests.experiments.benchmarks import fixtures


class ReportTest(unittest.TestCase):
    def test_formats(self):
        self.assertEqual(report.format_ratio(0.955), "0.95x")
        self.assertEqual(report.format_ratio(None), "n/a")
        self.assertEqual(report.format_number(1234.56, 0), "1235")
        self.assertEqual(report.format_number(None), "n/a")

    def test_report(self):
        results = fixtures.results()
        results["train"]["vanilla"].update(
            params=10, tokens_per_step=40, import_rss_mib=400.0, peak_rss_mib=500.0
        )
        results["train"]["ldr_joint"].update(
            params=12, tokens_per_step=40, import_rss_mib=400.0, peak_rss_mib=550.0
        )
        results["train"]["ldr_procedure1"] = {"error": "killed"}
        config = fixtures.config()
        length = config["decode_length"]
        for task, entry in results["infer"].items():
            entry.update(
                tokens_per_s=entry["sentences_per_s"] * length,
                tokens_per_sentence=length,
                model_mib=1.0,
                peak_rss_mib=500.0,
                agreement=1.0 if task.startswith("ct2") else None,
            )
        results["infer"]["ct2:ldr"]["tokens_per_sentence"] = length - 0.5
        machine = {
            "date": "2026-01-01 10:00 UTC",
            "machine": "AMD EPYC 7B13 (2 cores), x86_64, 23.5 GiB RAM",
            "software": "Python 3.11.9, TensorFlow 2.13.1, OpenNMT-tf 2.32.0, CTranslate2 3.24.0",
            "load": "1.26 1.10 0.98",
        }
        text = report.format_report(config, results, machine, elapsed=90)
        lines = text.splitlines()
        # The header: ldr_experiments.machine.describe()'s record.
        self.assertEqual(
            lines[2:5],
            [
                "- date: 2026-01-01 10:00 UTC",
                "- machine: AMD EPYC 7B13 (2 cores), x86_64, 23.5 GiB RAM; load average at "
                "start: 1.26 1.10 0.98",
                "- software: Python 3.11.9, TensorFlow 2.13.1, OpenNMT-tf 2.32.0, CTranslate2 "
                "3.24.0",
            ],
        )
        self.assertIn("| LDR joint | 12 | 104.0 | 96 | 0.96x | 1.04x | 400 | 550 | 1.10x |", text)
        self.assertIn("| LDR Procedure 1 | failed: killed |", text)
        self.assertIn("| LDR | CTranslate2 | 31.0 |", text)
        self.assertIn("| 3.10x | 100% |", text)
        self.assertIn("**Warning**: the outputs of ct2:ldr are not all of L", text)
        self.assertIn(
            "| LDR joint training tokens/s ≥ 0.95× vanilla | 0.96x | ≥ 0.95x | PASS |", text
        )
        self.assertIn("| LDR Procedure 1 step ≤ 2.05× a vanilla step | n/a | ≤ 2.05x | n/a |", text)
        self.assertTrue(text.endswith("Run time: 1.5 min.\n"))


if __name__ == "__main__":
    unittest.main()
