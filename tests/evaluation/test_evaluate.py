"""ldr-eval end to end on a tiny corpus and two tiny systems trained with onmt-main."""

import collections
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from unittest import mock

import pytest
import tensorflow as tf
import yaml
from parameterized import parameterized

from ldr_opennmt import stamps
from ldr_opennmt.cli import evaluate as cli
from ldr_opennmt.data import corpus as corpus_lib
from ldr_opennmt.errors import UserError
from ldr_opennmt.evaluation import evaluate
from tests import corpus as tiny
from tests import helpers
from tests.evaluation.common import logged

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

    def test_ensemble_modes_fit_the_learned_weights(self):
        out = os.path.join(self.dir, "eval_ensembles")
        weights_file = os.path.join(self.dir, "ldr", "ensemble.json")
        argv = ["--corpus", self.corpus, "--out", out, "--system", "Mixed=%s" % self.mixed]
        argv += ["--system", "LDR=%s" % self.ldr, "--modes", "oracle", "ens-uniform", "ens-learned"]
        try:
            self.assertEqual(cli.main(argv), 0)
            with open(os.path.join(out, "scores.json")) as f:
                rows = [row for row, _ in json.load(f)["rows"]]
            # Mixed has no domain views: translated once, no ensemble rows.
            self.assertEqual(
                rows, ["Mixed", "LDR (oracle)", "LDR (ens-uniform)", "LDR (ens-learned)"]
            )
            with open(weights_file) as f:
                record = json.load(f)
            self.assertEqual(record["views"], tiny.DOMAINS + ["generic"])
            self.assertTrue(all(w >= 0 for w in record["weights"]))
            self.assertAllClose(sum(record["weights"]), 1.0)
            self.assertGreaterEqual(
                record["log_likelihood_per_token"], record["uniform_log_likelihood_per_token"]
            )
            # The whole dev sets (3 pairs each).
            self.assertEqual(record["sentences_per_domain"], {d: 3 for d in tiny.DOMAINS})
            # Refitted by command (same data: same weights), the file replaced.
            before = os.stat(weights_file).st_mtime_ns
            self.assertEqual(
                cli.main(["fit-ensemble", "--corpus", self.corpus, "--system", "L=%s" % self.ldr]),
                0,
            )
            with open(weights_file) as f:
                self.assertAllClose(json.load(f)["weights"], record["weights"], atol=1e-6)
            self.assertNotEqual(os.stat(weights_file).st_mtime_ns, before)
            helpers.assert_cli_error(
                self, cli.main, argv + ["--modes", "ens-soft"], "ens-soft needs a domain classifier"
            )
            helpers.assert_cli_error(
                self,
                cli.main,
                argv + ["--system-modes", "Mixed=ens-uniform"],
                "^system Mixed: .*(no domain|does not use)",
            )
        finally:
            if os.path.exists(weights_file):
                os.remove(weights_file)

    def test_labels_for(self):
        domains = ["a", "b", "c"]
        self.assertEqual(evaluate.labels_for("oracle", "b", domains, 2), ["b", "b"])
        self.assertEqual(evaluate.labels_for("generic", "b", domains, 1), ["generic"])
        self.assertEqual(evaluate.labels_for("wrong", "c", domains, 1), ["a"])
        # A test domain the system was not trained on (open domain).
        self.assertEqual(evaluate.labels_for("oracle", "d", domains, 1), ["generic"])
        self.assertEqual(evaluate.labels_for("wrong", "d", domains, 1), ["a"])
        self.assertEqual(evaluate.labels_for("ens-uniform", "d", domains, 2), ["ens-uniform"] * 2)
        soft = {"d": ["a:0.5 b:0.5", "c:1"]}
        self.assertEqual(evaluate.labels_for("ens-soft", "d", domains, 1, soft=soft), soft["d"][:1])
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
        translation = tokenizer.detokenize(software_first.split())
        # An empty translation (a tiny model may give one) is an empty cell: "| |".
        cell = " %s " % translation if translation else " "
        self.assertIn("| LDR (wrong) |%s|" % cell, text)
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
            # As many labels as the whole test set has sentences (checked).
            with open(os.path.join(self.corpus, "test.%s.en" % domain)) as f:
                count = len(f.read().splitlines())
            with open(os.path.join(pred_dir, "test.%s.pred" % domain), "w") as f:
                f.write("generic\n" * count)
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


def _write_lines(path, lines):
    with open(path, "w", encoding="utf-8") as f:
        f.write("".join(line + "\n" for line in lines))


