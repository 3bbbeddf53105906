"""Importing the package has no side effect; :func:`ldr_opennmt.hooks.install` installs the
hooks, once, and every multi-domain model calls it (issue 46 item 3)."""

import ast
import glob
import os
import subprocess
import sys
import textwrap
import unittest

import opennmt
import tensorflow as tf
import yaml

from ldr_opennmt import hooks

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: What a process reports of the hooks: whether sys.excepthook is still Python's, and the
#: OpenNMT-tf names the package patches, marked by its wrappers.
REPORT = """
def report():
    import opennmt
    from opennmt import tokenizers
    from opennmt.utils import checkpoint

    marked = lambda f, mark="_ldr_opennmt": bool(getattr(f, mark, False))
    return {
        "excepthook": sys.excepthook is sys.__excepthook__,
        "train_lock": marked(opennmt.Runner.train),
        "train_record": marked(opennmt.Runner.train, "_ldr_opennmt_record"),
        "tokenizer_paths": marked(tokenizers.make_tokenizer),
        "checkpoint_check": marked(checkpoint.Checkpoint.restore),
    }
"""
UNPATCHED = {
    "excepthook": True,
    "train_lock": False,
    "train_record": False,
    "tokenizer_paths": False,
    "checkpoint_check": False,
}
PATCHED = {key: not value for key, value in UNPATCHED.items()}


def _run(code):
    """Runs :obj:`code` in a fresh interpreter; returns the repr it prints last, evaluated."""
    result = subprocess.run(
        [sys.executable, "-c", "import sys\n" + REPORT + textwrap.dedent(code)],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONWARNINGS="ignore"),
    )
    if result.returncode != 0:
        raise AssertionError(result.stderr[-3000:])
    return eval(result.stdout.strip().splitlines()[-1])  # noqa: S307 - our own output.


class ImportTest(unittest.TestCase):
    def test_the_registry_imports_no_tensorflow_and_patches_nothing(self):
        loaded, hook = _run("""
            hook = sys.excepthook
            import ldr_opennmt
            import ldr_opennmt.registry
            import ldr_opennmt.errors
            print((sorted(m for m in sys.modules if m.split(".")[0] in
                          ("tensorflow", "opennmt", "keras", "ldr_opennmt")),
                   sys.excepthook is hook))
            """)
        self.assertEqual(
            loaded,
            [
                "ldr_opennmt",
                "ldr_opennmt.errors",
                "ldr_opennmt.family_table",
                "ldr_opennmt.registry",
            ],
        )
        self.assertTrue(hook)

    def test_importing_every_module_patches_nothing_a_model_installs_once(self):
        before, after_import, after_model, again = _run("""
            import importlib, pkgutil
            before = report()
            import ldr_opennmt
            for module in pkgutil.walk_packages(ldr_opennmt.__path__, "ldr_opennmt."):
                importlib.import_module(module.name)
            from ldr_opennmt import hooks, models
            after_import = (report(), hooks.installed())
            models.ldr_transformer(num_layers=1, num_units=16, num_heads=2, ffn_inner_dim=32)
            installed = (report(), hooks.installed())
            import opennmt
            train = opennmt.Runner.train
            hooks.install()
            models.mixed_transformer(num_layers=1, num_units=16, num_heads=2, ffn_inner_dim=32)
            print((before, after_import, installed, opennmt.Runner.train is train))
            """)
        self.assertEqual(before, UNPATCHED)
        self.assertEqual(after_import, (UNPATCHED, False))
        # A model's construction installed every hook (what stock onmt-main --model needs).
        self.assertEqual(after_model, (PATCHED, True))
        self.assertTrue(again)  # Once: a second call wraps nothing again.

    def test_a_model_definition_installs_them_on_import(self):
        # What stock onmt-main does before it copies the file: import it, without model().
        report, installed = _run("""
            import runpy
            runpy.run_path("model_defs/small/mixed_transformer.py")
            from ldr_opennmt import hooks
            print((report(), hooks.installed()))
            """)
        self.assertEqual((report, installed), (PATCHED, True))


class ModelDefinitionsTest(unittest.TestCase):
    def test_every_model_definition_installs_the_hooks_first(self):
        paths = glob.glob(os.path.join(ROOT, "model_defs", "**", "*.py"), recursive=True)
        paths += glob.glob(os.path.join(ROOT, "examples", "*", "*.py"))
        self.assertGreater(len(paths), 40)
        for path in paths:
            with open(path, encoding="utf-8") as f:
                tree = ast.parse(f.read(), path)
            calls = [
                node.value.func
                for node in tree.body
                if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)
            ]
            names = [
                "%s.%s" % (call.value.id, call.attr)
                for call in calls
                if isinstance(call, ast.Attribute) and isinstance(call.value, ast.Name)
            ]
            self.assertIn("hooks.install", names, path)
            # Before the definitions: the top level calls it before any def or class.
            first_def = next(
                i
                for i, node in enumerate(tree.body)
                if isinstance(node, (ast.FunctionDef, ast.ClassDef))
            )
            install = next(
                i
                for i, node in enumerate(tree.body)
                if isinstance(node, ast.Expr) and ast.unparse(node) == "hooks.install()"
            )
            self.assertLess(install, first_def, path)


class TokenizerPathsTest(tf.test.TestCase):
    """A tokenization file names its BPE model relative to itself (issue 47 item 1)."""

    def setUp(self):
        super().setUp()
        self.dir = self.get_temp_dir()
        self.corpus = os.path.join(self.dir, "corpus")
        os.makedirs(self.corpus)
        with open(os.path.join(self.corpus, "bpe.en"), "w") as f:
            f.write("#version: 0.2\nt h\n")

    def _config(self, params, name="tokenizer.en.yml"):
        path = os.path.join(self.corpus, name)
        with open(path, "w") as f:
            yaml.safe_dump(params, f)
        return path

    def test_relative_and_moved_paths_are_found_beside_the_file(self):
        bpe = os.path.join(self.corpus, "bpe.en")
        for value in ("bpe.en", "/gone/corpus/bpe.en"):
            path = self._config({"type": "OpenNMTTokenizer", "params": {"bpe_model_path": value}})
            resolved = hooks.resolve_tokenizer_files(path)
            self.assertEqual(resolved["params"]["bpe_model_path"], bpe, value)
            # What the inputters call (installed by the package's hooks).
            hooks.install()
            tokenizer = opennmt.tokenizers.make_tokenizer(path)
            self.assertEqual(tokenizer.config["bpe_model_path"], bpe)
        # Without a type: the options at the top level.
        path = self._config({"mode": "aggressive", "bpe_model_path": "bpe.en"}, "flat.yml")
        self.assertEqual(hooks.resolve_tokenizer_files(path)["bpe_model_path"], bpe)

    def test_other_configurations_are_left_as_they_are(self):
        inline = '{"mode": "aggressive"}'
        self.assertEqual(hooks.resolve_tokenizer_files(inline), inline)
        self.assertIsNone(hooks.resolve_tokenizer_files(None))
        options = {"bpe_model_path": "bpe.en"}
        self.assertIs(hooks.resolve_tokenizer_files(options), options)
        # An absolute path that exists, and a file found nowhere (OpenNMT-tf reports it).
        bpe = os.path.join(self.corpus, "bpe.en")
        for value in (bpe, "missing.bpe"):
            path = self._config({"bpe_model_path": value})
            self.assertEqual(hooks.resolve_tokenizer_files(path), path)


if __name__ == "__main__":
    unittest.main()
