"""ldr-eval end to end on a tiny corpus and two tiny systems trained with onmt-main."""

import collections
import json
import os
import subprocess
import sys
from unittest import mock

import pytest
import tensorflow as tf
import yaml

from ldr_opennmt.cli import evaluate as cli
from ldr_opennmt.data import corpus as corpus_lib
from ldr_opennmt.errors import UserError
from ldr_opennmt.evaluation import evaluate
from tests import corpus as tiny
from tests import helpers

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _train(directory, name, model_def, corpus_dir):
    config = {
        "model_dir": os.path.join(directory, name),
        "data": {
            "domains": tiny.DOMAINS,
            "train_features_file": [
                os.path.join(corpus_dir, "train.en"),
                os.path.join(corpus_dir, "train.domain"),
            ],
            "train_labels_file": os.path.join(corpus_dir, "train.fr"),
            "source_vocabulary": os.path.join(corpus_dir, "vocab.en"),
            "target_vocabulary": os.path.join(corpus_dir, "vocab.fr"),
        },
        "params": {
            "optimizer": "Adam",
            "learning_rate": 0.003,
            "decay_type": None,
            "beam_width": 2,
        },
        "train": {
            "batch_size": 16,
            "batch_type": "examples",
            "effective_batch_size": None,
            "max_step": 10,
            "average_last_checkpoints": 0,
        },
        "infer": {"batch_size": 16},
    }
    path = os.path.join(directory, "%s.yml" % name)
    with open(path, "w") as f:
        yaml.safe_dump(config, f)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONWARNINGS="ignore")
    onmt_main = os.path.join(os.path.dirname(sys.executable), "onmt-main")
    result = subprocess.run(
        [onmt_main, "--model", model_def, "--config", path, "--auto_config", "train"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return path


@pytest.mark.e2e
class EvaluateTest(helpers.SharedDirTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        pairs = collections.OrderedDict((d, tiny.make_pairs(d, 50, seed=2)) for d in tiny.DOMAINS)
        cls.corpus = os.path.join(cls.dir, "corpus")
        corpus_lib.build(
            pairs, cls.corpus, dev_size=3, test_size=6, bpe_merges=30, log=lambda _: None
        )
        cls.mixed = _train(cls.dir, "mixed", "model_defs/small/mixed_transformer.py", cls.corpus)
        cls.ldr = _train(cls.dir, "ldr", "model_defs/small/ldr_transformer.py", cls.corpus)

    def test_labels_for(self):
        domains = ["a", "b", "c"]
        self.assertEqual(evaluate.labels_for("oracle", "b", domains, 2), ["b", "b"])
        self.assertEqual(evaluate.labels_for("generic", "b", domains, 1), ["generic"])
        self.assertEqual(evaluate.labels_for("wrong", "c", domains, 1), ["a"])
        with self.assertRaisesRegex(UserError, "needs predicted label files"):
            evaluate.labels_for("pred", "a", domains, 1)

    def test_cli_table(self):
        out = os.path.join(self.dir, "eval")
        code = cli.main(
            [
                "--corpus",
                self.corpus,
                "--out",
                out,
                "--baseline",
                "Mixed",
                "--system",
                "Mixed=%s" % self.mixed,
                "--system",
                "LDR=%s" % self.ldr,
                "--bootstrap-samples",
                "50",
            ]
        )
        self.assertEqual(code, 0)
        with open(os.path.join(out, "table.md")) as f:
            table = f.read()
        rows = [line.split("|")[1].strip() for line in table.splitlines() if line.startswith("| ")]
        self.assertEqual(
            rows[:5], ["system", "Mixed", "LDR (oracle)", "LDR (generic)", "LDR (wrong)"]
        )
        self.assertIn("nrefs:1", table)
        self.assertTrue(os.path.exists(os.path.join(out, "bleu.png")))
        for name in ("Mixed.oracle.fr", "LDR.oracle.fr", "LDR.generic.fr", "LDR.wrong.fr"):
            with open(os.path.join(out, name)) as f:
                self.assertLen(f.read().splitlines(), 18)
        self.assertFalse(os.path.exists(os.path.join(out, "Mixed.generic.fr")))

        # Examples: source, reference and each row's detokenized translation of the same line.
        with open(os.path.join(out, "scores.json")) as f:
            results = json.load(f)
        rows = ["Mixed", "LDR (wrong)"]
        text = evaluate.examples(self.corpus, results, per_domain=1, rows=rows, min_words=1)
        tokenizer = corpus_lib.load_tokenizer(self.corpus, "fr")
        with open(os.path.join(out, "LDR.wrong.fr")) as f:
            software_first = f.read().splitlines()[12]  # After 6 medical and 6 religious.
        with open(os.path.join(self.corpus, "raw", "test.software.fr")) as f:
            reference = f.read().splitlines()[0]
        self.assertIn("**software 1** (test line 1)", text)
        self.assertIn("| *reference* | %s |" % reference, text)
        self.assertIn("| LDR (wrong) | %s |" % tokenizer.detokenize(software_first.split()), text)
        self.assertEqual(text.count("| Mixed | "), 3)
        self.assertNotIn("LDR (oracle)", text)

        # A truncated translation (e.g. from another test set) is reported, not scored.
        with open(os.path.join(out, "LDR.wrong.fr")) as f:
            lines = f.read().splitlines()
        with open(os.path.join(out, "LDR.wrong.fr"), "w") as f:
            f.write("\n".join(lines[:5]) + "\n")
        with self.assertRaisesRegex(UserError, "LDR.wrong.fr: 5 predictions for 18 references"):
            evaluate.evaluate(self.corpus, [evaluate.System("LDR", [self.ldr])], out)

    def test_cache_only_translates_for_a_later_evaluation(self):
        out = os.path.join(self.dir, "eval_cache")
        argv = ["--corpus", self.corpus, "--out", out, "--system", "LDR=%s" % self.ldr]
        argv += ["--system-modes", "LDR=oracle,wrong"]
        self.assertEqual(cli.main(argv + ["--cache-only"]), 0)
        self.assertFalse(os.path.exists(os.path.join(out, "scores.json")))
        with open(os.path.join(out, "LDR.wrong.fr")) as f:
            self.assertLen(f.read().splitlines(), 18)
        # The evaluation that follows scores those translations without translating.
        with mock.patch.object(
            evaluate.System, "translate", side_effect=AssertionError("translated again")
        ):
            self.assertEqual(cli.main(argv), 0)
        with open(os.path.join(out, "scores.json")) as f:
            rows = [row for row, _ in json.load(f)["rows"]]
        self.assertEqual(rows, ["LDR (oracle)", "LDR (wrong)"])

    def test_predicted_labels_and_per_system_modes(self):
        out = os.path.join(self.dir, "eval_pred")
        pred_dir = os.path.join(self.dir, "pred")
        os.makedirs(pred_dir, exist_ok=True)
        info = corpus_lib.load_info(self.corpus)
        for domain in info["domains"]:
            # A classifier that knows nothing: every sentence predicted generic.
            with open(os.path.join(pred_dir, "test.%s.pred" % domain), "w") as f:
                f.write("generic\n" * 100)
        argv = ["--corpus", self.corpus, "--out", out, "--system", "LDR=%s" % self.ldr]
        argv += ["--system-modes", "LDR=generic,pred", "--pred-dir", pred_dir]
        self.assertEqual(cli.main(argv), 0)
        with open(os.path.join(out, "table.md")) as f:
            rows = [line.split("|")[1].strip() for line in f if line.startswith("| ")]
        self.assertEqual(rows[:3], ["system", "LDR (generic)", "LDR (pred)"])
        with open(os.path.join(out, "LDR.pred.fr")) as f, open(
            os.path.join(out, "LDR.generic.fr")
        ) as g:
            self.assertEqual(f.read(), g.read())
        self.assertEqual(cli.main(argv + ["--system-modes", "X=oracle"]), 2)

    def test_domain_without_files(self):
        with open(self.ldr) as f:
            config = yaml.safe_load(f)
        config["data"]["domains"] = tiny.DOMAINS + ["legal"]
        path = os.path.join(self.dir, "legal.yml")
        with open(path, "w") as f:
            yaml.safe_dump(config, f)
        with self.assertRaisesRegex(UserError, "system L declares domain 'legal' but the corpus"):
            evaluate.evaluate(self.corpus, [evaluate.System("L", [path])], self.dir)

    def test_missing_model(self):
        config = os.path.join(self.dir, "none.yml")
        with open(config, "w") as f:
            yaml.safe_dump({"model_dir": os.path.join(self.dir, "nothing")}, f)
        with self.assertRaisesRegex(UserError, "system X: no trained model"):
            evaluate.System("X", [config])
        helpers.assert_cli_error(
            self,
            cli.main,
            ["--corpus", self.corpus, "--out", self.dir, "--system", "X=%s" % config],
            "^system X: .*no trained model",
        )


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
            system = evaluate.System(name, [config])
            self.assertEqual(system.uses_domains, uses_domains, name)


if __name__ == "__main__":
    tf.test.main()
