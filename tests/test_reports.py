"""The Markdown tables and charts of the package's reports."""

import os

import tensorflow as tf

from ldr_opennmt import reports


class HelpersTest(tf.test.TestCase):
    def test_markdown_table(self):
        table = reports.markdown_table(["system", "a", "b"], [["M", "1.0", ""], ["L", 2, "-"]])
        self.assertEqual(
            table.splitlines(),
            ["| system | a | b |", "|---|---:|---:|", "| M | 1.0 | |", "| L | 2 | - |"],
        )
        table = reports.markdown_table(["word", "seed"], [["cell", "yes"]], align="ll")
        self.assertEqual(table.splitlines()[1], "|---|---|")
        # The rows of the benchmark's tables: any value (a tuple too), rows from a generator.
        table = reports.markdown_table(
            ["system", "ms"], ([n, v] for n, v in [("a", 1.5), ((1, 2), "n/a")])
        )
        self.assertEqual(table, "| system | ms |\n|---|---:|\n| a | 1.5 |\n| (1, 2) | n/a |")
        with self.assertRaises(ValueError):
            reports.markdown_table(["a", "b"], [["only one"]])
        with self.assertRaises(ValueError):
            reports.markdown_table(["a", "b"], [["x", "y"]], align="l")

    def test_bar_chart(self):
        path = os.path.join(self.get_temp_dir(), "panels.png")
        panels = [
            reports.Panel("first", "%", [("x", [1.0, None]), ("y", [float("nan"), 2.0])], (0, 105)),
            reports.Panel("empty", "%", [], None),
        ]
        reports.bar_chart(path, ["a", "b"], panels, figsize=(4, 5), value_format="%.0f")
        with open(path, "rb") as f:
            self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")


if __name__ == "__main__":
    tf.test.main()
