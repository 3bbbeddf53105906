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


if __name__ == "__main__":
    tf.test.main()
