"""The systems ldr-eval evaluates: their file names, names and domains, and whether their
labels change their translations."""

import os
import types

import tensorflow as tf
import yaml
from parameterized import parameterized

from ldr_opennmt.errors import UserError
from ldr_opennmt.evaluation import systems
from tests import corpus as tiny

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _system(name, domains=None):
    """A stand-in for a :class:`systems.System`: its names and configuration."""
    return types.SimpleNamespace(
        name=name,
        file_name=systems.system_file_name(name),
        config={"data": {"domains": domains}},
    )


class NamesTest(tf.test.TestCase):
    def test_file_names(self):
        self.assertEqual(systems.system_file_name("Factorized PA"), "Factorized_PA")
        self.assertEqual(
            systems.system_file_name("Transformer (no legal)"), "Transformer_no_legal_"
        )
        self.assertEqual(systems.system_file_name("LDR-2.x_y"), "LDR-2.x_y")

    @parameterized.expand(
        [("parent", "../x"), ("separator", "a/b"), ("hidden", ".x"), ("blank", " ")]
    )
    def test_path_like_names_are_refused(self, _, name):
        with self.assertRaisesRegex(UserError, "^--system: invalid system name"):
            systems.system_file_name(name, "--system")

    def test_names_and_domains_are_checked(self):
        systems.check_system_names([_system("A"), _system("B")], "systems")
        with self.assertRaisesRegex(UserError, "^systems: system name 'A' is given twice$"):
            systems.check_system_names([_system("A"), _system("A")], "systems")
        with self.assertRaisesRegex(UserError, "'A B' and 'A_B' would share their files"):
            systems.check_system_names([_system("A B"), _system("A_B")], "systems")
        systems.check_system_domains([_system("A", ["a"]), _system("M")], ["a", "b"], "corpus")
        with self.assertRaisesRegex(
            UserError,
            "^system A declares domain 'c' but the corpus corpus has no files for it "
            "\\(its domains: a, b\\)$",
        ):
            systems.check_system_domains([_system("A", ["a", "c"])], ["a", "b"], "corpus")


class SystemTest(tf.test.TestCase):
    def test_label_modes_only_for_models_that_translate_with_labels(self):
        paths = tiny.write_corpus(os.path.join(self.get_temp_dir(), "data"), count=10)
        expected = {"ldr_transformer": True, "mixed_transformer": False}
        expected["mixing_transformer"] = False  # Labels for training only.
        for name, uses_domains in expected.items():
            model_dir = os.path.join(self.get_temp_dir(), name)
            os.makedirs(model_dir)
            with open(os.path.join(ROOT, "model_defs", "small", name + ".py")) as f:
                definition = f.read()
            with open(os.path.join(model_dir, "model_description.py"), "w") as f:
                f.write(definition)
            config = os.path.join(self.get_temp_dir(), name + ".yml")
            with open(config, "w") as f:
                yaml.safe_dump({"model_dir": model_dir, "data": tiny.data_config(paths)}, f)
            system = systems.System(name, [config])
            self.assertEqual(system.uses_domains, uses_domains, name)


if __name__ == "__main__":
    tf.test.main()
