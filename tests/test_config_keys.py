"""The package's configuration keys: one table, checked before anything is written."""

import math
import os
import re

import tensorflow as tf
import yaml
from parameterized import parameterized

from ldr_opennmt import config_keys
from ldr_opennmt.cli import main as ldr_main
from ldr_opennmt.errors import UserError
from ldr_opennmt.models import procedure
from tests import helpers

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class ConfigKeysTest(tf.test.TestCase):
    @parameterized.expand(
        [
            ({"train": {"domain_sampling_alpha": math.nan}}, r"^train: domain_sampling_alpha "
             r"must be a finite number, got nan$"),
            ({"train": {"domain_sampling_alpha": math.inf}}, "must be a finite number, got inf"),
            ({"train": {"domain_sampling_alpha": "0.5"}}, "must be a float, got '0.5'"),
            ({"train": {"domain_sampling_alpha": True}}, "must be a float, got True"),
            ({"train": {"domain_sampling_alpha": -1}}, r"must be >= 0, got -1\.0"),
            ({"params": {"domain_sampling_alpha": 0.5}}, r"^params: domain_sampling_alpha is not "
             r"read here \(it would be ignored\): write train: domain_sampling_alpha$"),
            ({"train": {"domains": ["a"]}}, "write data: domains"),
            ({"params": {"domain_training": "both"}}, "must be one of procedure1, joint"),
            ({"params": {"maximum_source_length": 0}}, "maximum_source_length must be >= 1"),
            ({"data": {"keep_empty_targets": "yes"}}, "must be a bool, got 'yes'"),
            ({"finetune": {"steps": 0}}, r"^finetune: steps must be >= 1, got 0$"),
            ({"finetune": {"step": 10}}, r"^finetune: unknown key 'step' \(known: base, domain"),
            ({"data": ["a"]}, r"^data: must be a mapping of keys"),
        ]
    )  # fmt: skip
    def test_refusals(self, config, regex):
        with self.assertRaisesRegex(UserError, regex):
            config_keys.check_config(config)

    def test_valid_values_and_other_keys_pass(self):
        config_keys.check_config(
            {
                "model_dir": "m",
                "data": {"domains": ["a"], "source_vocabulary": "v", "domain_batches": None},
                "train": {"domain_sampling_alpha": 0, "max_step": 10},
                "eval": {"steps": 100},  # OpenNMT-tf's eval: steps is not finetune: steps.
                "params": {"domain_training": "joint", "maximum_source_length": 8},
                "finetune": {"base": "run/mixed", "steps": 5, "unfold": True},
            }
        )

    def test_table_matches_the_code(self):
        key = [k for k in config_keys.KEYS if k.name == "domain_training"][0]
        self.assertEqual(tuple(key.range), procedure.MODES)
        names = [(k.section, k.name) for k in config_keys.KEYS]
        self.assertEqual(len(names), len(set(names)))

    def test_documentation_is_generated_from_the_table(self):
        with open(os.path.join(ROOT, "docs", "configuration.md"), encoding="utf-8") as f:
            self.assertEqual(
                f.read(),
                config_keys.markdown_reference(),
                "docs/configuration.md is stale: python -m ldr_opennmt.config_keys > "
                "docs/configuration.md",
            )
        # One definition per key, under its section's heading (issue 47 item 6: the
        # six-column table squeezed the meanings to a few words a line).
        sections = config_keys.markdown_reference().split("\n## ")[1:]
        headings = {
            config_keys.TOP_LEVEL if s.startswith("Top level") else s.split("`")[1]: s
            for s in sections
        }
        for key in config_keys.KEYS:
            self.assertRegex(
                headings[key.section], "\n`%s` \\(%s[;)]" % (key.name, re.escape(key.type))
            )
            self.assertIn("\n: %s" % key.help, headings[key.section])
        self.assertIn(config_keys.OPENNMT_CONFIGURATION_URL, config_keys.markdown_reference())

    def test_user_modules_says_that_it_runs_code(self):
        # Issue 43 item 17: where the key is documented, it says that it imports and runs
        # Python code (ldr-eval --system X=their.yml runs their code), as fairseq's --user-dir.
        key = [k for k in config_keys.KEYS if k.name == "user_modules"][0]
        for text in (key.help, config_keys.markdown_reference()):
            self.assertIn("their code runs with your rights", text)
            self.assertIn("ldr-eval --system NAME=their.yml", text)
        with open(os.path.join(ROOT, "docs", "training.md"), encoding="utf-8") as f:
            self.assertIn("`user_modules` imports and runs Python code", f.read())


class LdrMainConfigTest(helpers.SharedDirTestCase):
    def test_nan_alpha_is_refused_before_anything_is_written(self):
        model_dir = os.path.join(self.dir, "model")
        config = helpers.corpora_config(self.dir, model_dir)
        config["train"]["domain_sampling_alpha"] = math.nan
        path = os.path.join(self.dir, "nan.yml")
        with open(path, "w") as f:
            yaml.safe_dump(config, f)
        helpers.assert_cli_error(
            self,
            ldr_main.main,
            ["--model", "model_defs/small/ldr_transformer.py", "--config", path, "train"],
            "^train: domain_sampling_alpha must be a finite number, got nan$",
        )
        self.assertFalse(os.path.exists(model_dir))

    def test_stock_model_initialize_checks_data_and_params(self):
        model = helpers.FAMILIES["mixed_transformer"]()
        with self.assertRaisesRegex(UserError, "^params: maximum_source_length must be an int"):
            model.initialize({"source_vocabulary": "x"}, params={"maximum_source_length": "long"})


if __name__ == "__main__":
    tf.test.main()
