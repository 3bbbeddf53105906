import os
import tempfile
from unittest import mock

import tensorflow as tf

from ldr_opennmt.errors import UserError
from ldr_opennmt.evaluation import scoring

REFS = [
    "the cat sat on the mat",
    "a dog barked at night",
    "it is raining today",
    "hello world again",
]


class ScoringTest(tf.test.TestCase):
    def test_score(self):
        perfect = scoring.score(REFS, REFS)
        self.assertAlmostEqual(perfect["bleu"], 100.0)
        self.assertAlmostEqual(perfect["chrf"], 100.0)
        worse = scoring.score(["x y z"] * 4, REFS)
        self.assertLess(worse["bleu"], 1.0)

    def test_check_aligned(self):
        with self.assertRaisesRegex(UserError, "out.txt: 1 predictions for 4 references"):
            scoring.check_aligned(["a"], REFS, "out.txt")
        with self.assertRaisesRegex(UserError, "out.txt: missing predictions"):
            scoring.check_aligned(None, REFS, "out.txt")

    def test_signatures(self):
        signatures = scoring.signatures()
        self.assertIn("nrefs:1", signatures["BLEU"])
        self.assertIn("tok:13a", signatures["BLEU"])
        self.assertIn("nc:6", signatures["chrF"])

    def test_paired_bootstrap(self):
        refs = REFS * 10
        baseline = list(refs)
        baseline[::3] = ["x y z"] * len(baseline[::3])
        close = list(baseline)
        close[1] = "a dog barked at noon"
        p_values = scoring.paired_bootstrap(
            baseline, {"good": list(refs), "close": close}, refs, n_samples=200
        )
        self.assertLess(p_values["good"], 0.05)
        self.assertGreater(p_values["close"], 0.05)

    def test_table_and_chart(self):
        rows = [
            ("Mixed", {"a": {"bleu": 10.0, "chrf": 30.0}, "b": {"bleu": 20.0, "chrf": 40.0}}),
            ("LDR", {"a": {"bleu": 12.0, "chrf": 31.0}, "b": {"bleu": 20.0, "chrf": 40.0}}),
        ]
        table = scoring.markdown_table(
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
        scoring.bar_chart(rows, ["a", "b"], "bleu", path, "test")
        with open(path, "rb") as f:
            self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")

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
                scoring.bar_chart(rows, ["a"], "bleu", path, "test")
        self.assertEqual(os.listdir(directory), [])


if __name__ == "__main__":
    tf.test.main()
