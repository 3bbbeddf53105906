"""Relative ``user_modules`` paths: relative to the configuration file that names them."""

import os
import re

import tensorflow as tf
import yaml

from ldr_opennmt import registry
from ldr_opennmt.errors import UserError
from ldr_opennmt.upstream import onmt_main

MODULE = (
    "from ldr_opennmt import models, registry\n"
    "registry.register_family(%r, title='T', paper='p', summary='s')(models.mixed_transformer)\n"
)


class RelativeUserModuleTest(tf.test.TestCase):
    def setUp(self):
        super().setUp()
        # The configurations live in experiment/, the commands run from elsewhere/.
        root = self.get_temp_dir()
        self.experiment = os.path.join(root, "experiment_%s" % self._testMethodName)
        self.elsewhere = os.path.join(root, "elsewhere_%s" % self._testMethodName)
        os.makedirs(os.path.join(self.experiment, "methods"))
        os.makedirs(self.elsewhere)
        cwd = os.getcwd()
        os.chdir(self.elsewhere)
        self.addCleanup(os.chdir, cwd)

    def _module(self, directory, family):
        path = os.path.join(directory, "%s.py" % family)
        with open(path, "w") as f:
            f.write(MODULE % family)
        self.addCleanup(registry._FAMILIES.pop, family, None)
        return path

    def _config(self, directory, name, **config):
        path = os.path.join(directory, name)
        with open(path, "w") as f:
            yaml.safe_dump(config, f)
        return path

    def test_relative_to_the_configuration_directory(self):
        self._module(os.path.join(self.experiment, "methods"), "relative_family")
        config = self._config(
            self.experiment, "run.yml", user_modules=["methods/relative_family.py"]
        )
        self.assertFalse(os.path.exists(os.path.join("methods", "relative_family.py")))
        onmt_main.load_run_config([config])
        self.assertEqual(registry.get("relative_family").module, "methods/relative_family.py")

    def test_relative_to_the_file_that_gives_the_key(self):
        # Two configuration files: the key comes from the second, in another directory.
        other = os.path.join(self.experiment, "methods")
        self._module(other, "second_file_family")
        first = self._config(self.experiment, "data.yml", model_dir="model")
        second = self._config(other, "run.yml", user_modules="second_file_family.py")
        config = onmt_main.load_run_config([first, second])
        self.assertEqual(config["model_dir"], "model")
        self.assertIn("second_file_family", registry.names())

    def test_base_dir_argument(self):
        self._module(self.experiment, "base_dir_family")
        registered = registry.load_configured_modules(
            {"user_modules": ["base_dir_family.py"]}, base_dir=self.experiment
        )
        self.assertEqual(registered, ["base_dir_family"])

    def test_a_path_from_the_current_directory_still_loads(self):
        self._module(self.elsewhere, "cwd_family")
        config = self._config(self.experiment, "run.yml", user_modules=["cwd_family.py"])
        onmt_main.load_run_config([config])
        self.assertIn("cwd_family", registry.names())

    def test_a_missing_file_names_the_directory(self):
        config = self._config(self.experiment, "run.yml", user_modules=["methods/none.py"])
        with self.assertRaisesRegex(
            UserError,
            "^user module methods/none.py: file not found \\(relative to %s\\)$"
            % re.escape(self.experiment),
        ):
            onmt_main.load_run_config([config])


if __name__ == "__main__":
    tf.test.main()
