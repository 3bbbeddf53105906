import os
from unittest import mock

import tensorflow as tf
import yaml

from ldr_experiments import baselines, common
from ldr_opennmt import models
from ldr_opennmt.utils import read_lines

CLASSES = {
    "mixed": models.MultiDomainTransformer,
    "adapters": models.ResidualAdapterTransformer,
    "ttm": models.TTMTransformer,
    "ml": models.DomainClassifierTransformer,
    "advl": models.DomainClassifierTransformer,
}


class BaselinesExperimentTest(tf.test.TestCase):
    def test_model_definitions_build_each_system(self):
        for size, units in (("small", 64), ("paper", 512)):
            for system in ("mixed",) + baselines.SYSTEMS:
                model = scope_model(size, system)
                self.assertIsInstance(model, CLASSES[system], system)
                self.assertEqual(model.encoder.layers[0].ffn.layer.inner.units, 4 * units)
            adapters = scope_model(size, "adapters")
            self.assertEqual(adapters.adapter_dim, baselines.adapter_dim(size))
            self.assertTrue(scope_model(size, "advl").adversarial)
            self.assertFalse(scope_model(size, "ml").adversarial)

    def _data_config(self):
        directory = self.get_temp_dir()
        vocab = os.path.join(directory, "vocab.fr")
        with open(vocab, "w") as f:
            f.write("<blank>\n<s>\n</s>\nle\n<domain:religious>\n")
        path = os.path.join(directory, "data.yml")
        with open(path, "w") as f:
            yaml.safe_dump(
                {
                    "data": {
                        "train_corpora": {d: ["a", "b"] for d in ("medical", "religious", "it")},
                        "target_vocabulary": vocab,
                    }
                },
                f,
                sort_keys=False,
            )
        return path, vocab

    def test_configurations(self):
        data_config, vocab = self._data_config()
        budget = dict(baselines.BUDGETS["quick"])
        out = self.get_temp_dir()
        runs, configs_dir = os.path.join(out, "runs"), os.path.join(out, "configs")
        os.makedirs(configs_dir, exist_ok=True)
        configs = baselines.system_configs(
            list(baselines.SYSTEMS), budget, runs, configs_dir, data_config, 512
        )
        self.assertEqual(sorted(configs), sorted(("mixed",) + baselines.SYSTEMS))
        for system in ("mixed", "ttm", "ml", "advl"):
            config = configs[system]
            self.assertEqual(config["model_dir"], os.path.join(runs, system))
            self.assertEqual(config["train"]["max_step"], budget["steps"])
            self.assertEqual(config["params"]["decay_params"]["model_dim"], 512)
            self.assertFalse(config["data"]["domain_batches"])  # Batches mix the domains.
        # The adapters continue the Mixed model, its schedule included, one domain a batch.
        adapters = configs["adapters"]
        self.assertEqual(
            adapters["finetune"],
            {"base": configs["mixed"]["model_dir"], "steps": budget["adapter_steps"]},
        )
        self.assertEqual(adapters["params"], configs["mixed"]["params"])
        self.assertNotIn("data", adapters)
        self.assertNotIn("max_step", adapters["train"])
        # TTM: the target vocabulary with the domain tokens it lacked, appended once.
        ttm_vocab = configs["ttm"]["data"]["target_vocabulary"]
        self.assertEqual(
            read_lines(ttm_vocab),
            read_lines(vocab) + ["<domain:medical>", "<domain:it>"],
        )
        self.assertEqual(baselines.label_modes("ttm"), ("oracle", "generic", "wrong"))
        self.assertEqual(baselines.label_modes("adapters"), ("oracle", "generic", "wrong"))
        self.assertIsNone(baselines.label_modes("ml"))
        self.assertIsNone(baselines.label_modes("mixed"))
        self.assertEqual(baselines.title("adapters"), "Residual adapters")


def scope_model(size, system):
    path = os.path.join(common.ROOT, baselines.model_def(size, system))
    scope = {}
    exec(compile(open(path).read(), path, "exec"), scope)
    return scope["model"]()


if __name__ == "__main__":
    tf.test.main()


class DomainTokenVocabularyTest(tf.test.TestCase):
    def test_a_dry_run_before_the_corpus_declares_the_file_and_writes_nothing(self):
        # --dry-run before the default corpus is built (issue 55): TTM's vocabulary is a path.
        root = self.get_temp_dir()
        config = os.path.join(root, "data.yml")
        data = {"target_vocabulary": os.path.join(root, "missing", "vocab.fr")}
        data["train_corpora"] = {"medical": ["a", "b"], "law": ["c", "d"]}
        with open(config, "w") as f:
            yaml.safe_dump({"data": data}, f)
        path = os.path.join(root, "ttm_vocabulary.txt")
        with mock.patch.object(baselines.engine, "planning_ahead", return_value=True):
            self.assertEqual(baselines.domain_token_vocabulary(config, path), path)
        self.assertFalse(os.path.exists(path))
        with self.assertRaises(FileNotFoundError):  # Outside a dry run: the corpus is needed.
            baselines.domain_token_vocabulary(config, path)
        os.makedirs(os.path.dirname(data["target_vocabulary"]))
        with open(data["target_vocabulary"], "w") as f:
            f.write("le\nla\n")
        baselines.domain_token_vocabulary(config, path)
        self.assertEqual(read_lines(path)[:2], ["le", "la"])
        self.assertGreater(len(read_lines(path)), 2)  # The domain tokens appended.
