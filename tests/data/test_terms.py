"""Terminology annotation (:mod:`ldr_opennmt.data.terms`) and ``ldr-data terms``: glossaries
checked and read, terms found and annotated, a corpus copied with annotated training sources."""

import collections
import os

import tensorflow as tf

from ldr_opennmt.cli import data as cli
from ldr_opennmt.data import corpus, terms
from ldr_opennmt.errors import UserError
from tests.helpers import assert_cli_error, run_cli

#: The tiny corpus: each domain translates "cell" its own way, always.
SENSES = {"medical": "cellule", "religious": "cachot", "software": "case"}


def _pairs(domain, count=60):
    shared = [
        ("the", "le"),
        ("big", "grand"),
        ("is", "est"),
        ("here", "ici"),
        ("now", "maintenant"),
    ]
    pairs = []
    for i in range(count):
        a, b = shared[i % 5], shared[(i // 5) % 5]
        source = "%s cell %s %s number%d" % (a[0], b[0], domain, i)
        target = "%s %s %s %s number%d" % (a[1], SENSES[domain], b[1], domain, i)
        pairs.append((source, target))
    return pairs


class GlossaryTest(tf.test.TestCase):
    def test_entries_are_checked(self):
        self.assertEqual(terms.check_glossary({" cell ": "cellule"}), [("cell", "cellule")])
        for entries, regex in (
            ({"cell": ""}, r"^glossary: 'cell': the target term must be a non-empty string$"),
            ({"": "x"}, r"the source term must be"),
            ({"a\tb": "x"}, r"a tab, a line break or a ｟｠ placeholder in the source term"),
            ({"cell": "｟term｠"}, r"placeholder in the target term"),
            ({str(i): "x" for i in range(1001)}, r"1001 entries, at most 1000"),
        ):
            with self.subTest(entries=list(entries)[:2]):
                with self.assertRaisesRegex(UserError, regex):
                    terms.check_glossary(entries)

    def test_a_file_names_its_line(self):
        path = os.path.join(self.get_temp_dir(), "g.tsv")
        with open(path, "w") as f:
            f.write("# medical\ncell\tcellule\n\nblood pressure\ttension\nbad line\n")
        with self.assertRaisesRegex(
            UserError, r"^%s:5: expected SOURCE<tab>TARGET, got 1 field\(s\)" % path
        ):
            terms.read_glossary(path)
        with open(path, "w") as f:
            f.write("cell\tcellule\nblood pressure\ttension\n")
        self.assertEqual(
            terms.read_glossary(path), [("cell", "cellule"), ("blood pressure", "tension")]
        )


class AnnotateTest(tf.test.TestCase):
    GLOSSARY = [("blood", "sang"), ("blood pressure", "tension artérielle"), ("cell", "cellule")]

    def test_whole_words_any_case_the_longest_first(self):
        text = "High Blood pressure; blood cells, a CELL."
        found = terms.find_terms(text, self.GLOSSARY)
        self.assertEqual(
            [(text[a:b], target) for a, b, target in found],
            [("Blood pressure", "tension artérielle"), ("blood", "sang"), ("CELL", "cellule")],
        )
        self.assertEqual(terms.find_terms(text, []), [])

    def test_the_target_term_is_tokenized_by_the_target_tokenizer(self):
        tokens, applied = terms.annotate(
            "the cell is here",
            self.GLOSSARY,
            str.split,
            lambda text: ["T:" + word for word in text.split()],
        )
        self.assertEqual(
            tokens,
            ["the", terms.START, "cell", terms.TRANSLATION, "T:cellule", terms.END, "is", "here"],
        )
        self.assertEqual(applied, [("cell", "cellule")])
        # Nothing to annotate: the plain tokens.
        self.assertEqual(
            terms.annotate("no term", self.GLOSSARY, str.split, str.split), (["no", "term"], [])
        )

    def test_pair_glossary_takes_the_form_the_reference_has(self):
        known = {"cell": ("cellule", "cellules"), "bone": ("os", "os")}
        self.assertEqual(
            terms.pair_glossary(
                "Two cells and a cell", "Deux cellules", known, lambda w: w.lower().rstrip("s")
            ),
            [("cells", "cellules"), ("cell", "cellules")],
        )
        self.assertEqual(terms.pair_glossary("a bone", "un squelette", known, str.lower), [])

    def test_held_out_is_a_fixed_share(self):
        words = ["word%d" % i for i in range(2000)]
        share = sum(terms.held_out(w, 0.2) for w in words) / len(words)
        self.assertAlmostEqual(share, 0.2, delta=0.03)
        self.assertEqual(
            [terms.held_out(w, 0.2) for w in words[:50]],
            [terms.held_out(w, 0.2) for w in words[:50]],
        )


class TermsCorpusTest(tf.test.TestCase):
    def setUp(self):
        super().setUp()
        self.corpus = os.path.join(self.get_temp_dir(), "corpus")
        pairs = collections.OrderedDict((d, _pairs(d)) for d in SENSES)
        corpus.build(pairs, self.corpus, dev_size=4, test_size=5, bpe_merges=20, log=lambda _: None)

    def test_ldr_data_terms_annotates_a_share_of_the_training_sources(self):
        out = os.path.join(self.get_temp_dir(), "terms")
        status, stderr = run_cli(
            cli.main,
            ["terms", "--corpus", self.corpus, "--out", out, "--rate", "0.5", "--heldout", "0"],
        )
        self.assertEqual(status, 0, stderr)
        self.assertTrue(corpus.is_built(out))
        info = corpus.load_info(out)
        medical = info["terminology"]["domains"]["medical"]
        self.assertGreater(medical["annotated"], 10)
        self.assertLess(medical["annotated"], medical["pairs"])
        with open(os.path.join(out, "train.medical.en")) as f:
            lines = f.read().splitlines()
        annotated = [line for line in lines if terms.START in line]
        self.assertLen(annotated, medical["annotated"])
        # "cell" annotated with the medical translation, tokenized by the French tokenizer.
        french = corpus.load_tokenizer(self.corpus, "fr")
        cellule = " ".join(french.tokenize("cellule")[0])
        self.assertIn(
            "%s cell %s %s %s" % (terms.START, terms.TRANSLATION, cellule, terms.END), annotated[0]
        )
        # The plain lines and every other file are the corpus's; the combined training source
        # is the domains' in order; the vocabulary keeps its ids and adds the markers.
        with open(os.path.join(self.corpus, "train.medical.en")) as f:
            original = f.read().splitlines()
        self.assertEqual(
            [a for a, b in zip(lines, original) if terms.START not in a],
            [b for a, b in zip(lines, original) if terms.START not in a],
        )
        for name in ("train.medical.fr", "test.medical.en", "vocab.fr", "raw/train.medical.en"):
            with open(os.path.join(out, name)) as a, open(os.path.join(self.corpus, name)) as b:
                self.assertEqual(a.read(), b.read(), name)
        with open(os.path.join(out, "train.en")) as f:
            combined = f.read().splitlines()
        self.assertEqual(combined[: len(lines)], lines)
        with open(os.path.join(out, "vocab.en")) as a, open(
            os.path.join(self.corpus, "vocab.en")
        ) as b:
            new, old = a.read().splitlines(), b.read().splitlines()
        self.assertEqual(new[: len(old)], old)
        for marker in terms.MARKERS:
            self.assertIn(marker, new)
        self.assertEqual(terms.read_terms(out, "medical", "train")["cell"][0], "cellule")
        self.assertEqual(terms.read_terms(out, "medical", "heldout"), {})

    def test_refusals(self):
        out = os.path.join(self.get_temp_dir(), "terms")
        assert_cli_error(
            self,
            cli.main,
            ["terms", "--corpus", self.corpus, "--out", out, "--rate", "2"],
            r"--rate: a share between 0 and 1, got 2.0",
        )
        os.makedirs(out)
        assert_cli_error(
            self,
            cli.main,
            ["terms", "--corpus", self.corpus, "--out", out],
            r"already exists: give a new directory",
        )
