"""The family registry: declarations, user modules, and capabilities that hold."""

import contextlib
import dataclasses
import io
import os
import re
import sys
import textwrap
import time
from unittest import mock

import tensorflow as tf
import yaml
from opennmt import config as opennmt_config
from parameterized import parameterized

from ldr_opennmt import family_table, models, probe, registry
from ldr_opennmt.errors import UserError
from ldr_opennmt.export import folding
from ldr_opennmt.training.runner import Runner
from tests import corpus, helpers
from tests.models import test_sequence_to_sequence

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE = os.path.join(ROOT, "examples", "domain_bias", "domain_bias.py")
PACKAGE_FAMILIES = [(f.name,) for f in registry.families() if f.module.startswith("ldr_opennmt")]


def _family(name="test_family", **fields):
    declaration = dict(
        name=name,
        builder=lambda **sizes: None,
        title="Test",
        paper="nobody, 2026",
        summary="A test.",
        module="tests.test_registry",
    )
    declaration.update(fields)
    return registry.Family(**declaration)


class RegistryTest(tf.test.TestCase):
    def test_the_package_families(self):
        names = registry.names()
        for name in (
            "mixed_transformer",
            "ldr_transformer",
            "dc_transformer",
            "factorized_pa",
            "factorized_sf",
            "factorized_df",
            "mixing_transformer",
            "residual_adapters",
            "ttm_transformer",
            "ml_transformer",
            "advl_transformer",
            "ldr_rnn",
            "dc_rnn",
            "mixed_rnn",
        ):
            self.assertIn(name, names)
        self.assertEqual(registry.get("factorized_pa").stage1, "mixed_transformer")
        self.assertEqual(registry.get("residual_adapters").finetune, "base")

    @parameterized.expand(
        [
            ({"name": "bad name"}, "use letters, digits and underscores"),
            ({"title": ""}, "title is required"),
            ({"stage1": "mixed_transformer"}, "stage1 and finetune go together"),
            ({"stage1": "mixed_transformer", "finetune": "merge"}, "finetune must be one of"),
            ({"architecture": "cnn"}, "architecture must be one of"),
            ({"builder": 3}, "the builder is not callable"),
            ({"presets": {"wide": 1024}}, "preset 'wide' must map argument names to values"),
        ]
    )
    def test_invalid_declarations(self, fields, message):
        with self.assertRaisesRegex(UserError, message):
            registry.register(_family(**fields))
        self.assertNotIn("test_family", registry.names())

    def test_a_name_taken_by_another_module(self):
        with self.assertRaisesRegex(
            UserError, "family ldr_transformer is registered twice: by ldr_opennmt.models.ldr"
        ):
            registry.register(_family(name="ldr_transformer"))

    def test_a_builtin_name_with_equal_bytecode_is_refused(self):
        # A user module's one-line builder has the bytecode of the built-in's (both return
        # a call to a global): it must not replace the built-in family silently.
        path = os.path.join(self.get_temp_dir(), "impostor.py")
        with open(path, "w") as f:
            f.write(
                "from ldr_opennmt import registry\n"
                "from ldr_opennmt.models import dc_transformer\n"
                "from ldr_opennmt.models.catalog import FAMILIES\n\n"
                "declared = [f for f in FAMILIES if f.name == 'mixing_transformer'][0]\n\n"
                "@registry.register_family('mixing_transformer', title=declared.title,"
                " paper=declared.paper, summary=declared.summary)\n"
                "def mixing_transformer(**kwargs):\n"
                "    return dc_transformer(**kwargs)\n"
            )
        with self.assertRaisesRegex(
            UserError,
            "family mixing_transformer is registered twice: by ldr_opennmt.models.mixing and "
            "by .*impostor.py",
        ):
            registry.load_user_module(path)
        self.assertIs(registry.get("mixing_transformer").builder, models.mixing_transformer)

    def test_the_model_definition_copy_is_the_same_family(self):
        # onmt-main imports a model definition as its module and, later, its byte copy
        # model_dir/model_description.py: the same family, not a second registration.
        directory = self.get_temp_dir()
        with open(EXAMPLE, "rb") as f:
            source = f.read()
        model_dir = os.path.join(directory, "model")
        os.makedirs(model_dir)
        with open(os.path.join(model_dir, "model_description.py"), "wb") as f:
            f.write(source)
        registry.load_user_module(EXAMPLE)
        self.assertIn("domain_bias", registry.get("domain_bias_transformer").module)
        model = opennmt_config.load_model(model_dir)
        self.assertEqual(type(model).__name__, "DomainBiasTransformer")
        self.assertEqual(registry.get("domain_bias_transformer").module, "model_description")
        # A copy that differs (an edited definition) is another family under the same name.
        with open(os.path.join(model_dir, "model_description.py"), "wb") as f:
            f.write(source + b"\n# edited\n")
        with self.assertRaisesRegex(UserError, "domain_bias_transformer is registered twice"):
            opennmt_config.load_model(model_dir)

    def test_the_same_builder_object_registers_again(self):
        family = registry.get("ldr_transformer")
        registry.register(dataclasses.replace(family, module="tests.test_registry"))
        self.assertEqual(registry.get("ldr_transformer").module, "tests.test_registry")
        with self.assertRaisesRegex(UserError, "registered twice"):
            registry.register(dataclasses.replace(family, title="Another title"))
        registry.register(family)

    @parameterized.expand(
        [
            ("raise RuntimeError('no GPU here')\n", "RuntimeError: no GPU here"),
            ("import sys\nsys.exit(3)\n", r"it called sys.exit\(3\) while being imported"),
            ("raise ValueError('first\\nsecond')\n", "ValueError: first$"),
        ]
    )
    def test_a_failing_user_module_is_one_line(self, code, message):
        # By file and by module name (importable from sys.path): one line naming it.
        directory = self.get_temp_dir()
        name = "failing_module_%d" % abs(hash(code))
        path = os.path.join(directory, name + ".py")
        with open(path, "w") as f:
            f.write(code)
        with self.assertRaisesRegex(UserError, "^user module .*%s.py: %s" % (name, message)):
            registry.load_user_module(path)
        sys.path.insert(0, directory)
        try:
            with self.assertRaisesRegex(UserError, "^user module %s: %s" % (name, message)):
                registry.load_user_module(name)
        finally:
            sys.path.remove(directory)
        self.assertNotIn(name, sys.modules)

    def test_families_come_from_the_installed_entry_points(self):
        # The package's own: setup.py's entry point names the catalog (issue 57).
        own = registry.entry_points()[0]
        self.assertEqual(own.name, "ldr_opennmt")
        self.assertEqual(own.value, "ldr_opennmt.models.catalog")
        # An installed package of a user's (its metadata on sys.path, as pip writes it) names
        # its module under the group: the registry loads it after the package's own.
        site = self.get_temp_dir()
        info = os.path.join(site, "my_methods-0.1.dist-info")
        os.makedirs(info, exist_ok=True)
        with open(os.path.join(info, "METADATA"), "w") as f:
            f.write("Metadata-Version: 2.1\nName: my-methods\nVersion: 0.1\n")
        with open(os.path.join(info, "entry_points.txt"), "w") as f:
            f.write("[ldr_opennmt.families]\nmy_methods = my_methods_of_tests\n")
            f.write("broken = my_missing_methods_of_tests\n")
        with open(os.path.join(site, "my_methods_of_tests.py"), "w") as f:
            f.write(
                "from ldr_opennmt import registry\n"
                "from ldr_opennmt.models import dc_transformer\n\n"
                "@registry.register_family('plugin_transformer', title='Plugin',"
                " paper='nobody, 2026', summary='An installed family.')\n"
                "def plugin_transformer(**sizes):\n"
                "    return dc_transformer(**sizes)\n"
            )
        families = dict(registry._FAMILIES)
        sys.path.insert(0, site)
        try:
            with mock.patch.object(registry, "_LOADED", []):
                # One of its entry points names a module that is not there: one line.
                with self.assertRaisesRegex(
                    UserError,
                    r"^the families of entry point 'broken' \(my_missing_methods_of_tests,"
                    r" group 'ldr_opennmt.families'\): No module named"
                    r" 'my_missing_methods_of_tests'$",
                ):
                    registry.names()
            # Its code fails as a user module's does: one line, a sys.exit included.
            exiting = registry.metadata.EntryPoint(
                "exiting", "my_exiting_methods_of_tests", registry.FAMILIES_GROUP
            )
            with open(os.path.join(site, "my_exiting_methods_of_tests.py"), "w") as f:
                f.write("import sys\nsys.exit(3)\n")
            with mock.patch.object(registry, "_LOADED", []), mock.patch.object(
                registry, "entry_points", return_value=[own, exiting]
            ):
                with self.assertRaisesRegex(
                    UserError,
                    r"^the families of entry point 'exiting' \(my_exiting_methods_of_tests,"
                    r" group 'ldr_opennmt.families'\): it called sys.exit\(3\) while being"
                    r" imported",
                ):
                    registry.names()
                self.assertEqual(registry._LOADED, [])  # Asked again, it tries again.
            names = [point.name for point in registry.entry_points()]
            self.assertEqual(names[0], "ldr_opennmt")
            self.assertCountEqual(names[1:], ["my_methods", "broken"])
            self.assertEqual(registry.get("plugin_transformer").title, "Plugin")
            self.assertEqual(registry.names()[: len(families)], list(families))
        finally:
            sys.path.remove(site)
            sys.modules.pop("my_methods_of_tests", None)
            sys.modules.pop("my_exiting_methods_of_tests", None)
            registry._FAMILIES.clear()
            registry._FAMILIES.update(families)
            family_table._DIGESTS.pop("plugin_transformer", None)
        # Installed metadata without the package's entry point (an old installation).
        with mock.patch.object(registry, "_LOADED", []), mock.patch.object(
            registry.metadata, "entry_points", return_value=[]
        ), mock.patch.object(registry.metadata, "distributions", return_value=[]):
            with self.assertRaisesRegex(UserError, "pip install -e . in its clone"):
                registry.names()
        self.assertIn("ldr_transformer", registry.names())

    def test_the_docstring_example_registers(self):
        source = registry.__doc__.split(".. code-block:: python\n")[1].split("\n(``")[0]
        namespace = {}
        exec(textwrap.dedent(source), namespace)
        self.assertIn("bias_transformer", registry.names())
        model = namespace["bias_transformer"](**registry.TINY_TRANSFORMER)
        self.assertIsInstance(model, namespace["MultiDomainTransformer"])

    def test_unknown_family(self):
        with self.assertRaisesRegex(UserError, "unknown model family 'lora' .*ldr_transformer"):
            registry.get("lora")

    def test_user_module_errors_name_the_file(self):
        with self.assertRaisesRegex(UserError, "user module nowhere.py: file not found"):
            registry.load_user_module("nowhere.py")
        path = os.path.join(self.get_temp_dir(), "broken.py")
        with open(path, "w") as f:
            f.write("def model(:\n")
        with self.assertRaisesRegex(UserError, "user module .*broken.py: SyntaxError"):
            registry.load_user_module(path)
        with self.assertRaisesRegex(UserError, "user module no_such_module_xyz"):
            registry.load_user_module("no_such_module_xyz")

    def test_build_tiny_overrides_the_family_s_tiny_values(self):
        # A key in both the family's tiny sizes and the overrides was a TypeError.
        seen = {}

        def builder(**kwargs):
            seen.update(kwargs)
            return "model"

        family = dataclasses.replace(
            registry.get("ldr_transformer"), builder=builder, tiny={"dropout": 0.3}
        )
        self.assertEqual(family.build_tiny(dropout=0.0), "model")
        self.assertEqual(seen["dropout"], 0.0)
        family.build_tiny()
        self.assertEqual(seen["dropout"], 0.3)

    def test_a_directory_is_not_file_not_found(self):
        # Issue 56 item 5: a directory (or a FIFO) was reported as "file not found".
        directory = os.path.join(self.get_temp_dir(), "my_family")
        os.makedirs(directory, exist_ok=True)
        with self.assertRaisesRegex(
            UserError,
            r"^user module %s: a directory, not a Python file: give the \.py file in it that"
            r" registers the family \(e\.g\. %s/family\.py\)" % (directory, directory),
        ):
            registry.load_user_module(directory)
        fifo = os.path.join(self.get_temp_dir(), "fifo.py")
        if not os.path.exists(fifo):
            os.mkfifo(fifo)
        with self.assertRaisesRegex(UserError, "^user module %s: not a regular file$" % fifo):
            registry.load_user_module(fifo)

    def test_an_import_that_hangs_is_named_meanwhile(self):
        # Issue 56 item 5: a module that hangs at import hung check-family without a line.
        path = os.path.join(self.get_temp_dir(), "slow_module.py")
        with open(path, "w") as f:
            f.write("import time\ntime.sleep(1.0)\n")
        stderr = io.StringIO()
        with mock.patch.object(registry, "SLOW_IMPORT_S", 0.2), contextlib.redirect_stderr(stderr):
            registry.load_user_module(path)
        self.assertRegex(
            stderr.getvalue(),
            r"^ldr-opennmt: note: user module %s is still being imported after 0 s \(importing"
            r" only defines and registers: does its code wait for something\? Ctrl-C stops the"
            r" command\)\n$" % re.escape(path),
        )
        # A quick import says nothing (the note is cancelled when the import ends).
        quick = os.path.join(self.get_temp_dir(), "quick_module.py")
        with open(quick, "w") as f:
            f.write("X = 1\n")
        stderr = io.StringIO()
        with mock.patch.object(registry, "SLOW_IMPORT_S", 0.3), contextlib.redirect_stderr(stderr):
            registry.load_user_module(quick)
            time.sleep(0.5)
        self.assertEqual(stderr.getvalue(), "")

    def test_configured_modules(self):
        path = os.path.join(self.get_temp_dir(), "configured.py")
        with open(path, "w") as f:
            f.write(
                "from ldr_opennmt import registry, models\n"
                "registry.register_family('configured_family', title='C', paper='p',"
                " summary='s')(models.mixed_transformer)\n"
            )
        registered = registry.load_configured_modules({"user_modules": [path]})
        self.assertEqual(registered, ["configured_family"])
        self.assertEqual(registry.get("configured_family").module, path)
        # Loaded once: a second configuration naming it registers nothing new.
        self.assertEqual(registry.load_configured_modules({"user_modules": path}), [])

    def test_a_run_configuration_names_the_module(self):
        # The configuration key route: the model definition only names the family, and
        # the user module registering it is loaded with the configuration, before the
        # model is built (ldr-main, ldr-eval and every command reading a configuration).
        directory = self.get_temp_dir()
        paths = corpus.write_corpus(os.path.join(directory, "data"), count=4)
        config_path = os.path.join(directory, "run.yml")
        with open(config_path, "w") as f:
            yaml.safe_dump(
                {
                    "user_modules": [os.path.join(ROOT, "examples/domain_bias/domain_bias.py")],
                    "model_dir": os.path.join(directory, "model"),
                    "data": corpus.data_config(paths),
                },
                f,
            )
        model_file = os.path.join(directory, "model.py")
        with open(model_file, "w") as f:
            f.write(
                "from ldr_opennmt import registry\n\n\ndef model():\n"
                "    return registry.get('domain_bias_transformer').build_tiny()\n"
            )
        runner = Runner.from_files([config_path], model_file=model_file)
        self.assertEqual(type(runner.model).__name__, "DomainBiasTransformer")
        # A second file of the run (the rightmost wins) gives a value of the wrong type (in
        # the same file, a repeated key is refused by the loader itself).
        other = os.path.join(directory, "other.yml")
        with open(other, "w") as f:
            f.write("user_modules: 3\n")
        with self.assertRaisesRegex(UserError, "user_modules must be a list or str, got 3"):
            Runner.from_files([config_path, other], model_file=model_file)

    def test_a_family_holds_no_repository_file(self):
        # A family's presets and benchmark rows are declared with it (issue 57 item 1); the
        # repository's files are the experiments' (ldr_experiments/systems.py), the Markdown
        # listing the command's (ldr_opennmt/cli/families.py).
        fields = {field.name for field in dataclasses.fields(registry.Family)}
        self.assertLessEqual({"presets", "benchmark", "tiny", "parameter_count"}, fields)
        self.assertFalse(fields & {"model_def", "small_def"})
        for name in ("BENCHMARK_OPTIONS", "describe"):
            self.assertFalse(hasattr(registry, name), name)

    def test_the_probe_s_names_say_where_they_moved(self):
        with self.assertRaisesRegex(
            AttributeError, r"^ldr_opennmt.registry.capabilities moved to ldr_opennmt.probe"
        ):
            registry.capabilities  # noqa: B018 - the attribute access is the test.
        with self.assertRaisesRegex(AttributeError, "has no attribute 'no_such_name'"):
            registry.no_such_name  # noqa: B018
        for name in registry.MOVED_TO_PROBE:
            self.assertTrue(hasattr(probe, name), name)

    def test_presets_apply_in_order_over_the_size_table(self):
        ldr = registry.get("ldr_transformer")
        small = registry.SIZES["transformer"]["small"]
        self.assertEqual(
            ldr.preset_arguments("small", "tied"),
            dict(small, domain_region_size=4, share_target_embeddings=True),
        )
        # The paper's size is the builders' defaults, written out.
        self.assertEqual(ldr.preset_arguments("paper")["num_units"], 512)
        # A family's own value at a size: Factorized DF's d_inner.
        self.assertEqual(registry.get("factorized_df").preset_arguments("paper")["d_inner"], 280)
        self.assertEqual(registry.get("factorized_df").preset_arguments("small")["d_inner"], 64)
        self.assertEqual(
            registry.get("ldr_rnn").preset_arguments("small"),
            {"embedding_size": 64, "hidden_size": 128, "domain_region_size": 4},
        )
        with self.assertRaisesRegex(
            UserError, r"^family dc_transformer has no preset 'tied' \(its presets: paper, small\)$"
        ):
            registry.preset("dc_transformer", "small", "tied")

    def test_a_preset_builds_what_its_arguments_build(self):
        builder = registry.preset("ldr_transformer", "small", "tied", num_layers=1)
        self.assertEqual(builder.keywords["num_layers"], 1)
        self.assertEqual(builder.keywords["share_target_embeddings"], True)
        model = builder()
        self.assertIsInstance(model, type(registry.get("ldr_transformer").build_tiny()))
        self.assertEqual(model.features_inputter.word_inputter.domain_region_size, 4)

    def test_every_family_has_the_sizes(self):
        for family in registry.families():
            for size in ("paper", "small"):
                self.assertIn(size, family.preset_names(), family.name)
                family.preset_arguments(size)

    def test_capabilities_are_checked_not_declared(self):
        # The guide's family states no CTranslate2 refusal, but its output bias does not
        # fold: the listing says "no" with the fold check's reason (it said "one model per
        # domain"), ensembles work, and the default training mode is shown.
        registry.register(
            _family(
                name="guide_family",
                builder=lambda **sizes: test_sequence_to_sequence._GuideTransformer(**sizes),
            )
        )
        caps = probe.capabilities("guide_family")
        self.assertRegex(
            caps.ctranslate2,
            "_GuideTransformer has domain-specific parameters in .*bias_dense, which cannot be "
            "folded into a plain Transformer: .*serve the SavedModel",
        )
        self.assertIsNone(caps.ensembles)
        self.assertEqual(caps.default_domain_training, "procedure1")


class FamilyDeclarationTest(tf.test.TestCase):
    """What a family's registration and its class say must hold for the real model."""

    @parameterized.expand(PACKAGE_FAMILIES)
    def test_capabilities_hold(self, name):
        caps = probe.capabilities(name)
        model, _ = helpers.build_model(self, name)
        # CTranslate2: a family said to fold passes the fold's checks; one refused fails.
        if caps.ctranslate2 is None:
            folding.check_foldable(model)
        else:
            with self.assertRaises(UserError):
                folding.check_foldable(model)
        self.assertEqual(caps.ensembles, model.ensemble_refusal_reason())
        self.assertEqual(caps.domain_parameters, bool(model.domain_layers()))
        # A label is read exactly when the family says it is needed.
        self.assertEqual(caps.labels != probe.LABEL_NEEDED, bool(model.ignored_labels_reason()))


if __name__ == "__main__":
    tf.test.main()
