"""The report of a per-domain evaluation: the BLEU / chrF tables and chart."""

import os
import tempfile
from unittest import mock

import tensorflow as tf

from ldr_opennmt.evaluation import report


class ScoresTest(tf.test.TestCase):
    def test_table_and_chart(self):
        rows = [
            ("Mixed", {"a": {"bleu": 10.0, "chrf": 30.0}, "b": {"bleu": 20.0, "chrf": 40.0}}),
            ("LDR", {"a": {"bleu": 12.0, "chrf": 31.0}, "b": {"bleu": 20.0, "chrf": 40.0}}),
        ]
        table = report.score_table(
            rows, ["a", "b"], "bleu", {"LDR": {"a": 0.01, "b": 0.01}}, baseline="Mixed"
        )
        self.assertEqual(
            table.splitlines(),
            [
                "| system | a | b | avg |",
                "|---|---:|---:|---:|",
                "| Mixed | 10.0 | 20.0 | 15.0 |",
                "| LDR | 12.0* | 20.0 | 16.0 |",
            ],
        )
        path = os.path.join(self.get_temp_dir(), "chart.png")
        report.score_chart(rows, ["a", "b"], "bleu", path, "test")
        with open(path, "rb") as f:
            self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")

    def test_rounding_never_hides_a_significant_difference(self):
        # Issue 47 item 6: "0.0*" beside "0.0" (a significant 0.03 BLEU on a tiny model).
        rows = [
            ("Mixed", {"a": {"bleu": 0.0}, "b": {"bleu": 20.0}}),
            ("LDR", {"a": {"bleu": 0.03}, "b": {"bleu": 20.04}}),
            ("DC", {"a": {"bleu": 0.0}, "b": {"bleu": 25.0}}),
        ]
        significance = {"LDR": {"a": 0.01, "b": 0.2}, "DC": {"b": 0.01}}
        table = report.score_table(rows, ["a", "b"], "bleu", significance, baseline="Mixed")
        self.assertEqual(
            table.splitlines()[2:],
            [
                "| Mixed | 0.00 | 20.0 | 10.0 |",
                "| LDR | 0.03* | 20.0 | 10.0 |",
                "| DC | 0.00 | 25.0* | 12.5 |",
            ],
        )
        self.assertEqual(report.distinguishing_digits(0.0004, 0.0), 4)
        self.assertEqual(report.distinguishing_digits(12.0, 10.0), 1)

    def test_interrupted_chart_leaves_nothing(self):
        import matplotlib.figure

        directory = tempfile.mkdtemp(dir=self.get_temp_dir())
        path = os.path.join(directory, "bleu.png")

        def savefig(figure, fname, **kwargs):
            self.assertEqual(kwargs.get("format"), "png")  # The temporary name has no ".png".
            with open(fname, "wb") as f:
                f.write(b"\x89PNG half")
            raise KeyboardInterrupt

        rows = [("Mixed", {"a": {"bleu": 10.0}})]
        with mock.patch.object(matplotlib.figure.Figure, "savefig", autospec=True) as save:
            save.side_effect = savefig
            with self.assertRaises(KeyboardInterrupt):
                report.score_chart(rows, ["a"], "bleu", path, "test")
        self.assertEqual(os.listdir(directory), [])


if __name__ == "__main__":
    tf.test.main()
