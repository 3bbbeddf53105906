"""The contrastive lexical-choice test: lexicon, items, scoring with tiny untrained models."""

import collections
import json
import os
import re
import shutil
from unittest import mock

import numpy as np
import opennmt
import pytest
import tensorflow as tf
import yaml
from opennmt.utils import checkpoint as checkpoint_util
from parameterized import parameterized

from ldr_opennmt.cli import evaluate as cli
from ldr_opennmt.data import corpus as corpus_lib
from ldr_opennmt.errors import UserError
from ldr_opennmt.evaluation import contrastive, evaluate
from ldr_opennmt.training.runner import Runner
from tests import corpus as tiny
from tests import helpers

_TINY_SIZES = "num_layers=1, num_units=16, num_heads=2, ffn_inner_dim=32, dropout=0.0"
_DEFINITIONS = {
    "ldr": "models.ldr_transformer(domain_region_size=2, %s)" % _TINY_SIZES,
    "mixed": "models.mixed_transformer(%s)" % _TINY_SIZES,
}


def _pairs(count=30, seed=0, domains=tiny.DOMAINS):
    return collections.OrderedDict((d, tiny.make_pairs(d, count, seed)) for d in domains)


def _sense(singular, plural=None):
    key = contrastive.french_key(singular)
    return contrastive.Sense(key, singular, plural or singular + "s", 1.0, 1.0, 10, "data")


def _entry(word, senses):
    """A lexicon entry where every pair of domains contrasts."""
    contrasts = collections.OrderedDict(
        (d, [o for o in senses if o != d and senses[o].translation != senses[d].translation])
        for d in senses
    )
    return contrastive.Entry(word, senses, {d: o for d, o in contrasts.items() if o}, False)


def _write(path, lines):
    with open(path, "w", encoding="utf-8") as f:
        f.write("".join(line + "\n" for line in lines))
    return path


