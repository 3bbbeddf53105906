"""The weights of ensembles of domain views: when ``ldr-eval`` fits them again (their
end-to-end tests are ``ldr-eval``'s, in test_evaluate.py, and the classifier's)."""

import ast
import collections
import inspect
import json
import os
import shutil
import tempfile
from unittest import mock

import numpy as np
import tensorflow as tf
import yaml

from ldr_opennmt import ensembles, stamps
from ldr_opennmt.data import corpus as corpus_lib
from ldr_opennmt.evaluation import evaluate, open_domain
from tests import corpus as tiny
from tests.evaluation.common import logged

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class ImportsTest(tf.test.TestCase):
    def test_no_import_circle_with_evaluate(self):
        # evaluate imports this module: it takes System from systems, not from evaluate.
        tree = ast.parse(inspect.getsource(open_domain))
        imported = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                imported.add(node.module)
                imported.update("%s.%s" % (node.module, alias.name) for alias in node.names)
            elif isinstance(node, ast.Import):
                imported.update(alias.name for alias in node.names)
        self.assertNotIn("ldr_opennmt.evaluation.evaluate", imported)
        self.assertIn("ldr_opennmt.evaluation.systems", imported)


def _write_lines(path, lines):
    with open(path, "w", encoding="utf-8") as f:
        f.write("".join(line + "\n" for line in lines))


class LearnedWeightsReuseTest(tf.test.TestCase):
    """When ``ldr-eval`` fits the ens-learned weights again, on a system that was never
    trained (the checkpoint, the score run and the translation are faked)."""

    def setUp(self):
        super().setUp()
        self.root = tempfile.mkdtemp(dir=self.get_temp_dir())
        pairs = collections.OrderedDict((d, tiny.make_pairs(d, 20, seed=2)) for d in tiny.DOMAINS)
        self.corpus = os.path.join(self.root, "corpus")
        corpus_lib.build(
            pairs, self.corpus, dev_size=2, test_size=4, bpe_merges=10, log=lambda _: None
        )
        self.model_dir = os.path.join(self.root, "ldr")
        os.makedirs(self.model_dir)
        shutil.copy(
            os.path.join(ROOT, "model_defs", "small", "ldr_transformer.py"),
            os.path.join(self.model_dir, "model_description.py"),
        )
        self.config = self._config()
        self.checkpoint = os.path.join(self.model_dir, "ckpt-1")
        _write_lines(self.checkpoint + ".index", ["weights 1"])
        _write_lines(self.checkpoint + ".data-00000-of-00001", ["values 1"])
        self.weights_file = os.path.join(self.model_dir, ensembles.WEIGHTS_FILE)

    def _config(self, **data):
        config = {
            "model_dir": self.model_dir,
            "data": dict(
                domains=tiny.DOMAINS,
                source_vocabulary=os.path.join(self.corpus, "vocab.en"),
                target_vocabulary=os.path.join(self.corpus, "vocab.fr"),
                **data,
            ),
        }
        path = os.path.join(self.root, "ldr.%d.yml" % len(os.listdir(self.root)))
        with open(path, "w") as f:
            yaml.safe_dump(config, f)
        return path

    def _evaluate(self, config=None):
        """``ldr-eval`` in mode ens-learned; returns the number of fits and the log."""
        fits = []

        def log_probs(system, sources, targets, *args):
            fits.append(len(sources))
            views = len(tiny.DOMAINS) + 1
            return np.log(np.tile(np.arange(1, views + 1) / (views * (views + 1) / 2), (9, 1)))

        def translate(system, source_file, label_file, output, listener=None):
            with open(source_file) as f:
                _write_lines(output, f.read().splitlines())

        system = evaluate.System("LDR", [config or self.config])
        out = os.path.join(self.root, "eval")
        with mock.patch.object(
            evaluate.System, "checkpoint", autospec=True, return_value=self.checkpoint
        ), mock.patch.object(
            evaluate.System, "translate", autospec=True, side_effect=translate
        ), mock.patch.object(
            open_domain, "view_token_log_probs", side_effect=log_probs
        ), logged() as logs:
            evaluate.evaluate(self.corpus, [system], out, modes=("ens-learned",), cache_only=True)
        return len(fits), "\n".join(logs)

    def test_weights_are_fitted_again_for_a_model_retrained_at_the_same_path(self):
        fits, logs = self._evaluate()
        self.assertEqual(fits, 1)
        self.assertIn("Fitting the ens-learned weights of LDR: no fitted weights", logs)
        with open(self.weights_file) as f:
            record = json.load(f)
        self.assertEqual(record["inputs"]["checkpoint"], stamps.checkpoint_digest(self.checkpoint))
        self.assertEqual(record["views"], tiny.DOMAINS + ["generic"])
        self.assertEqual(record["checkpoint"], self.checkpoint)
        # Unchanged: the weights are reused.
        fits, logs = self._evaluate()
        self.assertEqual(fits, 0)
        self.assertNotIn("Fitting", logs)
        # Other values in the checkpoint's data shard, at the same path, with the same
        # .index: the weights used to be reused by the checkpoint's path alone.
        _write_lines(self.checkpoint + ".data-00000-of-00001", ["values 2"])
        fits, logs = self._evaluate()
        self.assertEqual(fits, 1)
        self.assertIn("Fitting the ens-learned weights of LDR: checkpoint differs", logs)
        self.assertEqual(self._evaluate()[0], 0)
        # Other dev data.
        dev = os.path.join(self.corpus, "dev.religious.fr")
        with open(dev) as f:
            lines = f.read().splitlines()
        _write_lines(dev, lines[:1] + ["une autre phrase"] + lines[2:])
        fits, logs = self._evaluate()
        self.assertEqual(fits, 1)
        self.assertIn("Fitting the ens-learned weights of LDR: dev differs", logs)
        # Weights of the former format (no stamp): fitted again, once.
        del record["inputs"], record["format"]
        with open(self.weights_file, "w") as f:
            json.dump(record, f)
        fits, logs = self._evaluate()
        self.assertEqual(fits, 1)
        self.assertIn("records no inputs", logs)
        self.assertEqual(self._evaluate()[0], 0)

    def test_configured_weights_are_not_fitted(self):
        config = self._config(ensemble_weights=[0.25] * 4)
        decision = open_domain.learned_weights_decision(
            evaluate.System("LDR", [config]), self.corpus, "en", "fr"
        )
        self.assertTrue(decision)
        self.assertEqual(self._evaluate(config)[0], 0)
        self.assertFalse(os.path.exists(self.weights_file))


if __name__ == "__main__":
    tf.test.main()
