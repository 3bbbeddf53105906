"""``ldr-experiments terminology``'s measurements, on the tiny export (both rows) and a terms
corpus written here: term success recomputed from the translations, the report's tables."""

import json
import os
import re
import shutil

from ldr_experiments import terminology
from ldr_opennmt.data import terms
from ldr_opennmt.serving import ct2_models, tokenization
from tests import builds, helpers

#: Each domain's held-out term: the synthetic corpus's polysemous "cell".
HELDOUT = {"medical": "cellule", "religious": "cachot", "software": "case"}


class TerminologyTest(helpers.SharedDirTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        export, corpus = builds.tiny_ldr_ct2_quality()
        cls.corpus = os.path.join(cls.dir, "terms-corpus")
        shutil.copytree(os.path.join(corpus, "raw"), os.path.join(cls.corpus, "raw"))
        os.makedirs(os.path.join(cls.corpus, "terms"))
        for domain, translation in HELDOUT.items():
            with open(os.path.join(cls.corpus, "terms", "%s.heldout.tsv" % domain), "w") as f:
                f.write("cell\t%s\t%ss\n" % (translation, translation))
        with open(os.path.join(corpus, "corpus.json")) as f:
            cls.info = json.load(f)
        cls.exports = {"annotated": export, "control": export}
        cls.results = terminology.measure(cls.exports, cls.corpus, cls.info, 10)

    def test_found_is_a_whole_word_in_any_case(self):
        self.assertTrue(terminology.found("cellule", "La Cellule est ici."))
        self.assertFalse(terminology.found("cell", "la cellule"))
        self.assertTrue(terminology.found("tension artérielle", "une tension artérielle haute"))

    def test_term_success_is_the_share_of_terms_in_the_outputs(self):
        medical = self.results["medical"]
        model = ct2_models.Export(self.exports["control"]).models()["medical"]
        sources = [
            line.rstrip("\n") for line in open(os.path.join(self.corpus, "raw", "test.medical.en"))
        ][:10]
        with_terms = [i for i, s in enumerate(sources) if re.search(r"\bcell\b", s)]
        self.assertEqual(medical["sentences_with_terms"], len(with_terms))
        self.assertEqual(medical["terms"], len(with_terms))
        outputs = terminology.translate(model, [sources[i] for i in with_terms])
        expected = sum(terminology.found("cellule", o) for o in outputs) / len(with_terms)
        self.assertAlmostEqual(medical["term_success"]["control"], expected)
        # The same model: with the glossary it got annotated input (another translation).
        glossaries = [[("cell", "cellule")]] * len(with_terms)
        annotated = terminology.translate(model, [sources[i] for i in with_terms], glossaries)
        self.assertAlmostEqual(
            medical["term_success"]["annotated, glossary"],
            sum(terminology.found("cellule", o) for o in annotated) / len(with_terms),
        )
        self.assertEqual(medical["chrf_plain"]["annotated"], medical["chrf_plain"]["control"])

    def test_the_report(self):
        budget = dict(terminology.BUDGETS["quick"], sentences=10)
        text = "\n".join(terminology.report(self.results, budget, "quick", "LDR"))
        self.assertIn("## Term success on held-out terms", text)
        self.assertIn("## chrF on plain input (no glossary)", text)
        self.assertRegex(text, r"\| medical \| [0-9.]+ \| [0-9.]+ \| \+0\.0 \(met\) \|")
        self.assertIn("glossary cell = cellule", text)

    def test_the_annotation_the_study_gives_is_the_servers(self):
        model = ct2_models.Export(self.exports["control"]).models()["medical"]
        tokens, applied = terms.annotate(
            "the cell.",
            [("cell", "cellule")],
            model.tokenize,
            lambda text: tokenization.tokenize(model.target_tokenizer, text),
        )
        self.assertEqual(applied, [("cell", "cellule")])
        self.assertEqual(tokens[tokens.index(terms.START) + 1], "cell")
