"""A request's glossary (``glossary``: {source term: target term}) in ``ldr-serve``: annotated
into the sentences of a model trained with terminology (:mod:`ldr_opennmt.data.terms`), said in
the answer (``terms``), refused in one line elsewhere."""

from starlette.testclient import TestClient

from ldr_opennmt.data import terms
from ldr_opennmt.serving import app as app_lib
from ldr_opennmt.serving import backends
from tests.serving import fake_backend


class GlossaryTest(fake_backend.AppTestCase):
    """The fake backend as an export of a model trained with terminology annotation."""

    @classmethod
    def setUpClass(cls):
        opts = fake_backend.options(source_language="en", target_language="fr")
        models = {name: fake_backend.FakeModel(name) for name in fake_backend.DOMAINS}
        backend = backends.CTranslate2Backend(opts, models=models)
        backend.terminology_refusal = None
        cls.app = app_lib.create_app(opts, backend=backend)
        cls.client = TestClient(cls.app).__enter__()
        # The same backend without terminology: glossaries refused.
        plain = backends.CTranslate2Backend(
            opts, models={name: fake_backend.FakeModel(name) for name in fake_backend.DOMAINS}
        )
        cls.plain = TestClient(app_lib.create_app(opts, backend=plain)).__enter__()

    @classmethod
    def tearDownClass(cls):
        cls.plain.__exit__(None, None, None)
        super().tearDownClass()

    def test_the_terms_are_annotated_and_said(self):
        status, answer = self.post(
            {
                "sentences": ["the Cell is here", "no term here"],
                "domain": "medical",
                "glossary": {"cell": "cellule", "blood pressure": "tension"},
            }
        )
        self.assertEqual(status, 200, answer)
        first, second = answer["translations"]
        # The fake model answers its domain, then the tokens it got, reversed.
        annotated = [
            "the",
            terms.START,
            "Cell",
            terms.TRANSLATION,
            "cellule",
            terms.END,
            "is",
            "here",
        ]
        self.assertEqual(first["text"], " ".join(["medical"] + annotated[::-1]))
        self.assertEqual(first["terms"], [["Cell", "cellule"]])
        self.assertEqual(second["terms"], [])
        self.assertEqual(second["text"], fake_backend.expected("no term here", "medical"))

    def test_without_a_glossary_the_answer_has_no_terms(self):
        status, answer = self.post({"sentences": ["the cell"], "domain": "medical"})
        self.assertEqual(status, 200, answer)
        self.assertNotIn("terms", answer["translations"][0])

    def test_libretranslate_takes_a_glossary(self):
        status, answer = self.post(
            {
                "q": "A cell.",
                "source": "en",
                "target": "fr",
                "domain": "software",
                "glossary": {"cell": "case"},
            }
        )
        self.assertEqual(status, 200, answer)
        self.assertIn(terms.START, answer["translatedText"])
        self.assertIn("case", answer["translatedText"])
        self.assertEqual(answer["terms"], [["cell", "case"]])

    def test_a_bad_glossary_is_refused_naming_the_entry(self):
        for glossary, regex in (
            ({"cell": ""}, r"^glossary: 'cell': the target term must be a non-empty string$"),
            ({"cell": "a\tb"}, r"^glossary: 'cell': a tab"),
            ({str(i): "x" for i in range(1001)}, r"^glossary: 1001 entries, at most 1000$"),
            ({"cell": 3}, r"^glossary"),
        ):
            with self.subTest(glossary=list(glossary.items())[:1]):
                response = self.post({"sentences": ["a cell"], "glossary": glossary})
                self.assert_error(response, 422, regex)

    def test_a_model_not_trained_with_terminology_refuses_a_glossary(self):
        response = self.plain.post(
            "/translate", json={"sentences": ["a cell"], "glossary": {"cell": "cellule"}}
        )
        self.assertEqual(response.status_code, 422, response.text)
        self.assertEqual(
            response.json()["error"],
            "glossary: this model was not trained to apply terminology",
        )
