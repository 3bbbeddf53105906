"""The scoring of the contrastive test: summaries, and scores of tiny untrained models."""

import json
import os
import re
import shutil
from unittest import mock

import opennmt
import pytest
import tensorflow as tf
import yaml
from opennmt.utils import checkpoint as checkpoint_util

from ldr_opennmt import stamps
from ldr_opennmt.cli import evaluate as cli
from ldr_opennmt.data import corpus as corpus_lib
from ldr_opennmt.errors import UserError
from ldr_opennmt.evaluation import evaluate
from ldr_opennmt.evaluation.contrastive import items as items_lib
from ldr_opennmt.evaluation.contrastive import report as report_lib
from ldr_opennmt.evaluation.contrastive import scoring as scoring_lib
from ldr_opennmt.training.runner import Runner
from tests import corpus as tiny
from tests import helpers
from tests.evaluation.common import logged
from tests.evaluation.contrastive import common

_TINY_SIZES = "num_layers=1, num_units=16, num_heads=2, ffn_inner_dim=32, dropout=0.0"
_DEFINITIONS = {
    "ldr": "models.ldr_transformer(domain_region_size=2, %s)" % _TINY_SIZES,
    "mixed": "models.mixed_transformer(%s)" % _TINY_SIZES,
}


class SummaryTest(tf.test.TestCase):
    def test_accuracy_ties_and_follow(self):
        items = [
            {"domain": "medical", "word": "cell", "variants": [{}, {}]},
            {"domain": "medical", "word": "cell", "variants": [{}]},
            {"domain": "software", "word": "host", "variants": [{}]},
        ]
        records = [
            {"reference": -1.0, "variants": [-2.0, -3.0]},  # Right.
            {"reference": -1.0, "variants": [-1.0]},  # A tie is not right.
            {"reference": -5.0, "variants": [-4.0]},  # Wrong.
        ]
        result = scoring_lib.summarize(items, records, ["medical", "software"])
        self.assertEqual(result["values"], {"medical": 50.0, "software": 0.0, "all": 100 / 3})
        self.assertEqual(result["counts"], {"medical": 2, "software": 1, "all": 3})
        self.assertEqual(result["words"], {"cell": 50.0, "host": 0.0})
        self.assertAllClose(result["margin"]["medical"], 0.5)
        # Follow: pairs where a variant beats the reference (a system that ignores labels).
        result = scoring_lib.summarize(items, records, ["medical", "software"], follow=True)
        self.assertEqual(result["counts"], {"medical": 3, "software": 1, "all": 4})
        self.assertEqual(result["values"]["medical"], 0.0)
        self.assertEqual(result["values"]["software"], 100.0)
        # Flipped: each variant against the reference under the variant's label.
        flipped = [
            {"reference": [-2.0, -1.0], "variants": [-1.5, -3.0]},
            {"reference": [-1.0], "variants": [-1.0]},
            {"reference": [-5.0], "variants": [-4.0]},
        ]
        result = scoring_lib.summarize(items, flipped, ["medical", "software"], follow=True)
        self.assertAllClose(result["values"]["medical"], 100 / 3)
        self.assertEqual(result["values"]["all"], 50.0)
        self.assertIsNone(
            scoring_lib.summarize(items[:1], records[:1], ["medical", "religious"])["values"][
                "religious"
            ]
        )

    def test_label_shift(self):
        items = [{"domain": "a", "word": "w", "variants": [{}, {}]}]
        oracle = [{"reference": -1.0, "variants": [-3.0, -2.0]}]
        # Under the first variant's label: -1 vs -2 (from -2 behind to -1 behind: +1).
        # Under the second's: -1 vs -3 (from -1 behind to -2 behind: -1).
        flipped = [{"reference": [-1.0, -1.0], "variants": [-2.0, -3.0]}]
        result = scoring_lib.label_shift(items, oracle, flipped, ["a"])
        self.assertEqual(result["values"], {"a": 50.0, "all": 50.0})
        self.assertEqual(result["counts"], {"a": 2, "all": 2})
        self.assertAllClose(result["margin"]["a"], 0.0)


