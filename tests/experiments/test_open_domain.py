import os

import tensorflow as tf
import yaml

from ldr_experiments import common, open_domain


class OpenDomainExperimentTest(tf.test.TestCase):
    def test_known_data_config_holds_the_unseen_domain_out(self):
        path = os.path.join(self.get_temp_dir(), "known.yml")
        _, known = open_domain.known_data_config(
            "data_configs/default_corpora.yml", "software", path
        )
        self.assertEqual(known, ["medical", "religious"])
        with open(path) as f:
            data = yaml.safe_load(f)["data"]
        self.assertEqual(list(data["train_corpora"]), known)
        self.assertEqual(list(data["eval_corpora"]), known)
        original = common.load_yaml("data_configs/default_corpora.yml")["data"]
        self.assertEqual(data["train_corpora"]["medical"], original["train_corpora"]["medical"])
        with self.assertRaisesRegex(ValueError, "--unseen must be one of the training domains"):
            open_domain.known_data_config("data_configs/default_corpora.yml", "legal", path)

    def test_budgets(self):
        for budget in open_domain.BUDGETS.values():
            self.assertGreater(budget["steps"], budget["stage2_steps"])
            self.assertGreater(budget["classifier_steps"], 0)
            self.assertGreater(budget["fit_sentences"], 0)


if __name__ == "__main__":
    tf.test.main()