def _read(path):
    with open(path, encoding="utf-8") as f:
        return f.read().splitlines()


class InputsAndReuseTest(tf.test.TestCase):
    """ldr-eval's input checks and translation stamps, on systems that were never trained
    (the checkpoint and the translation are faked: nothing here loads weights)."""

    def setUp(self):
        super().setUp()
        self.root = tempfile.mkdtemp(dir=self.get_temp_dir())
        pairs = collections.OrderedDict((d, tiny.make_pairs(d, 20, seed=2)) for d in tiny.DOMAINS)
        self.corpus = os.path.join(self.root, "corpus")
        corpus_lib.build(
            pairs, self.corpus, dev_size=2, test_size=4, bpe_merges=10, log=lambda _: None
        )
        self.configs = {
            "LDR": self._config("ldr", "ldr_transformer.py", beam_width=2),
            "Mixed": self._config("mixed", "mixed_transformer.py", beam_width=2),
        }
        self.checkpoint = os.path.join(self.root, "ckpt-1")
        _write_lines(self.checkpoint + ".index", ["weights 1"])
        _write_lines(self.checkpoint + ".data-00000-of-00001", ["values 1"])
        self.out = os.path.join(self.root, "eval")

    def _config(self, name, definition, **params):
        model_dir = os.path.join(self.root, name)
        os.makedirs(model_dir, exist_ok=True)
        shutil.copy(
            os.path.join(ROOT, "model_defs", "small", definition),
            os.path.join(model_dir, "model_description.py"),
        )
        config = {
            "model_dir": model_dir,
            "data": {
                "domains": tiny.DOMAINS,
                "source_vocabulary": os.path.join(self.corpus, "vocab.en"),
                "target_vocabulary": os.path.join(self.corpus, "vocab.fr"),
            },
            "params": params,
        }
        path = os.path.join(self.root, "%s.%d.yml" % (name, len(os.listdir(self.root))))
        with open(path, "w") as f:
            yaml.safe_dump(config, f)
        return path

    @contextlib.contextmanager
    def _fake_model(self):
        """Patches the checkpoint and the translation (each input sentence's label and
        source, instantly); yields the label of each (mode, domain) translated, in order
        (the test sets have 4 sentences)."""
        translated = []

        def translate(system, source_file, label_file, output, listener=None):
            labels = _read(label_file)
            translated.extend(labels[::4])
            for label in labels:
                if listener is not None:  # The label religious "stops at the limit".
                    listener(label == "religious", 250)
            _write_lines(output, ["%s %s" % pair for pair in zip(labels, _read(source_file))])

        with mock.patch.object(
            evaluate.System, "checkpoint", autospec=True, return_value=self.checkpoint
        ), mock.patch.object(evaluate.System, "translate", autospec=True, side_effect=translate):
            yield translated

    def _evaluate(self, modes=("oracle",), system="LDR", config=None, **kwargs):
        """Evaluates one system with faked weights; returns what :meth:`_fake_model` yields."""
        system = evaluate.System(system, [config or self.configs[system]])
        with self._fake_model() as translated:
            evaluate.evaluate(self.corpus, [system], self.out, modes=modes, **kwargs)
        return translated

    def _argv(self, *extra):
        argv = ["--corpus", self.corpus, "--out", self.out]
        return argv + ["--system", "LDR=%s" % self.configs["LDR"]] + list(extra)

    def _pred_dir(self, labels=None):
        pred_dir = os.path.join(self.root, "pred")
        os.makedirs(pred_dir, exist_ok=True)
        for domain in tiny.DOMAINS:
            count = len(_read(os.path.join(self.corpus, "test.%s.en" % domain)))
            _write_lines(
                os.path.join(pred_dir, "test.%s.pred" % domain), (labels or [domain]) * count
            )
        return pred_dir

    def _assert_refused(self, argv, regex):
        """ldr-eval stops with one line and exit 2, before writing anything."""
        with self._fake_model() as translated:
            helpers.assert_cli_error(self, cli.main, argv, regex)
        self.assertEqual(translated, [])
        self.assertFalse(os.path.exists(self.out))

    @parameterized.expand(
        [
            ("source", "test.religious.en"),
            ("reference", os.path.join("raw", "test.religious.fr")),
            ("labels", None),
        ]
    )
    def test_not_utf8_is_refused_with_its_file_and_line(self, _, name):
        pred_dir = self._pred_dir()
        path = os.path.join(pred_dir, "test.religious.pred")
        if name:
            path = os.path.join(self.corpus, name)
        with open(path, "rb") as f:
            lines = f.read().split(b"\n")
        lines[2] = b"\xff" + lines[2]
        with open(path, "wb") as f:
            f.write(b"\n".join(lines))
        argv = self._argv("--system-modes", "LDR=pred", "--pred-dir", pred_dir)
        regex = "^%s:3: not UTF-8 \\(byte 0xff at byte 1 of the line\\)$" % re.escape(path)
        self._assert_refused(argv, regex)

    def test_warnings_name_the_system_mode_and_domain(self):
        # Issue 47 item 5: "90 of 90 translations stopped at maximum_decoding_length" named
        # neither the system, nor the mode, nor the domain.
        with logged() as messages:
            self._evaluate(modes=("oracle", "generic", "wrong"))
        stopped = [m for m in messages if "stopped at maximum_decoding_length" in m]
        # oracle: religious sentences carry their label; wrong: medical ones carry religious.
        self.assertEqual(
            stopped,
            [
                "system LDR, mode %s, domain %s: 4 of 4 translations stopped at"
                " maximum_decoding_length (250): they may be cut short (raise params:"
                " maximum_decoding_length)" % (mode, domain)
                for mode, domain in (("oracle", "religious"), ("wrong", "medical"))
            ],
        )

    def test_shifted_reference_is_refused_naming_both_files(self):
        reference = os.path.join(self.corpus, "raw", "test.medical.fr")
        source = os.path.join(self.corpus, "test.medical.en")
        lines = _read(reference)
        # One extra first line shifts every reference; --max-sentences used to hide it.
        _write_lines(reference, ["an extra first line"] + lines)
        regex = "^%s:5: extra reference \\(5 lines, but the source %s has 4\\)$" % (
            re.escape(reference),
            re.escape(source),
        )
        self._assert_refused(self._argv("--max-sentences", "2"), regex)
        self._assert_refused(self._argv(), regex)
        _write_lines(reference, lines[1:])
        self._assert_refused(
            self._argv(), "^%s:4: missing reference \\(3 lines" % re.escape(reference)
        )

    def test_predicted_labels_are_checked_whole(self):
        pred_dir = self._pred_dir()
        path = os.path.join(pred_dir, "test.software.pred")
        argv = self._argv("--system-modes", "LDR=pred", "--pred-dir", pred_dir)
        argv += ["--max-sentences", "2"]
        labels = _read(path)
        _write_lines(path, labels + ["software"])
        self._assert_refused(argv, "^%s:5: extra predicted label \\(5 lines" % re.escape(path))
        _write_lines(path, labels[:-1])
        self._assert_refused(argv, "^%s:4: missing predicted label \\(3 lines" % re.escape(path))
        _write_lines(path, labels[:-1] + ["legal"])
        self._assert_refused(argv, "^%s:4: unknown domain label 'legal'" % re.escape(path))
        self._assert_refused(
            argv[:-2] + ["--max-sentences", "0"],
            "--max-sentences: must be a positive integer, got .0.",
        )

    def test_translations_are_redone_when_an_input_changes(self):
        modes = ("oracle", "wrong")
        translated = self._evaluate(modes, cache_only=True)
        self.assertEqual(translated, tiny.DOMAINS + tiny.DOMAINS[1:] + tiny.DOMAINS[:1])
        self.assertFalse(os.path.exists(os.path.join(self.out, "scores.json")))
        # Nothing changed: reused, and scored.
        self.assertEqual(self._evaluate(modes), [])
        self.assertTrue(os.path.exists(os.path.join(self.out, "scores.json")))
        # One source sentence changed, same count (it used to be reused).
        source = os.path.join(self.corpus, "test.religious.en")
        lines = _read(source)
        _write_lines(source, lines[:1] + ["a changed sentence"] + lines[2:])
        self.assertLen(self._evaluate(modes), 6)
        self.assertIn("religious a changed sentence", _read(self.out + "/LDR.oracle.fr"))
        # A decoding option changed.
        beam = self._config("ldr", "ldr_transformer.py", beam_width=3)
        self.assertLen(self._evaluate(modes, config=beam), 6)
        self.assertEqual(self._evaluate(modes, config=beam), [])
        length = self._config("ldr", "ldr_transformer.py", beam_width=3, length_penalty=0.6)
        self.assertLen(self._evaluate(modes, config=length), 6)
        # Other weights under the same checkpoint name (retrained to the same step).
        _write_lines(self.checkpoint + ".index", ["weights 2"])
        self.assertLen(self._evaluate(modes, config=length), 6)
        # Only the mode whose labels changed is redone; the others are kept.
        self.assertEqual(
            self._evaluate(("oracle", "wrong", "generic"), config=length), ["generic"] * 3
        )
        pred_dir = self._pred_dir()
        self.assertEqual(
            self._evaluate(("oracle", "pred"), config=length, pred_dir=pred_dir),
            ["medical", "religious", "software"],
        )
        pred_dir = self._pred_dir(labels=["generic"])
        self.assertEqual(
            self._evaluate(("oracle", "pred"), config=length, pred_dir=pred_dir), ["generic"] * 3
        )
        self.assertEqual(self._evaluate(("generic", "pred"), config=length, pred_dir=pred_dir), [])
        # A stamp of the former format (checkpoint and sentence count): redone.
        _write_lines(os.path.join(self.out, "LDR.stamp"), [self.checkpoint, "12 sentences"])
        self.assertLen(self._evaluate(("oracle",), config=length), 3)

    def test_a_model_retrained_at_the_same_path_is_translated_again(self):
        # Other values in the checkpoint's data shard, at the same path and with the same
        # .index: the stamp used to hash the .index only, and kept the former translations.
        modes = ("oracle", "wrong")
        with logged() as logs:
            self.assertLen(self._evaluate(modes, cache_only=True), 6)
        self.assertIn("Translating LDR (oracle, wrong): no stamp", "\n".join(logs))
        with open(os.path.join(self.out, "LDR.stamp")) as f:
            record = json.load(f)
        self.assertEqual(sorted(record), ["format", "inputs", "modes"])
        self.assertEqual(record["inputs"]["checkpoint"], stamps.checkpoint_digest(self.checkpoint))
        self.assertEqual(sorted(record["modes"]), ["oracle", "wrong"])
        # Unchanged: reused.
        with logged() as logs:
            self.assertEqual(self._evaluate(modes, cache_only=True), [])
        self.assertNotIn("Translating", "\n".join(logs))
        _write_lines(self.checkpoint + ".data-00000-of-00001", ["values 2"])
        with logged() as logs:
            self.assertLen(self._evaluate(modes, cache_only=True), 6)
        self.assertIn("Translating LDR (oracle, wrong): checkpoint differs", "\n".join(logs))
        self.assertEqual(self._evaluate(modes, cache_only=True), [])
        # A shard more (a checkpoint saved otherwise): another checkpoint too.
        os.remove(self.checkpoint + ".data-00000-of-00001")
        for i in range(2):
            _write_lines("%s.data-%05d-of-00002" % (self.checkpoint, i), ["values 2"][: 1 - i])
        self.assertLen(self._evaluate(modes, cache_only=True), 6)
        # A shard missing: refused before anything is translated or removed.
        os.remove(self.checkpoint + ".data-00001-of-00002")
        with self.assertRaisesRegex(UserError, "^system LDR: .*ckpt-1: not a complete checkpoint"):
            self._evaluate(modes, cache_only=True)
        self.assertLen(_read(os.path.join(self.out, "LDR.wrong.fr")), 12)

    def test_results_replace_planted_links(self):
        # Every output is renamed over its path: a link there (or at the old temporary
        # names) is replaced, never followed.
        os.makedirs(self.out)
        victim = os.path.join(self.root, "victim")
        _write_lines(victim, ["precious"])
        names = ["scores.json", "table.md", "bleu.png", "LDR.stamp", "LDR.oracle.fr"]
        names += ["LDR.input.en", "LDR.input.labels", "LDR.output.fr", "LDR.output.fr.partial"]
        for name in names:
            os.symlink(victim, os.path.join(self.out, name))
        self._evaluate()
        self.assertEqual(_read(victim), ["precious"])
        for name in names[:5]:
            self.assertFalse(os.path.islink(os.path.join(self.out, name)), name)
        with open(os.path.join(self.out, "scores.json")) as f:
            self.assertEqual([row for row, _ in json.load(f)["rows"]], ["LDR"])

    @parameterized.expand(
        [
            ("parent", "../x"),
            ("absolute", None),
            ("separator", "a/b"),
            ("hidden", ".x"),
            ("dots", ".."),
            ("line break", "a\nb"),
        ]
    )
    def test_system_names_that_are_not_file_names_are_refused(self, _, name):
        # System names name the output files: ../x wrote x.stamp and x.oracle.fr next to
        # --out, an absolute name anywhere.
        name = name or os.path.join(self.root, "x")
        before = sorted(os.listdir(self.root))
        argv = ["--corpus", self.corpus, "--out", self.out]
        argv += ["--system", "%s=%s" % (name, self.configs["LDR"])]
        regex = "^--system: invalid system name %s \\(it becomes a file name" % re.escape(
            repr(name)
        )
        self._assert_refused(argv, regex)
        self.assertEqual(sorted(os.listdir(self.root)), before)
        with self.assertRaisesRegex(UserError, "^System: invalid system name"):
            evaluate.System(name, [self.configs["LDR"]])

    def test_two_systems_of_one_name_are_refused(self):
        # The second used to replace the first one's translations and give one row.
        argv = self._argv("--system", "LDR=%s" % self.configs["Mixed"])
        self._assert_refused(argv, "^--system: system name 'LDR' is given twice$")
        argv = self._argv("--system-modes", "LDR=oracle", "--system-modes", "LDR=wrong")
        self._assert_refused(argv, "^--system-modes: system name 'LDR' is given twice$")
        systems = [evaluate.System("LDR", [self.configs[name]]) for name in ("LDR", "Mixed")]
        with self._fake_model() as translated:
            with self.assertRaisesRegex(UserError, "^systems: system name 'LDR' is given twice$"):
                evaluate.evaluate(self.corpus, systems, self.out)
        self.assertEqual(translated, [])
        self.assertFalse(os.path.exists(self.out))

    def test_an_unknown_baseline_is_refused_before_anything_is_translated(self):
        # Round six: a misspelled --baseline was found after every translation was made.
        argv = self._argv("--system", "Mixed=%s" % self.configs["Mixed"], "--baseline", "Mixd")
        self._assert_refused(argv, r"^--baseline 'Mixd' is not one of the systems \(LDR, Mixed\)")
        argv = self._argv("--baseline", "LDR (wrongs)")
        self._assert_refused(argv, r"^--baseline 'LDR \(wrongs\)' is not one of the systems")
        # A system's name, or one of its rows, passes the check (then it translates).
        for baseline in ("LDR", "LDR (generic)"):
            out = os.path.join(self.root, "eval_%s" % len(os.listdir(self.root)))
            systems = [evaluate.System("LDR", [self.configs["LDR"]])]
            with self._fake_model() as translated:
                evaluate.evaluate(self.corpus, systems, out, baseline=baseline)
            self.assertTrue(translated)

    def test_one_domain_has_no_wrong_rows_and_says_why(self):
        # Round six: on a one-domain corpus the "wrong" label was the true one, its rows equal
        # to the oracle's and tabled as a wrong-label result.
        corpus = os.path.join(self.root, "one_domain")
        pairs = collections.OrderedDict([("medical", tiny.make_pairs("medical", 20, seed=2))])
        corpus_lib.build(pairs, corpus, dev_size=2, test_size=4, bpe_merges=10, log=lambda _: None)
        config = os.path.join(self.root, "one.yml")
        with open(self.configs["LDR"]) as f:
            values = yaml.safe_load(f)
        values["data"].update(
            domains=["medical"],
            source_vocabulary=os.path.join(corpus, "vocab.en"),
            target_vocabulary=os.path.join(corpus, "vocab.fr"),
        )
        with open(config, "w") as f:
            yaml.safe_dump(values, f)
        with self._fake_model() as translated, self.assertLogs(level="WARNING") as logs:
            results = evaluate.evaluate(corpus, [evaluate.System("LDR", [config])], self.out)
        rows = [row for row, _ in results["rows"]]
        self.assertEqual(rows, ["LDR (oracle)", "LDR (generic)"])
        self.assertEqual(translated, ["medical", "generic"])
        note = "no wrong-label rows: the corpus has one domain (medical), so no label is wrong"
        self.assertTrue(any(note in line for line in logs.output), logs.output)
        with open(os.path.join(self.out, "table.md")) as f:
            self.assertIn("Note: " + note, f.read())

    def test_a_system_of_other_domains_has_no_oracle_rows_and_says_why(self):
        # Round six: a system evaluated on a corpus of none of its domains got "oracle" rows
        # whose every label was generic, with exit 0. (Its domains come from its corpora
        # here: a `domains:` list the corpus lacks is refused before anything else.)
        config = os.path.join(self.root, "other.yml")
        with open(self.configs["LDR"]) as f:
            values = yaml.safe_load(f)
        del values["data"]["domains"]
        values["data"]["train_corpora"] = {
            name: [
                os.path.join(self.corpus, "train.%s.%s" % (domain, lang)) for lang in ("en", "fr")
            ]
            for name, domain in (("law", "medical"), ("news", "software"))
        }
        with open(config, "w") as f:
            yaml.safe_dump(values, f)
        system = evaluate.System("LDR", [config])
        with self._fake_model() as translated, self.assertLogs(level="WARNING") as logs:
            results = evaluate.evaluate(self.corpus, [system], self.out)
        self.assertEqual([row for row, _ in results["rows"]], ["LDR"])  # One mode: its name.
        self.assertEqual(set(translated), {"generic"})  # Translated with generic labels.
        note = (
            "no oracle or wrong-label rows for LDR: it declares none of the corpus's domains (it"
            " declares law, news; the corpus has medical, religious, software)"
        )
        self.assertTrue(any(note in line for line in logs.output), logs.output)
        with open(os.path.join(self.out, "table.md")) as f:
            self.assertIn("Note: " + note, f.read())

    def test_row_names_with_spaces_name_files_with_underscores(self):
        # "A B" and "A_B" would share their files (A_B.oracle.fr).
        argv = ["--corpus", self.corpus, "--out", self.out]
        argv += [
            "--system",
            "A B=%s" % self.configs["LDR"],
            "--system",
            "A_B=%s" % self.configs["LDR"],
        ]
        regex = "^--system: system names 'A B' and 'A_B' would share their files \\(A_B\\.\\*\\)"
        self._assert_refused(argv, regex)
        self.assertLen(self._evaluate(system="Factorized PA", config=self.configs["LDR"]), 3)
        self.assertCountEqual(
            [name for name in os.listdir(self.out) if name.startswith("Factorized")],
            ["Factorized_PA.oracle.fr", "Factorized_PA.stamp"],
        )
        with open(os.path.join(self.out, "scores.json")) as f:
            self.assertEqual([row for row, _ in json.load(f)["rows"]], ["Factorized PA"])

    @parameterized.expand([("replaced", "LDR.oracle.fr"), ("removed", "LDR.wrong.fr")])
    def test_files_ldr_eval_did_not_write_are_left_alone(self, _, name):
        # A file at a translation path of a system without a stamp is not the evaluation's
        # (--out a directory of the user's): it used to be replaced (a mode evaluated) or
        # removed (any other mode).
        os.makedirs(self.out)
        mine = os.path.join(self.out, name)
        _write_lines(mine, ["my own file"])
        regex = "^%s: a file ldr-eval did not write \\(no %s\\)" % (
            re.escape(mine),
            re.escape(os.path.join(self.out, "LDR.stamp")),
        )
        with self._fake_model() as translated:
            helpers.assert_cli_error(self, cli.main, self._argv(), regex)
        self.assertEqual(translated, [])
        self.assertEqual(os.listdir(self.out), [name])
        self.assertEqual(_read(mine), ["my own file"])
        # The evaluation's own translations (under its stamp) are redone as before.
        os.remove(mine)
        self.assertEqual(self._evaluate(("oracle", "wrong"), cache_only=True)[:1], ["medical"])
        self.assertLen(
            self._evaluate(("oracle",), config=self._config("ldr", "ldr_transformer.py")), 3
        )
        self.assertFalse(os.path.exists(os.path.join(self.out, "LDR.wrong.fr")))

    def test_interrupted_translation_leaves_nothing(self):
        system = evaluate.System("LDR", [self.configs["LDR"]])
        output = os.path.join(self.out, "LDR.oracle.fr")
        os.makedirs(self.out)
        victim = os.path.join(self.root, "victim")
        _write_lines(victim, ["precious"])
        os.symlink(victim, output + ".partial")

        def infer(features, predictions_file=None, checkpoint_path=None, listener=None):
            _write_lines(predictions_file, ["half of the"])
            raise KeyboardInterrupt

        with mock.patch.object(
            evaluate.System, "checkpoint", autospec=True, return_value=self.checkpoint
        ), mock.patch.object(system.runner, "infer", side_effect=infer):
            with self.assertRaises(KeyboardInterrupt):
                system.translate("source", "labels", output)
        self.assertEqual(os.listdir(self.out), ["LDR.oracle.fr.partial"])
        self.assertEqual(_read(victim), ["precious"])


if __name__ == "__main__":
    tf.test.main()