class LexiconTest(tf.test.TestCase):
    def test_word_keys(self):
        self.assertEqual(contrastive.english_key("cells"), "cell")
        self.assertEqual(contrastive.english_key("parties"), "party")
        self.assertEqual(contrastive.english_key("process"), "process")
        self.assertEqual(contrastive.french_key("cellules"), "cellule")
        self.assertEqual(contrastive.french_key("yeux"), "yeu")
        self.assertEqual(
            contrastive.words("L'Esprit saint, 2 fois"), ["l", "esprit", "saint", "fois"]
        )

    @parameterized.expand(
        [
            ("trouvé", "trouvée", True),
            ("échec", "echec", True),
            ("clé", "clef", True),
            ("dernier", "dernière", True),
            ("sauver", "enregistrer", False),
            ("cellule", "cachot", False),
        ]
    )
    def test_related(self, first, second, expected):
        self.assertEqual(contrastive.related(first, second), expected)

    def test_association_finds_the_translation_of_each_domain(self):
        lexicon = contrastive.find_translations(_pairs(), min_count=3)
        self.assertEqual(sorted(lexicon), ["cell", "host", "spirit"])
        translations = {
            word: {d: s.translation for d, s in entry.senses.items()}
            for word, entry in lexicon.items()
        }
        self.assertEqual(
            translations["cell"],
            {"medical": "cellule", "religious": "cachot", "software": "case"},
        )
        self.assertEqual(
            translations["host"],
            {"medical": "hote", "religious": "hostie", "software": "serveur"},
        )
        self.assertEqual(
            translations["spirit"],
            {"medical": "alcool", "religious": "esprit", "software": "esprit"},
        )
        # Equal translations do not contrast: "spirit" opposes medical to the others only.
        self.assertEqual(
            dict(lexicon["spirit"].contrasts),
            {
                "medical": ["religious", "software"],
                "religious": ["medical"],
                "software": ["medical"],
            },
        )
        sense = lexicon["cell"].senses["medical"]
        self.assertEqual(sense.origin, "data")
        self.assertAllClose([sense.dice, sense.share], [1.0, 1.0])

    def test_thresholds_seeds_and_exclusions(self):
        pairs = _pairs()
        self.assertEqual(contrastive.find_translations(pairs, min_count=100), {})
        # A seed needs only seed_min_count pairs; an excluded word is never kept.
        lexicon = contrastive.find_translations(
            pairs, seed_words={"cell": {}}, excluded_words=["hosts"], min_count=100
        )
        self.assertEqual(list(lexicon), ["cell"])
        # A hand sense fills a domain without data, never replaces a sense from the data.
        pairs = _pairs(domains=["medical", "religious"])
        lexicon = contrastive.find_translations(
            pairs, seed_words={"spirit": {"religious": "fantôme", "medical": "x"}}, min_count=3
        )
        self.assertEqual(lexicon["spirit"].senses["religious"].translation, "esprit")
        self.assertEqual(lexicon["spirit"].senses["medical"].origin, "data")
        seeds = {"spirit": {"religious": "fantôme", "medical": "gnôle"}}
        lexicon = contrastive.find_translations(pairs, seeds, min_count=3, seed_min_count=50)
        self.assertEqual(
            [(s.singular, s.origin) for s in lexicon["spirit"].senses.values()],
            [("gnôle", "seed"), ("fantôme", "seed")],
        )
        with self.assertRaisesRegex(UserError, "seed word 'spirit': unknown domain 'software'"):
            contrastive.find_translations(pairs, seed_words={"spirit": {"software": "x"}})

    def test_seed_word_file(self):
        path = _write(
            os.path.join(self.get_temp_dir(), "seeds.txt"),
            ["# comment", "Cells religious=cachot  # a comment", "", "-eyes"],
        )
        seeds, excluded = contrastive.read_seed_words(path)
        self.assertEqual(seeds, {"cell": {"religious": "cachot"}})
        self.assertEqual(excluded, {"eye"})
        seeds, excluded = contrastive.read_seed_words(contrastive.DEFAULT_SEED_WORDS)
        self.assertIn("save", seeds)
        self.assertLess(len(seeds), 40)  # A small hand-made list.
        for lines, regex in (
            (["cell religious"], r"seeds.txt:1: expected DOMAIN=FRENCH_WORD .* 'religious'"),
            (["ok", "two words=x y"], r"seeds.txt:2: expected DOMAIN=FRENCH_WORD"),
            (["c3po"], r"seeds.txt:1: 'c3po' is not an English word"),
            (["-eye medical=oeil"], r"seeds.txt:1: an excluded word \(-eye\) takes no senses"),
        ):
            _write(path, lines)
            with self.assertRaisesRegex(UserError, regex):
                contrastive.read_seed_words(path)


