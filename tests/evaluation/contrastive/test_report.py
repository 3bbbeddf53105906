"""The report of the contrastive test: its tables, chart and files."""

import json
import os

import tensorflow as tf

from ldr_opennmt.evaluation.contrastive import report as report_lib


def _results():
    row = {"values": {"a": 50.0, "b": None, "all": 50.0}, "labels": True}
    return {
        "domains": ["a", "b"],
        "items": {"a": 2, "b": 0},
        "pairs": {"a": 3, "b": 0},
        "items_file": "items.jsonl",
        "items_sha1": "0123456789abcdef",
        "rows": [
            dict(row, row="M", metric="accuracy", labels=False),
            dict(row, row="M", metric="follow", labels=False),
            dict(row, row="L (oracle)", metric="accuracy"),
            dict(row, row="L (flipped)", metric="follow"),
            dict(row, row="L", metric="shift", margin={"a": 0.5, "b": None, "all": 0.5}),
        ],
    }


class ReportTest(tf.test.TestCase):
    def test_format_tables(self):
        table = report_lib.format_tables(_results())
        self.assertIn("| *items* | 2 | 0 | 2 |", table)
        self.assertIn("| L (oracle) | 50.0 | - | 50.0 |", table)
        self.assertIn("| M (labels ignored) | 50.0 | - | 50.0 |", table)
        self.assertIn("| L (flipped) | 50.0 | - | 50.0 |", table)
        self.assertIn("| L | 50.0 (+0.50) | - | 50.0 (+0.50) |", table)
        self.assertIn("### Label effect", table)
        without_shift = dict(_results(), rows=_results()["rows"][:4])
        self.assertNotIn("### Label effect", report_lib.format_tables(without_shift))

    def test_write_report(self):
        out = self.get_temp_dir()
        results = _results()
        report_lib.write_report(results, out)
        with open(os.path.join(out, report_lib.RESULTS_FILE)) as f:
            self.assertEqual(json.load(f), results)
        with open(os.path.join(out, report_lib.TABLE_FILE)) as f:
            self.assertEqual(f.read(), report_lib.format_tables(results) + "\n")
        with open(os.path.join(out, report_lib.CHART_FILE), "rb") as f:
            self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")
        self.assertCountEqual(
            os.listdir(out),
            [report_lib.RESULTS_FILE, report_lib.TABLE_FILE, report_lib.CHART_FILE],
        )


if __name__ == "__main__":
    tf.test.main()