def _save_untrained(directory, name, corpus_dir, seed=3):
    """A model directory with a random checkpoint: a "trained" tiny model, without training
    (another :obj:`seed`: another model, "retrained" at the same path)."""
    model_dir = os.path.join(directory, name)
    os.makedirs(model_dir)
    with open(os.path.join(model_dir, "model_description.py"), "w") as f:
        f.write(
            "from ldr_opennmt import models\n\n\ndef model():\n    return %s\n" % _DEFINITIONS[name]
        )
    config = {
        "model_dir": model_dir,
        "data": {
            "domains": tiny.DOMAINS,
            "source_vocabulary": os.path.join(corpus_dir, "vocab.en"),
            "target_vocabulary": os.path.join(corpus_dir, "vocab.fr"),
        },
        # OpenNMT-tf's score also decodes greedily (SequenceToSequence.call): keep it short.
        "params": {"maximum_decoding_length": 4},
        "score": {"batch_size": 8},
    }
    path = os.path.join(directory, "%s.yml" % name)
    with open(path, "w") as f:
        yaml.safe_dump(config, f)
    runner = Runner.from_files([path], auto_config=True)
    final = runner.finalized_config()
    model = runner.new_model(final)
    model.create_variables()
    helpers.randomize_weights(model, seed=seed)
    checkpoint_util.Checkpoint.from_config(final, model).save(1)
    return path


