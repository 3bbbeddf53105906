"""Importing the package or constructing its objects changes nothing outside it;
:func:`ldr_opennmt.upstream.install` installs the patches, once, and every model definition
calls it (issues 46 item 3 and 57 item 2)."""

import ast
import glob
import os
import subprocess
import sys
import textwrap
import unittest

import tensorflow as tf
import yaml

from ldr_opennmt import config_loader, models
from tests import corpus, helpers

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

#: What a process reports of the patches: whether sys.excepthook is still Python's, and the
#: OpenNMT-tf names the package patches, marked by its wrappers (and make_tokenizer, which it
#: no longer replaces).
REPORT = """
def report():
    import opennmt
    from opennmt import tokenizers
    from opennmt.utils import checkpoint

    marked = lambda f: bool(getattr(f, "_ldr_opennmt", False))
    return {
        "excepthook": sys.excepthook is sys.__excepthook__,
        "train_guard": marked(opennmt.Runner.train),
        "tokenizer": marked(tokenizers.make_tokenizer),
        "checkpoint_check": marked(checkpoint.Checkpoint.restore),
    }
"""
UNPATCHED = {
    "excepthook": True,
    "train_guard": False,
    "tokenizer": False,
    "checkpoint_check": False,
}
PATCHED = dict(UNPATCHED, excepthook=False, train_guard=True, checkpoint_check=True)


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
    def test_the_registry_and_the_seam_import_no_tensorflow_and_patch_nothing(self):
        loaded, hook = _run("""
            hook = sys.excepthook
            import ldr_opennmt
            import ldr_opennmt.registry
            import ldr_opennmt.errors
            import ldr_opennmt.upstream
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
                "ldr_opennmt.upstream",
            ],
        )
        self.assertTrue(hook)

    def test_importing_and_constructing_patch_nothing_install_patches_once(self):
        before, after, installed, again = _run("""
            import importlib, pkgutil
            before = report()
            import ldr_opennmt
            for module in pkgutil.walk_packages(ldr_opennmt.__path__, "ldr_opennmt."):
                importlib.import_module(module.name)
            from ldr_opennmt import models, probe, registry, upstream
            from ldr_opennmt.training.runner import Runner
            # Every family's tiny model, initialized and built (its capabilities), and a Runner.
            for family in registry.families():
                probe.capabilities(family.name)
            Runner(models.mixed_transformer(**registry.TINY_TRANSFORMER),
                   {"model_dir": "unused", "data": {}})
            after = (report(), upstream.installed())
            import opennmt
            upstream.install()
            installed = (report(), upstream.installed())
            train = opennmt.Runner.train
            upstream.install()
            print((before, after, installed, opennmt.Runner.train is train))
            """)
        self.assertEqual(before, UNPATCHED)
        self.assertEqual(after, (UNPATCHED, False))
        self.assertEqual(installed, (PATCHED, True))
        self.assertTrue(again)  # Once: a second call wraps nothing again.

    def test_a_model_definition_installs_them_on_import(self):
        # What stock onmt-main does before it copies the file: import it, without model().
        report, installed = _run("""
            import runpy
            runpy.run_path("model_defs/small/mixed_transformer.py")
            from ldr_opennmt import upstream
            print((report(), upstream.installed()))
            """)
        self.assertEqual((report, installed), (PATCHED, True))

    def test_the_old_name_of_the_seam_still_installs(self):
        # A model directory's model_description.py copied before the move imports hooks.
        report = _run("""
            from ldr_opennmt import hooks
            hooks.install()
            print(report())
            """)
        self.assertEqual(report, PATCHED)


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
            self.assertIn("upstream.install", names, path)
            # Before the definitions: the top level calls it before any def, class or
            # ``model =`` (a preset of a family: registry.preset).
            first_def = next(
                i
                for i, node in enumerate(tree.body)
                if isinstance(node, (ast.FunctionDef, ast.ClassDef))
                or (
                    isinstance(node, ast.Assign)
                    and any(getattr(t, "id", None) == "model" for t in node.targets)
                )
            )
            install = next(
                i
                for i, node in enumerate(tree.body)
                if isinstance(node, ast.Expr) and ast.unparse(node) == "upstream.install()"
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
        paths = corpus.write_corpus(os.path.join(self.dir, "data"), count=4)
        for value in ("bpe.en", "/gone/corpus/bpe.en"):
            path = self._config({"type": "OpenNMTTokenizer", "params": {"bpe_model_path": value}})
            resolved = config_loader.resolve_tokenizer_files(path)
            self.assertEqual(resolved["params"]["bpe_model_path"], bpe, value)
            # What a model of the package gives its inputters, under any command: nothing
            # installed, run from another directory.
            data = dict(corpus.data_config(paths), source_tokenization=path)
            model = models.mixed_transformer(**helpers.TINY)
            model.initialize(data)
            self.assertEqual(model.features_inputter.tokenizer.config["bpe_model_path"], bpe)
            self.assertEqual(data["source_tokenization"], path)  # The caller's config kept.
        # Without a type: the options at the top level.
        path = self._config({"mode": "aggressive", "bpe_model_path": "bpe.en"}, "flat.yml")
        self.assertEqual(config_loader.resolve_tokenizer_files(path)["bpe_model_path"], bpe)

    def test_other_configurations_are_left_as_they_are(self):
        inline = '{"mode": "aggressive"}'
        self.assertEqual(config_loader.resolve_tokenizer_files(inline), inline)
        self.assertIsNone(config_loader.resolve_tokenizer_files(None))
        options = {"bpe_model_path": "bpe.en"}
        self.assertIs(config_loader.resolve_tokenizer_files(options), options)
        # An absolute path that exists, and a file found nowhere (OpenNMT-tf reports it).
        bpe = os.path.join(self.corpus, "bpe.en")
        for value in (bpe, "missing.bpe"):
            path = self._config({"bpe_model_path": value})
            self.assertEqual(config_loader.resolve_tokenizer_files(path), path)


if __name__ == "__main__":
    unittest.main()
