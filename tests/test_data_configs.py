"""The paper-size configurations resolve to the paper's training settings."""

import os

import tensorflow as tf
from opennmt import config as config_util
from parameterized import parameterized

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class PaperConfigTest(tf.test.TestCase):
    @parameterized.expand([("opus_en_fr.yml", 4), ("opus_en_de.yml", 3)])
    def test_paper_settings_under_auto_config(self, name, domains):
        user = config_util.load_config([os.path.join(ROOT, "data_configs", name)])
        model = config_util.load_model_from_file(
            os.path.join(ROOT, "model_defs", "ldr_transformer.py")
        )
        for replicas in (1, 4):
            # What onmt-main and ldr-main train with under --auto_config (merged as
            # opennmt.Runner merges them): the user's values win.
            config = config_util.merge_config(model.auto_config(num_replicas=replicas), user)
            train, params = config["train"], config["params"]
            self.assertEqual((train["batch_size"], train["batch_type"]), (4096, "tokens"))
            # 4096 tokens per device and step, no accumulation to --auto_config's 25000.
            self.assertIsNone(train["effective_batch_size"])
            self.assertEqual(train["max_step"], 200000)
            self.assertEqual(params["decay_type"], "NoamDecay")
            self.assertEqual(params["decay_params"], {"model_dim": 512, "warmup_steps": 4000})
            self.assertEqual(params["optimizer_params"], {"beta_1": 0.9, "beta_2": 0.98})
            self.assertLen(config["data"]["train_corpora"], domains)
            self.assertTrue(config["data"]["domain_batches"])


if __name__ == "__main__":
    tf.test.main()
