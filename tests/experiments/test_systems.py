"""What the experiments know of each family: model definition files and benchmark rows."""

import functools
import glob
import os
import runpy
import textwrap

import tensorflow as tf
from parameterized import parameterized

from ldr_experiments import systems
from ldr_opennmt import registry

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PACKAGE_FAMILIES = [(f.name,) for f in registry.families() if f.module.startswith("ldr_opennmt")]
SIZE = {"num_layers": 1, "num_units": 16, "num_heads": 2, "ffn_inner_dim": 32}


def _user_module(directory, name, rows):
    """Writes and loads a user module registering :obj:`name` (with :obj:`rows` as its
    ``BENCHMARK_ROWS`` unless ``...``); returns its family."""
    path = os.path.join(directory, "%s.py" % name)
    declared = "" if rows is Ellipsis else "BENCHMARK_ROWS = %r\n" % {name: rows}
    with open(path, "w", encoding="utf-8") as f:
        f.write(textwrap.dedent("""\
                from ldr_opennmt import registry
                %s

                @registry.register_family(%r, title="T", paper="P", summary="S.")
                def builder(num_layers=6, num_units=512, num_heads=8, ffn_inner_dim=2048):
                    return None
                """) % (declared, name))
    registry.load_user_module(path)
    return registry.get(name)


class ModelDefinitionsTest(tf.test.TestCase):
    def test_every_package_family_has_its_files(self):
        self.assertCountEqual(systems.MODEL_DEFS, [name for name, in PACKAGE_FAMILIES])

    def test_every_model_definition_is_a_preset_of_a_family(self):
        # model_defs/ holds choices of a family and its presets (issue 57 item 1): no size
        # is written twice. The domain classifier is no translation family.
        paths = glob.glob(os.path.join(ROOT, "model_defs", "**", "*.py"), recursive=True)
        self.assertGreater(len(paths), 40)
        for path in paths:
            if os.path.basename(path) == "domain_classifier.py":
                continue
            model = runpy.run_path(path)["model"]
            self.assertIsInstance(model, functools.partial, path)
            families = [
                family
                for family in registry.families()
                if getattr(family.builder, "func", family.builder) is model.func
                and tuple(getattr(family.builder, "args", ())) == model.args
            ]
            self.assertLen(families, 1, path)
            # At its directory's size, but where a variant preset changes a size (a wide FFN).
            size = "small" if "/small/" in path else "paper"
            variants = [v for k, v in families[0].presets.items() if k not in ("paper", "small")]
            for key, value in families[0].preset_arguments(size).items():
                if not any(key in variant for variant in variants):
                    self.assertEqual(model.keywords[key], value, "%s: %s" % (path, key))

    @parameterized.expand(PACKAGE_FAMILIES)
    def test_model_definitions_build_the_family(self, name):
        expected = type(registry.get(name).build_tiny())
        for scale in systems.SCALES:
            path = systems.model_def(name, scale)
            self.assertTrue(os.path.isfile(os.path.join(ROOT, path)), path)
            model = runpy.run_path(os.path.join(ROOT, path))["model"]()
            self.assertIsInstance(model, expected, path)

    def test_scales(self):
        self.assertEqual(
            systems.model_def("ldr_transformer", "paper"), "model_defs/ldr_transformer.py"
        )
        # The demo's Mixed is tied (Factorized PA's stage 1), the paper's is not.
        self.assertIn("tied", systems.model_def("mixed_transformer", "small"))
        self.assertNotIn("tied", systems.model_def("mixed_transformer", "paper"))
        self.assertIsNone(systems.model_def("no_such_family", "small"))
        with self.assertRaisesRegex(ValueError, "scale must be one of paper, small"):
            systems.model_def("ldr_transformer", "huge")


class BenchmarkRowsTest(tf.test.TestCase):
    def test_package_rows_split_options_from_arguments(self):
        rows = systems.benchmark_rows(registry.get("ldr_transformer"), SIZE)
        self.assertEqual(
            rows,
            [
                ("ldr_joint", {}, {"domain_training": "joint"}),
                ("ldr_procedure1", {}, {"domain_training": "procedure1"}),
                ("ens_ldr", {}, {"ensemble": True}),
            ],
        )
        # Arguments computed from the benchmark's size.
        adapters = systems.benchmark_rows(registry.get("residual_adapters"), SIZE)
        self.assertEqual(
            adapters, [("adapters", {"adapter_dim": 64}, {"domain_training": "domains"})]
        )
        self.assertEqual(
            systems.benchmark_rows(registry.get("factorized_df"), SIZE)[0][1], {"d_inner": 9}
        )

    def test_rnn_families_are_not_benchmarked(self):
        family = registry.get("ldr_rnn")
        self.assertFalse(systems.benchmarked(family))
        self.assertEqual(systems.benchmark_rows(family, SIZE), [])

    def test_a_user_family_gets_one_row_named_after_it(self):
        family = _user_module(self.get_temp_dir(), "plain_user_family", ...)
        self.assertTrue(systems.benchmarked(family))
        self.assertEqual(systems.benchmark_rows(family, SIZE), [("plain_user_family", {}, {})])
        self.assertIsNone(systems.model_def(family.name, "small"))

    def test_a_user_module_declares_its_rows(self):
        rows = {"wide": {"num_units": 32, "num_domains": 2}}
        family = _user_module(self.get_temp_dir(), "rows_user_family", rows)
        self.assertEqual(
            systems.benchmark_rows(family, SIZE), [("wide", {"num_units": 32}, {"num_domains": 2})]
        )

    def test_a_user_module_leaves_its_family_out(self):
        family = _user_module(self.get_temp_dir(), "unmeasured_user_family", None)
        self.assertFalse(systems.benchmarked(family))
        self.assertEqual(systems.benchmark_rows(family, SIZE), [])


if __name__ == "__main__":
    tf.test.main()
