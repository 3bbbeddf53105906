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
from ldr_opennmt.upstream import onmt_main
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

    @parameterized.expand(
        [
            ("params:\n  domain_trainig: summed\n", r"^run\.yml:2: params: unknown key "
             r"'domain_trainig' \(did you mean domain_training\?\): neither OpenNMT-tf nor "
             r"ldr-opennmt reads it"),
            ("train:\n  batch_size: 8\n  max_stpe: 10\n", r"^run\.yml:3: train: unknown key "
             r"'max_stpe' \(did you mean max_step\?\)"),
            ("model_dir: m\nparms:\n  beam_width: 2\n", r"^run\.yml:2: unknown key 'parms' "
             r"\(did you mean params\?\)"),
            ("data:\n  source_vocabluary: v\n", r"did you mean source_vocabulary\?"),
            ("params:\n  max_step: 10\n", r"^run\.yml:2: params: max_step is not read here "
             r"\(it would be ignored\): write it under train:$"),
            ("eval:\n  zzz_unheard_of: 1\n", r"eval: unknown key 'zzz_unheard_of': neither"),
            ("1: a\n", r"unknown key 1:"),
        ]
    )  # fmt: skip
    def test_a_key_nobody_reads_is_refused_naming_file_and_line(self, text, regex):
        # Issue 71 (2): each trained the defaults with exit 0.
        self.addCleanup(os.chdir, os.getcwd())
        os.chdir(self.get_temp_dir())
        with open("run.yml", "w") as f:
            f.write(text)
        with self.assertRaisesRegex(UserError, regex):
            config_keys.check_known(yaml.safe_load(text), "run.yml")
        with self.assertRaisesRegex(UserError, regex):  # As every command reads it.
            onmt_main.load_run_config(["run.yml"])

    def test_keys_that_opennmt_tf_or_the_package_read_pass(self):
        config_keys.check_known(
            {
                "model_dir": "m",
                "auto_config": True,
                "user_modules": [],
                "data": {
                    "source_vocabulary": "v",
                    "target_vocabulary": "v",
                    "source_1_vocabulary": "v",
                    "source_domain_vocabulary": "v",
                    "source_tokenization": {"type": "OpenNMTTokenizer"},
                    "train_corpora": {},
                    "domains": ["a"],
                    "example_weights": "w",
                },
                "params": {"optimizer": "Adam", "domain_training": "joint", "beam_width": 4},
                "train": {"max_step": 1, "domain_sampling_alpha": 0.5, "pad_to_bucket_boundary": 1},
                "eval": {"early_stopping": {"metric": "bleu"}, "scorers": "bleu"},
                "infer": {"n_best": 1, "domain_posterior": True},
                "score": {"with_token_level": True},
                "finetune": {"steps": 1},
            }
        )

    def test_a_user_module_declares_its_keys(self):
        with self.assertRaisesRegex(UserError, "unknown key 'my_family_depth'"):
            config_keys.check_known({"params": {"my_family_depth": 3}})
        config_keys.declare("params", "my_family_depth")
        self.addCleanup(config_keys._DECLARED.discard, ("params", "my_family_depth"))
        config_keys.check_known({"params": {"my_family_depth": 3}})

    def test_the_shipped_configurations_hold_only_known_keys(self):
        for name in sorted(os.listdir(os.path.join(ROOT, "data_configs"))):
            path = os.path.join(ROOT, "data_configs", name)
            with open(path) as f:
                config_keys.check_known(yaml.safe_load(f), path)

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