class ItemsTest(tf.test.TestCase):
    def test_variants_replace_the_domain_translation(self):
        lexicon = contrastive.find_translations(_pairs(), min_count=3)
        examples = [
            ("test", "medical", 1, "the big cell", "le grand cellule"),
            ("test", "software", 2, "a spirit here", "un esprit ici"),
            ("test", "religious", 3, "the cell", "le cachot"),
            ("test", "religious", 4, "the cell", "le grand"),  # No translation in the reference.
            ("test", "medical", 5, "the red", "le rouge"),  # No lexicon word.
        ]
        items = contrastive.make_items(lexicon, examples, tiny.DOMAINS)
        self.assertEqual(
            [item["id"] for item in items],
            ["test.medical.1.cell", "test.religious.3.cell", "test.software.2.spirit"],
        )
        medical = items[0]
        self.assertEqual(medical["translation"], "cellule")
        self.assertEqual(
            medical["variants"],
            [
                {"domain": "religious", "translation": "cachot", "text": "le grand cachot"},
                {"domain": "software", "translation": "case", "text": "le grand case"},
            ],
        )
        # Religious and software both say "esprit": the only variant is medical's.
        self.assertEqual(
            [(v["domain"], v["text"]) for v in items[2]["variants"]], [("medical", "un alcool ici")]
        )

    def test_items_file_named_like_its_summary_is_refused(self):
        # The summary (STEM.md) used to be written over the items.
        out = os.path.join(self.get_temp_dir(), "items.md")
        with self.assertRaisesRegex(
            UserError, "^%s: the items file would be replaced" % re.escape(out)
        ):
            contrastive.build_items(os.path.join(self.get_temp_dir(), "corpus"), out)
        self.assertFalse(os.path.exists(out))

    def test_no_item_when_translations_are_equal(self):
        lexicon = contrastive.find_translations(
            _pairs(domains=["religious", "software"]), min_count=3
        )
        self.assertNotIn("spirit", lexicon)
        examples = [("test", "software", 1, "a spirit", "un esprit")]
        self.assertEqual(contrastive.make_items(lexicon, examples, ["religious", "software"]), [])

    def test_number_case_and_elision(self):
        lexicon = {
            "save": _entry(
                "save",
                collections.OrderedDict(
                    [("religious", _sense("sauver")), ("software", _sense("enregistrer"))]
                ),
            ),
            "spirit": _entry(
                "spirit",
                collections.OrderedDict(
                    [
                        ("medical", _sense("alcool")),
                        ("religious", _sense("esprit")),
                        ("software", _sense("case")),
                    ]
                ),
            ),
        }
        examples = [
            ("test", "religious", 1, "Spirits, save!", "Esprits et ESPRIT: sauver l'esprit"),
            ("dev", "software", 2, "To save", "Enregistrer"),
            ("test", "religious", 3, "spirit", "le esprit et alcool"),  # Has medical's word.
        ]
        items = contrastive.make_items(lexicon, examples, tiny.DOMAINS)
        texts = {(item["id"], v["domain"]): v["text"] for item in items for v in item["variants"]}
        self.assertEqual(
            texts,
            {
                ("test.religious.1.save", "software"): "Esprits et ESPRIT: enregistrer l'esprit",
                # "l'case" would give the variant away: only medical's "l'alcool" is kept.
                ("test.religious.1.spirit", "medical"): "Alcools et ALCOOL: sauver l'alcool",
                ("dev.software.2.save", "religious"): "Sauver",
                # The reference has medical's word already: software's variant only.
                ("test.religious.3.spirit", "software"): "le case et alcool",
            },
        )
        self.assertEqual(
            [item["id"] for item in items],
            [
                "test.religious.1.save",
                "test.religious.1.spirit",
                "test.religious.3.spirit",
                "dev.software.2.save",
            ],
        )

    def test_caps(self):
        lexicon = contrastive.find_translations(_pairs(), min_count=3)
        examples = [("test", "medical", i, "the cell", "le cellule") for i in range(1, 6)]
        examples += [("test", "medical", i, "a host", "un hote") for i in range(6, 9)]
        examples += [("dev", "medical", 1, "the cell", "le cellule")]
        items = contrastive.make_items(lexicon, examples, tiny.DOMAINS, max_per_word=4)
        self.assertEqual(
            [item["line"] for item in items if item["word"] == "cell"], [1, 2, 3, 4]
        )  # Test sentences first.
        items = contrastive.make_items(lexicon, examples, tiny.DOMAINS, max_items=5)
        # Round-robin over (domain, word) groups: 3 cell and 2 host items.
        self.assertEqual(
            collections.Counter(item["word"] for item in items), {"cell": 3, "host": 2}
        )
        with self.assertRaisesRegex(UserError, "max_per_word and max_items must be >= 1"):
            contrastive.make_items(lexicon, examples, tiny.DOMAINS, max_items=0)


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
        result = contrastive.summarize(items, records, ["medical", "software"])
        self.assertEqual(result["values"], {"medical": 50.0, "software": 0.0, "all": 100 / 3})
        self.assertEqual(result["counts"], {"medical": 2, "software": 1, "all": 3})
        self.assertEqual(result["words"], {"cell": 50.0, "host": 0.0})
        self.assertAllClose(result["margin"]["medical"], 0.5)
        # Follow: pairs where a variant beats the reference (a system that ignores labels).
        result = contrastive.summarize(items, records, ["medical", "software"], follow=True)
        self.assertEqual(result["counts"], {"medical": 3, "software": 1, "all": 4})
        self.assertEqual(result["values"]["medical"], 0.0)
        self.assertEqual(result["values"]["software"], 100.0)
        # Flipped: each variant against the reference under the variant's label.
        flipped = [
            {"reference": [-2.0, -1.0], "variants": [-1.5, -3.0]},
            {"reference": [-1.0], "variants": [-1.0]},
            {"reference": [-5.0], "variants": [-4.0]},
        ]
        result = contrastive.summarize(items, flipped, ["medical", "software"], follow=True)
        self.assertAllClose(result["values"]["medical"], 100 / 3)
        self.assertEqual(result["values"]["all"], 50.0)
        self.assertIsNone(
            contrastive.summarize(items[:1], records[:1], ["medical", "religious"])["values"][
                "religious"
            ]
        )

    def test_label_shift(self):
        items = [{"domain": "a", "word": "w", "variants": [{}, {}]}]
        oracle = [{"reference": -1.0, "variants": [-3.0, -2.0]}]
        # Under the first variant's label: -1 vs -2 (from -2 behind to -1 behind: +1).
        # Under the second's: -1 vs -3 (from -1 behind to -2 behind: -1).
        flipped = [{"reference": [-1.0, -1.0], "variants": [-2.0, -3.0]}]
        result = contrastive.label_shift(items, oracle, flipped, ["a"])
        self.assertEqual(result["values"], {"a": 50.0, "all": 50.0})
        self.assertEqual(result["counts"], {"a": 2, "all": 2})
        self.assertAllClose(result["margin"]["a"], 0.0)

    def test_markdown_table(self):
        row = {"values": {"a": 50.0, "b": None, "all": 50.0}, "labels": True}
        results = {
            "domains": ["a", "b"],
            "items": {"a": 2, "b": 0},
            "pairs": {"a": 3, "b": 0},
            "items_file": "items.jsonl",
            "items_sha1": "0123456789abcdef",
            "rows": [
                dict(row, row="M", metric="accuracy", labels=False),
                dict(row, row="M", metric="follow", labels=False),
                dict(row, row="L (oracle)", metric="accuracy"),
                dict(row, row="L (flipped)", metric="follow"),
                dict(row, row="L", metric="shift", margin={"a": 0.5, "b": None, "all": 0.5}),
            ],
        }
        table = contrastive.markdown_table(results)
        self.assertIn("| *items* | 2 | 0 | 2 |", table)
        self.assertIn("| L (oracle) | 50.0 | - | 50.0 |", table)
        self.assertIn("| M (labels ignored) | 50.0 | - | 50.0 |", table)
        self.assertIn("| L (flipped) | 50.0 | - | 50.0 |", table)
        self.assertIn("| L | 50.0 (+0.50) | - | 50.0 (+0.50) |", table)