@pytest.mark.slow
class ScoringTest(helpers.SharedDirTestCase):
    """Scores with two tiny untrained models (random weights, large domain weights)."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.corpus = os.path.join(cls.dir, "corpus")
        corpus_lib.build(
            common.pairs(count=40, seed=2),
            cls.corpus,
            dev_size=3,
            test_size=6,
            bpe_merges=30,
            log=lambda _: None,
        )
        cls.configs = {name: _save_untrained(cls.dir, name, cls.corpus) for name in _DEFINITIONS}
        # Two hand items: the second's only variant is its reference (a tie).
        cls.items = tiny.write_lines(
            os.path.join(cls.dir, "hand.jsonl"),
            [
                json.dumps(
                    {
                        "id": "a",
                        "domain": "medical",
                        "word": "cell",
                        "source": "the big cell",
                        "reference": "le grand cellule",
                        "variants": [
                            {"domain": "religious", "text": "le grand cachot"},
                            {"domain": "software", "text": "le grand case"},
                        ],
                    }
                ),
                json.dumps(
                    {
                        "id": "b",
                        "domain": "software",
                        "word": "host",
                        "source": "a host",
                        "reference": "un serveur",
                        "variants": [{"domain": "medical", "text": "un serveur"}],
                    }
                ),
            ],
        )
        cls.out = os.path.join(cls.dir, "out")
        systems = [evaluate.System(n, [c]) for n, c in sorted(cls.configs.items())]
        cls.results = scoring_lib.evaluate(cls.corpus, systems, cls.out, items_path=cls.items)

    def _records(self, name, mode):
        with open(os.path.join(self.out, "%s.%s.contrastive.jsonl" % (name, mode))) as f:
            return [json.loads(line) for line in f]

    def _log_probs(self, name, source, label, targets):
        """Log-probabilities computed here from the model's logits (not OpenNMT-tf's score)."""
        runner = evaluate.System(name, [self.configs[name]]).runner
        model, _ = runner.restore()
        src_tok = corpus_lib.load_tokenizer(self.corpus, "en")
        tgt_tok = corpus_lib.load_tokenizer(self.corpus, "fr")
        directory = self.get_temp_dir()
        src = tiny.write_lines(
            os.path.join(directory, "s"), [" ".join(src_tok.tokenize(source)[0])] * len(targets)
        )
        labels = tiny.write_lines(os.path.join(directory, "l"), [label] * len(targets))
        tgt = tiny.write_lines(
            os.path.join(directory, "t"), [" ".join(tgt_tok.tokenize(t)[0]) for t in targets]
        )
        dataset = model.examples_inputter.make_evaluation_dataset([src, labels], tgt, batch_size=8)
        features, labels = next(iter(dataset))
        outputs, _ = model(features, labels=labels, training=False)
        log_probs = tf.nn.log_softmax(outputs["logits"])
        token = tf.gather(log_probs, labels["ids_out"], batch_dims=2)
        mask = tf.sequence_mask(labels["length"], tf.shape(token)[1], dtype=token.dtype)
        return tf.reduce_sum(token * mask, axis=1).numpy()

    def test_scores_are_the_model_log_probabilities(self):
        oracle = self._records("ldr", "oracle")
        expected = self._log_probs(
            "ldr",
            "the big cell",
            "medical",
            ["le grand cellule", "le grand cachot", "le grand case"],
        )
        self.assertAllClose([oracle[0]["reference"]] + oracle[0]["variants"], expected, atol=1e-4)
        flipped = self._records("ldr", "flipped")
        expected = self._log_probs(
            "ldr", "the big cell", "religious", ["le grand cellule", "le grand cachot"]
        )
        self.assertAllClose(
            [flipped[0]["reference"][0], flipped[0]["variants"][0]], expected, atol=1e-4
        )
        # The label changes the scores of an LDR model.
        self.assertNotAllClose(oracle[0]["reference"], flipped[0]["reference"][0])
        # "wrong" is the next domain: the same scores as flipped for that domain's variant.
        wrong = self._records("ldr", "wrong")
        self.assertAllClose(wrong[0]["variants"][0], flipped[0]["variants"][0])

    def test_rows_and_ties(self):
        rows = {(row["row"], row["metric"]): row for row in self.results["rows"]}
        self.assertEqual(
            list(rows),
            [
                ("ldr (oracle)", "accuracy"),
                ("ldr (generic)", "accuracy"),
                ("ldr (wrong)", "accuracy"),
                ("ldr (flipped)", "follow"),
                ("ldr", "shift"),
                ("mixed", "follow"),
                ("mixed", "accuracy"),
            ],
        )
        # Item b's variant is its reference: under any label the difference is 0, no shift.
        self.assertEqual(rows[("ldr", "shift")]["margin"]["software"], 0.0)
        del rows[("ldr", "shift")]
        for (name, metric), row in rows.items():
            # Item b's variant is its reference: a tie, never right, never followed.
            self.assertEqual(row["values"]["software"], 0.0, name)
            self.assertEqual(row["counts"]["software"], 1)
            self.assertIn(
                row["values"]["medical"], (0.0, 50.0, 100.0) if metric == "follow" else (0.0, 100.0)
            )
        # Mixed ignores labels: scored once, with its follow rate from the same scores.
        self.assertFalse(os.path.exists(os.path.join(self.out, "mixed.flipped.contrastive.jsonl")))
        mixed = self._records("mixed", "oracle")[0]
        follow = rows[("mixed", "follow")]["values"]["medical"]
        self.assertEqual(follow, 50.0 * sum(v > mixed["reference"] for v in mixed["variants"]))
        for name in (report_lib.RESULTS_FILE, report_lib.TABLE_FILE, report_lib.CHART_FILE):
            self.assertTrue(os.path.exists(os.path.join(self.out, name)), name)

    def test_scores_are_reused(self):
        systems = [evaluate.System(n, [c]) for n, c in sorted(self.configs.items())]
        with mock.patch.object(Runner, "score", side_effect=AssertionError("scored again")):
            results = scoring_lib.evaluate(self.corpus, systems, self.out, items_path=self.items)
        self.assertEqual(results["rows"], self.results["rows"])
        # Another checkpoint (a changed stamp): every mode's scores are redone.
        out = os.path.join(self.get_temp_dir(), "stale")
        shutil.copytree(self.out, out)
        tiny.write_lines(os.path.join(out, "ldr.contrastive.stamp"), ["other-checkpoint"])
        with mock.patch.object(Runner, "score", side_effect=AssertionError("scored again")):
            with self.assertRaisesRegex(AssertionError, "scored again"):
                scoring_lib.evaluate(
                    self.corpus, systems[:1], out, items_path=self.items, modes=["oracle"]
                )
        # The old scores are gone, and so are the failed run's input files.
        self.assertEqual(
            [n for n in os.listdir(out) if n.startswith("ldr.")], ["ldr.contrastive.stamp"]
        )

    def test_interrupted_scores_are_not_reused_under_the_former_stamp(self):
        # A run for other weights killed after writing its scores, before its stamp: the
        # stamp of the former weights covered them, and a run with those weights took them.
        out = os.path.join(self.get_temp_dir(), "killed")
        shutil.copytree(self.out, out)
        systems = [evaluate.System("ldr", [self.configs["ldr"]])]
        score_system = scoring_lib._score_system
        other = os.path.join(self.get_temp_dir(), "other-weights")
        tiny.write_lines(other + ".index", ["other index"])
        tiny.write_lines(other + ".data-00000-of-00001", ["other weights"])

        def fake_score(runner, features_file, predictions_file=None, **kwargs):
            with open(predictions_file) as f:
                targets = f.read().splitlines()
            tiny.write_lines(kwargs["output_file"], ["%d ||| %s" % (len(t), t) for t in targets])

        def killed(*args):
            score_system(*args)
            raise KeyboardInterrupt

        with mock.patch.object(
            evaluate.System, "checkpoint", autospec=True, return_value=other
        ), mock.patch.object(
            Runner, "score", autospec=True, side_effect=fake_score
        ), mock.patch.object(
            scoring_lib, "_score_system", side_effect=killed
        ):
            with self.assertRaises(KeyboardInterrupt):
                scoring_lib.evaluate(
                    self.corpus, systems, out, items_path=self.items, modes=["oracle"]
                )
        with mock.patch.object(Runner, "score", side_effect=AssertionError("scored again")):
            with self.assertRaisesRegex(AssertionError, "scored again"):
                scoring_lib.evaluate(
                    self.corpus, systems, out, items_path=self.items, modes=["oracle"]
                )

    def test_a_model_retrained_at_the_same_path_is_scored_again(self):
        # The stamp used to name the checkpoint by its path: a model retrained at the same
        # path kept the scores of the former weights.
        directory = os.path.join(self.get_temp_dir(), "retrained")
        os.makedirs(directory)
        config = _save_untrained(directory, "ldr", self.corpus)
        out = os.path.join(directory, "out")
        scores = os.path.join(out, "ldr.oracle.contrastive.jsonl")

        def run():
            system = evaluate.System("ldr", [config])
            with logged() as logs:
                results = scoring_lib.evaluate(
                    self.corpus, [system], out, items_path=self.items, modes=["oracle"]
                )
            with open(scores) as f:
                return results, f.read(), "\n".join(logs)

        results, before, logs = run()
        self.assertIn("Scoring the contrastive items with ldr (oracle): no stamp", logs)
        with open(os.path.join(out, "ldr.contrastive.stamp")) as f:
            record = json.load(f)
        checkpoint = os.path.join(directory, "ldr", "ckpt-1")
        self.assertEqual(record["format"], 1)
        self.assertEqual(record["inputs"]["checkpoint"], stamps.checkpoint_digest(checkpoint))
        # Unchanged: reused.
        with mock.patch.object(Runner, "score", side_effect=AssertionError("scored again")):
            self.assertEqual(run()[:2], (results, before))
        # Retrained (other weights) in the same directory, to the same step.
        shutil.rmtree(os.path.join(directory, "ldr"))
        self.assertEqual(_save_untrained(directory, "ldr", self.corpus, seed=4), config)
        self.assertTrue(os.path.exists(checkpoint + ".index"))
        _, after, logs = run()
        self.assertIn("Scoring the contrastive items with ldr (oracle): checkpoint differs", logs)
        self.assertNotEqual(after, before)
        with mock.patch.object(Runner, "score", side_effect=AssertionError("scored again")):
            self.assertEqual(run()[1], after)

    def test_files_it_did_not_write_are_left_alone(self):
        # A score file without its system's stamp is not the evaluation's: it used to be
        # removed.
        out = os.path.join(self.get_temp_dir(), "foreign")
        os.makedirs(out)
        mine = tiny.write_lines(os.path.join(out, "ldr.wrong.contrastive.jsonl"), ["my own file"])
        systems = [evaluate.System("ldr", [self.configs["ldr"]])]
        regex = "^%s: a file ldr-eval contrastive did not write \\(no %s\\)" % (
            re.escape(mine),
            re.escape(os.path.join(out, "ldr.contrastive.stamp")),
        )
        with mock.patch.object(Runner, "score", side_effect=AssertionError("scored")):
            with self.assertRaisesRegex(UserError, regex):
                scoring_lib.evaluate(
                    self.corpus, systems, out, items_path=self.items, modes=["oracle"]
                )
            # The command refuses before it builds the items.
            argv = ["contrastive", "--corpus", self.corpus, "--out", out]
            argv += ["--system", "ldr=%s" % self.configs["ldr"], "--seed-words", "none"]
            helpers.assert_cli_error(self, cli.main, argv + ["--min-count", "3"], regex)
        self.assertEqual(os.listdir(out), ["ldr.wrong.contrastive.jsonl"])
        with open(mine) as f:
            self.assertEqual(f.read(), "my own file\n")

    def test_two_systems_of_one_name_are_refused(self):
        out = os.path.join(self.get_temp_dir(), "twice")
        systems = [evaluate.System("ldr", [self.configs[name]]) for name in ("ldr", "mixed")]
        with mock.patch.object(Runner, "score", side_effect=AssertionError("scored")):
            with self.assertRaisesRegex(UserError, "^systems: system name 'ldr' is given twice$"):
                scoring_lib.evaluate(self.corpus, systems, out, items_path=self.items)
        self.assertFalse(os.path.exists(out))
        argv = ["contrastive", "--corpus", self.corpus, "--out", out, "--items", self.items]
        argv += [
            "--system",
            "x=%s" % self.configs["ldr"],
            "--system",
            "x=%s" % self.configs["mixed"],
        ]
        helpers.assert_cli_error(self, cli.main, argv, "^--system: system name 'x' is given twice$")
        argv[-3] = "../x=%s" % self.configs["ldr"]
        helpers.assert_cli_error(self, cli.main, argv, "^--system: invalid system name '../x'")
        self.assertFalse(os.path.exists(out))

    def test_no_predictable_file_names(self):
        # The score run's files live in an exclusive temporary directory and the stamp and
        # chart are renamed over their paths: links planted at the names they used to
        # have, or at the outputs, are never followed.
        out = os.path.join(self.get_temp_dir(), "links")
        os.makedirs(out)
        victim = tiny.write_lines(os.path.join(self.get_temp_dir(), "victim"), ["precious"])
        names = ["ldr.contrastive.input.%s" % n for n in ("src", "labels", "tgt")]
        names += ["ldr.contrastive.scores.partial", "ldr.contrastive.stamp"]
        names += [report_lib.CHART_FILE + ".partial", report_lib.CHART_FILE]
        for name in names:
            os.symlink(victim, os.path.join(out, name))

        def score(runner, features_file, predictions_file=None, **kwargs):
            with open(predictions_file) as f:
                targets = f.read().splitlines()
            tiny.write_lines(kwargs["output_file"], ["%d ||| %s" % (len(t), t) for t in targets])

        systems = [evaluate.System("ldr", [self.configs["ldr"]])]
        with mock.patch.object(Runner, "score", autospec=True, side_effect=score):
            results = scoring_lib.evaluate(
                self.corpus, systems, out, items_path=self.items, modes=["oracle"]
            )
        self.assertEqual([row["row"] for row in results["rows"]], ["ldr"])
        with open(victim) as f:
            self.assertEqual(f.read(), "precious\n")
        for name in ("ldr.contrastive.stamp", report_lib.CHART_FILE):
            self.assertFalse(os.path.islink(os.path.join(out, name)), name)
        self.assertEqual([n for n in os.listdir(out) if n.startswith(".")], [])

    def test_scoring_does_not_decode(self):
        # OpenNMT-tf's score runs the model in inference mode, which would also decode.
        out = os.path.join(self.get_temp_dir(), "nodecode")
        systems = [evaluate.System("ldr", [self.configs["ldr"]])]
        with mock.patch.object(
            opennmt.models.SequenceToSequence,
            "_dynamic_decode",
            side_effect=AssertionError("decoded while scoring"),
        ):
            results = scoring_lib.evaluate(
                self.corpus, systems, out, items_path=self.items, modes=["oracle"]
            )
        expected = [row for row in self.results["rows"] if row["row"] == "ldr (oracle)"]
        self.assertEqual([row["values"] for row in results["rows"]], [expected[0]["values"]])

    def test_cache_only(self):
        out = os.path.join(self.get_temp_dir(), "cache")
        shutil.copytree(self.out, out)
        os.remove(os.path.join(out, report_lib.RESULTS_FILE))
        systems = [evaluate.System(n, [c]) for n, c in sorted(self.configs.items())]
        with mock.patch.object(Runner, "score", side_effect=AssertionError("scored again")):
            self.assertIsNone(
                scoring_lib.evaluate(
                    self.corpus, systems, out, items_path=self.items, cache_only=True
                )
            )
        self.assertFalse(os.path.exists(os.path.join(out, report_lib.RESULTS_FILE)))
        # Scores missing for one system: only those are made, and still no summary.
        for name in os.listdir(out):
            if name.startswith("ldr."):
                os.remove(os.path.join(out, name))
        scoring_lib.evaluate(self.corpus, systems, out, items_path=self.items, cache_only=True)
        self.assertFalse(os.path.exists(os.path.join(out, report_lib.RESULTS_FILE)))
        with mock.patch.object(Runner, "score", side_effect=AssertionError("scored again")):
            results = scoring_lib.evaluate(self.corpus, systems, out, items_path=self.items)
        self.assertEqual(results["rows"], self.results["rows"])

    def test_cli_and_errors(self):
        out = os.path.join(self.dir, "cli")
        argv = ["contrastive", "--corpus", self.corpus, "--out", out]
        status, _ = helpers.run_cli(cli.main, argv + ["--seed-words", "none", "--min-count", "3"])
        self.assertEqual(status, 0)  # Builds the items only.
        with open(os.path.join(out, items_lib.ITEMS_FILE)) as f:
            items = [json.loads(line) for line in f]
        self.assertTrue(items)
        self.assertTrue(all(item["split"] in ("test", "dev") for item in items))
        self.assertTrue(os.path.exists(os.path.join(out, "items.md")))
        system = "ldr=%s" % self.configs["ldr"]
        # In the class's output directory: the scores made in setUpClass are reused.
        argv_items = ["contrastive", "--corpus", self.corpus, "--out", self.out]
        argv_items += ["--items", self.items, "--system", system]
        with mock.patch.object(Runner, "score", side_effect=AssertionError("scored again")):
            status, stderr = helpers.run_cli(
                cli.main, argv_items + ["--system-modes", "ldr=oracle,flipped"]
            )
        self.assertEqual(status, 0, stderr)
        with open(os.path.join(self.out, report_lib.RESULTS_FILE)) as f:
            rows = [row["row"] for row in json.load(f)["rows"]]
        self.assertEqual(rows, ["ldr (oracle)", "ldr (flipped)", "ldr"])  # "ldr": label effect.

        helpers.assert_cli_error(
            self,
            cli.main,
            argv_items + ["--system-modes", "ldr=oracle,pred"],
            r"^system ldr: unknown contrastive label modes \['pred'\]",
        )
        helpers.assert_cli_error(
            self, cli.main, argv_items + ["--system-modes", "x=oracle"], "names no --system: x"
        )
        bad = tiny.write_lines(os.path.join(self.dir, "bad.jsonl"), ['{"domain": "medical"}'])
        helpers.assert_cli_error(
            self,
            cli.main,
            argv + ["--items", bad, "--system", system],
            r"bad.jsonl:1: item without a valid 'word'",
        )
        helpers.assert_cli_error(
            self,
            cli.main,
            argv + ["--min-count", "1000", "--seed-words", "none"],
            r"no contrastive item found in .*: lower min_count",
        )
        helpers.assert_cli_error(
            self, cli.main, argv + ["--splits", "train"], "unknown item split 'train'"
        )
        # The BLEU evaluation's command line is unchanged.
        helpers.assert_cli_error(
            self,
            cli.main,
            ["--corpus", self.corpus, "--out", out, "--system", "X=missing.yml"],
            "^system X: missing.yml: no such configuration file",
        )

    def test_a_corpus_without_items(self):
        # The experiments on a corpus of one's own: no item is a report line, not a failure.
        out = os.path.join(self.dir, "none")
        path = os.path.join(out, "items.jsonl")
        with self.assertRaisesRegex(UserError, "no contrastive item found"):
            items_lib.build_items(self.corpus, path, seed_words=None, min_count=1000)
        self.assertFalse(os.path.exists(path))
        built = items_lib.build_items(
            self.corpus, path, seed_words=None, min_count=1000, allow_none=True
        )
        self.assertEqual(built, [])
        self.assertEqual(items_lib.read_items(path), [])
        reason = items_lib.no_items_reason(path)
        self.assertRegex(reason, r"^no contrastive item found in .*: lower min_count")
        self.assertIsNone(items_lib.no_items_reason(self.items))  # A file with items.

        systems = [evaluate.System(n, [c]) for n, c in sorted(self.configs.items())]
        self.assertIsNone(scoring_lib.evaluate(self.corpus, systems, out, path, cache_only=True))
        results = scoring_lib.evaluate(self.corpus, systems, out, path)
        self.assertEqual(results["not_run"], reason)
        self.assertEqual(results["rows"], [])
        self.assertEqual(set(results["items"].values()), {0})
        for name in self.configs:
            for mode in scoring_lib.MODES if name == "ldr" else ("oracle",):
                with open(os.path.join(out, "%s.%s.contrastive.jsonl" % (name, mode))) as f:
                    self.assertEqual(f.read(), "")
        with open(os.path.join(out, report_lib.TABLE_FILE)) as f:
            self.assertEqual(f.read().strip(), "The contrastive test was not run: %s." % reason)
        self.assertGreater(os.path.getsize(os.path.join(out, report_lib.CHART_FILE)), 0)
        # An empty items file that does not say why is not taken for a corpus without items.
        bare = tiny.write_lines(os.path.join(self.dir, "bare.jsonl"), [])
        with self.assertRaisesRegex(UserError, "bare.jsonl: no items"):
            scoring_lib.evaluate(self.corpus, systems, os.path.join(self.dir, "bare"), bare)

    def test_unknown_mode(self):
        system = evaluate.System("ldr", [self.configs["ldr"]])
        with self.assertRaisesRegex(UserError, r"unknown contrastive label modes \['pred'\]"):
            scoring_lib.evaluate(self.corpus, [system], self.out, self.items, modes=["pred"])
        with self.assertRaisesRegex(UserError, "given for 'x', which is not a system"):
            scoring_lib.evaluate(
                self.corpus, [system], self.out, self.items, system_modes={"x": ["oracle"]}
            )


if __name__ == "__main__":
    tf.test.main()
