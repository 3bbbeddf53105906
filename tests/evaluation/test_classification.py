import tensorflow as tf

from ldr_opennmt.errors import UserError
from ldr_opennmt.evaluation import classification


class ClassificationTest(tf.test.TestCase):
    def test_precision_recall(self):
        references = ["med", "med", "med", "rel", "rel", "it"]
        predictions = ["med", "med", "rel", "rel", "med", "rel"]
        scores = classification.precision_recall(references, predictions, ["med", "rel", "it"])
        med, rel, it = (scores["domains"][d] for d in ("med", "rel", "it"))
        self.assertAllClose([med["precision"], med["recall"]], [2 / 3, 2 / 3])
        self.assertAllClose([rel["precision"], rel["recall"]], [1 / 3, 1 / 2])
        self.assertEqual((it["precision"], it["recall"], it["f1"]), (None, 0.0, None))
        self.assertEqual((med["support"], rel["predicted"]), (3, 3))
        self.assertAllClose(scores["accuracy"], 3 / 6)
        table = classification.format_table(scores)
        self.assertIn("| med | 66.7 | 66.7 | 66.7 | 3 | 3 |", table)
        self.assertIn("| it | - | 0.0 | - | 1 | 0 |", table)
        self.assertIn("| all (accuracy) | | 50.0 | | 6 | |", table)

    def test_length_mismatch(self):
        with self.assertRaisesRegex(UserError, "2 predicted labels for 3 reference"):
            classification.precision_recall(["a"] * 3, ["a"] * 2, ["a"])


if __name__ == "__main__":
    tf.test.main()