def _save_untrained(directory, name, corpus_dir):
    """A model directory with a random checkpoint: a "trained" tiny model, without training."""
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
    helpers.randomize_weights(model, seed=3)
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
            _pairs(count=40, seed=2),
            cls.corpus,
            dev_size=3,
            test_size=6,
            bpe_merges=30,
            log=lambda _: None,
        )
        cls.configs = {name: _save_untrained(cls.dir, name, cls.corpus) for name in _DEFINITIONS}
        # Two hand items: the second's only variant is its reference (a tie).
        cls.items = _write(
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
        cls.results = contrastive.evaluate(cls.corpus, systems, cls.out, items_path=cls.items)

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
        src = _write(
            os.path.join(directory, "s"), [" ".join(src_tok.tokenize(source)[0])] * len(targets)
        )
        labels = _write(os.path.join(directory, "l"), [label] * len(targets))
        tgt = _write(
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
        for name in (contrastive.RESULTS_FILE, contrastive.TABLE_FILE, contrastive.CHART_FILE):
            self.assertTrue(os.path.exists(os.path.join(self.out, name)), name)

    def test_scores_are_reused(self):
        systems = [evaluate.System(n, [c]) for n, c in sorted(self.configs.items())]
        with mock.patch.object(Runner, "score", side_effect=AssertionError("scored again")):
            results = contrastive.evaluate(self.corpus, systems, self.out, items_path=self.items)
        self.assertEqual(results["rows"], self.results["rows"])
        # Another checkpoint (a changed stamp): every mode's scores are redone.
        out = os.path.join(self.get_temp_dir(), "stale")
        shutil.copytree(self.out, out)
        _write(os.path.join(out, "ldr.contrastive.stamp"), ["other-checkpoint"])
        with mock.patch.object(Runner, "score", side_effect=AssertionError("scored again")):
            with self.assertRaisesRegex(AssertionError, "scored again"):
                contrastive.evaluate(
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
        score_system = contrastive._score_system

        def fake_score(runner, features_file, predictions_file=None, **kwargs):
            with open(predictions_file) as f:
                targets = f.read().splitlines()
            _write(kwargs["output_file"], ["%d ||| %s" % (len(t), t) for t in targets])

        def killed(*args):
            score_system(*args)
            raise KeyboardInterrupt

        with mock.patch.object(
            evaluate.System, "checkpoint", autospec=True, return_value="other-weights"
        ), mock.patch.object(
            Runner, "score", autospec=True, side_effect=fake_score
        ), mock.patch.object(
            contrastive, "_score_system", side_effect=killed
        ):
            with self.assertRaises(KeyboardInterrupt):
                contrastive.evaluate(
                    self.corpus, systems, out, items_path=self.items, modes=["oracle"]
                )
        with mock.patch.object(Runner, "score", side_effect=AssertionError("scored again")):
            with self.assertRaisesRegex(AssertionError, "scored again"):
                contrastive.evaluate(
                    self.corpus, systems, out, items_path=self.items, modes=["oracle"]
                )

    def test_files_it_did_not_write_are_left_alone(self):
        # A score file without its system's stamp is not the evaluation's: it used to be
        # removed.
        out = os.path.join(self.get_temp_dir(), "foreign")
        os.makedirs(out)
        mine = _write(os.path.join(out, "ldr.wrong.contrastive.jsonl"), ["my own file"])
        systems = [evaluate.System("ldr", [self.configs["ldr"]])]
        regex = "^%s: a file ldr-eval contrastive did not write \\(no %s\\)" % (
            re.escape(mine),
            re.escape(os.path.join(out, "ldr.contrastive.stamp")),
        )
        with mock.patch.object(Runner, "score", side_effect=AssertionError("scored")):
            with self.assertRaisesRegex(UserError, regex):
                contrastive.evaluate(
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
                contrastive.evaluate(self.corpus, systems, out, items_path=self.items)
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
        victim = _write(os.path.join(self.get_temp_dir(), "victim"), ["precious"])
        names = ["ldr.contrastive.input.%s" % n for n in ("src", "labels", "tgt")]
        names += ["ldr.contrastive.scores.partial", "ldr.contrastive.stamp"]
        names += [contrastive.CHART_FILE + ".partial", contrastive.CHART_FILE]
        for name in names:
            os.symlink(victim, os.path.join(out, name))

        def score(runner, features_file, predictions_file=None, **kwargs):
            with open(predictions_file) as f:
                targets = f.read().splitlines()
            _write(kwargs["output_file"], ["%d ||| %s" % (len(t), t) for t in targets])

        systems = [evaluate.System("ldr", [self.configs["ldr"]])]
        with mock.patch.object(Runner, "score", autospec=True, side_effect=score):
            results = contrastive.evaluate(
                self.corpus, systems, out, items_path=self.items, modes=["oracle"]
            )
        self.assertEqual([row["row"] for row in results["rows"]], ["ldr"])
        with open(victim) as f:
            self.assertEqual(f.read(), "precious\n")
        for name in ("ldr.contrastive.stamp", contrastive.CHART_FILE):
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
            results = contrastive.evaluate(
                self.corpus, systems, out, items_path=self.items, modes=["oracle"]
            )
        expected = [row for row in self.results["rows"] if row["row"] == "ldr (oracle)"]
        self.assertEqual([row["values"] for row in results["rows"]], [expected[0]["values"]])

    def test_cache_only(self):
        out = os.path.join(self.get_temp_dir(), "cache")
        shutil.copytree(self.out, out)
        os.remove(os.path.join(out, contrastive.RESULTS_FILE))
        systems = [evaluate.System(n, [c]) for n, c in sorted(self.configs.items())]
        with mock.patch.object(Runner, "score", side_effect=AssertionError("scored again")):
            self.assertIsNone(
                contrastive.evaluate(
                    self.corpus, systems, out, items_path=self.items, cache_only=True
                )
            )
        self.assertFalse(os.path.exists(os.path.join(out, contrastive.RESULTS_FILE)))
        # Scores missing for one system: only those are made, and still no summary.
        for name in os.listdir(out):
            if name.startswith("ldr."):
                os.remove(os.path.join(out, name))
        contrastive.evaluate(self.corpus, systems, out, items_path=self.items, cache_only=True)
        self.assertFalse(os.path.exists(os.path.join(out, contrastive.RESULTS_FILE)))
        with mock.patch.object(Runner, "score", side_effect=AssertionError("scored again")):
            results = contrastive.evaluate(self.corpus, systems, out, items_path=self.items)
        self.assertEqual(results["rows"], self.results["rows"])

    def test_cli_and_errors(self):
        out = os.path.join(self.dir, "cli")
        argv = ["contrastive", "--corpus", self.corpus, "--out", out]
        status, _ = helpers.run_cli(cli.main, argv + ["--seed-words", "none", "--min-count", "3"])
        self.assertEqual(status, 0)  # Builds the items only.
        with open(os.path.join(out, contrastive.ITEMS_FILE)) as f:
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
        with open(os.path.join(self.out, contrastive.RESULTS_FILE)) as f:
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
        bad = _write(os.path.join(self.dir, "bad.jsonl"), ['{"domain": "medical"}'])
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

    @parameterized.expand(
        [
            ("not json", ["{"], r":1: not a JSON object"),
            ("list", ["[1]"], r":1: not a JSON object"),
            (
                "no variants",
                ['{"domain": "medical", "word": "w", "source": "s", "reference": "r"}'],
                r":1: item without a valid 'variants'",
            ),
            (
                "same domain",
                [
                    '{"domain": "medical", "word": "w", "source": "s", "reference": "r", '
                    '"variants": [{"domain": "medical", "text": "t"}]}'
                ],
                r":1: variant domain 'medical' must be another domain",
            ),
            (
                "bad variant",
                [
                    "",
                    '{"domain": "medical", "word": "w", "source": "s", "reference": "r", '
                    '"variants": [["software", "t"]]}',
                ],
                r":2: a variant must be",
            ),
            (
                "unknown domain",
                [
                    '{"domain": "legal", "word": "w", "source": "s", "reference": "r", '
                    '"variants": [{"domain": "medical", "text": "t"}]}'
                ],
                r":1: unknown domain 'legal' \(domains: medical, religious, software\)",
            ),
            ("empty", [], r": no items"),
        ]
    )
    def test_malformed_items(self, _, lines, regex):
        path = _write(os.path.join(self.get_temp_dir(), "items.jsonl"), lines)
        with self.assertRaisesRegex(UserError, "^" + path + regex):
            contrastive.read_items(path, tiny.DOMAINS)

    def test_unknown_mode(self):
        system = evaluate.System("ldr", [self.configs["ldr"]])
        with self.assertRaisesRegex(UserError, r"unknown contrastive label modes \['pred'\]"):
            contrastive.evaluate(self.corpus, [system], self.out, self.items, modes=["pred"])
        with self.assertRaisesRegex(UserError, "given for 'x', which is not a system"):
            contrastive.evaluate(
                self.corpus, [system], self.out, self.items, system_modes={"x": ["oracle"]}
            )

    def test_build_items_on_a_corpus(self):
        path = os.path.join(self.get_temp_dir(), "items.jsonl")
        items = contrastive.build_items(self.corpus, path, seed_words=None, min_count=3)
        self.assertEqual(contrastive.read_items(path, tiny.DOMAINS), items)
        with open(path) as f:
            first = f.read()
        contrastive.build_items(self.corpus, path, seed_words=None, min_count=3)
        with open(path) as f:
            self.assertEqual(f.read(), first)  # Deterministic.
        for item in items:
            for variant in item["variants"]:
                self.assertNotEqual(variant["text"], item["reference"])
        with open(os.path.join(self.get_temp_dir(), "items.lexicon.json")) as f:
            lexicon = json.load(f)["words"]
        self.assertEqual(lexicon["cell"]["senses"]["religious"]["translation"], "cachot")
        np.testing.assert_equal(sorted(lexicon), ["cell", "host", "spirit"])


if __name__ == "__main__":
    tf.test.main()
