import tensorflow as tf

from ldr_experiments import new_domain
from ldr_opennmt.errors import UserError

DATA = {
    "train_corpora": {
        "medical": ["m.en", "m.fr"],
        "software": ["s.en", "s.fr"],
        "religious": ["r.en", "r.fr"],
    },
    "eval_corpora": {"medical": ["dm.en", "dm.fr"], "software": ["ds.en", "ds.fr"]},
    "source_vocabulary": "v.en",
}


class SplitDataConfigTest(tf.test.TestCase):
    def test_new_domain_is_removed_then_appended(self):
        base, extended = new_domain.split_data_config(DATA, "software")
        self.assertEqual(base["domains"], ["medical", "religious"])
        self.assertEqual(list(base["train_corpora"]), ["medical", "religious"])
        self.assertEqual(list(base["eval_corpora"]), ["medical"])
        # The trained order first, the new domain last: ids stay stable.
        self.assertEqual(extended["domains"], ["medical", "religious", "software"])
        self.assertEqual(list(extended["train_corpora"]), ["medical", "religious", "software"])
        self.assertEqual(list(extended["eval_corpora"]), ["medical", "software"])
        self.assertEqual(extended["source_vocabulary"], "v.en")
        self.assertEqual(list(DATA["train_corpora"])[1], "software")  # Input untouched.

    def test_unknown_new_domain(self):
        with self.assertRaisesRegex(UserError, "new domain 'legal' is not one of"):
            new_domain.split_data_config(DATA, "legal")


if __name__ == "__main__":
    tf.test.main()
