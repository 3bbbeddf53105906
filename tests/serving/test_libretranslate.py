"""LibreTranslate's and OpenNMT-py's APIs of ``ldr-serve`` (in process over the fake backend,
and the real ``libretranslatepy`` client against a uvicorn server on 127.0.0.1), and
``POST /detect_domain``: texts split into sentences translated as one batch, the domain the
classifier picks for a whole text (``"domain": "auto"``), and the export's languages.

The real client against a real ``ldr-serve`` on an export of a corpus's files is
``tests/serving/test_server.py``'s ``test_libretranslatepy_client_on_the_corpus_languages``."""

import json
import unittest

import libretranslatepy
from starlette.testclient import TestClient

from tests.serving import fake_backend
from tests.serving.fake_backend import expected


class LibreTranslateTest(fake_backend.AppTestCase):
    def test_libretranslate_json_and_form_bodies(self):
        status, answer = self.post({"q": "the cell", "source": "en", "target": "fr"})
        self.assertEqual(
            (status, answer),
            (
                200,
                {
                    "translatedText": expected("the cell", "generic"),
                    "domain": "generic",
                    "domain_choice": "generic: no label",
                },
            ),
        )
        status, answer = self.post(
            {"q": ["a b", "c"], "source": "auto", "target": "fr", "format": "text",
             "alternatives": 2, "api_key": "ignored", "domain": "software"}
        )  # fmt: skip
        self.assertEqual(status, 200, answer)
        self.assertEqual(
            answer["translatedText"], [expected("a b", "software"), expected("c", "software")]
        )
        self.assertEqual(answer["alternatives"][1], ["software c #1", "software c #2"])
        self.assertEqual(answer["detectedLanguage"][0], {"language": "en", "confidence": 100.0})
        self.assertEqual(answer["domain"], ["software", "software"])
        self.assertEqual(answer["domain_choice"], ["given", "given"])
        response = self.client.post(
            "/translate", data={"q": "a host", "source": "en", "target": "fr", "domain": "medical"}
        )
        self.assertEqual(response.status_code, 200, response.text)
        self.assertEqual(response.json()["translatedText"], expected("a host", "medical"))
        self.assert_error(
            self.post({"q": "a", "source": "de", "target": "fr"}), 422, '^source: "de" is not'
        )
        self.assert_error(
            self.post({"q": "a", "source": "en", "target": "fr", "format": "html"}),
            422,
            "^format: html is not supported",
        )
        self.assert_error(self.post({"q": "a", "target": "fr"}), 422, "^source: missing")
        base = {"source": "en", "target": "fr"}
        for q, regex in (
            (5, "^q: expected a string or a list of strings, got 5$"),
            ([], "^q: empty list$"),
            (["a"] * 5, "^q: 5 items, more than this server's limit of 4$"),
            (["a", 3], r"^q\[1\]: expected a string, got 3$"),
            (" \n ", "^q: empty text$"),
            (["a", ""], r"^q\[1\]: empty text$"),
            (
                "One. Two. Three.\nFour. Five.",
                "^q: 5 sentences, more than this server's limit "
                r"of 4 per request \(--max_sentences\): send the text in parts$",
            ),
        ):
            self.assert_error(self.post(dict(base, q=q)), 422, regex)
        self.assert_error(
            self.post({"q": "a", "source": "en", "target": "fr", "domain": "law"}),
            422,
            '^domain: unknown domain "law"',
        )

    def test_a_text_is_translated_sentence_by_sentence_in_one_batch(self):
        # Was: the whole text as one input, answered as one invented sentence.
        models = {name: fake_backend.FakeModel(name) for name in fake_backend.DOMAINS}
        application = fake_backend.app(models, source_language="en", target_language="fr")
        text = "The cell is here. A host is here!\n\n  Is it? Yes."
        with TestClient(application) as client:
            response = client.post(
                "/translate",
                json={"q": text, "source": "en", "target": "fr", "alternatives": 1},
            )
        self.assertEqual(response.status_code, 200, response.text)
        answer = response.json()
        translations = [
            expected(s, "generic")
            for s in ("The cell is here.", "A host is here!", "Is it?", "Yes.")
        ]
        self.assertEqual(
            answer["translatedText"],
            "%s %s\n\n  %s %s" % tuple(translations),
        )
        self.assertEqual(
            answer["alternatives"], ["%s #1 %s #1\n\n  %s #1 %s #1" % tuple(translations)]
        )
        self.assertEqual(models["generic"].batches, [4])  # One batch of its sentences.
        # A list of texts: one translation per text, each rebuilt from its sentences.
        status, answer = self.post({"q": ["One. Two.", "Three"], "source": "en", "target": "fr"})
        self.assertEqual(status, 200, answer)
        self.assertEqual(
            answer["translatedText"],
            [
                "%s %s" % (expected("One.", "generic"), expected("Two.", "generic")),
                expected("Three", "generic"),
            ],
        )
        # A sentence too long is named by its text and its place.
        status, answer = self.post(
            {"q": ["a", "One. " + "X " * 300], "source": "en", "target": "fr"}
        )
        self.assertEqual(status, 422, answer)
        self.assertRegex(answer["error"], r"^q\[1\], sentence 2: 300 tokens, more than")

    def test_without_a_domain_each_text_gets_the_classifier_s(self):
        application = fake_backend.app(
            classifier=fake_backend.FakeClassifier(), source_language="en", target_language="fr"
        )
        # Sentence by sentence, the classifier would say software, then medical: the text
        # as a whole is software (it has "file"), and so are both its sentences.
        text = "Open the file now. Take a dose."
        with TestClient(application) as client:
            for extra in ({}, {"domain": "auto"}, {"domain": None}):
                body = dict(
                    {"q": [text, "Take a dose."], "source": "auto", "target": "fr"}, **extra
                )
                response = client.post("/translate", json=body)
                self.assertEqual(response.status_code, 200, response.text)
                answer = response.json()
                self.assertEqual(
                    answer["translatedText"],
                    [
                        "%s %s"
                        % (
                            expected("Open the file now.", "software"),
                            expected("Take a dose.", "software"),
                        ),
                        expected("Take a dose.", "medical"),
                    ],
                )
                self.assertEqual(answer["domain"], ["software", "medical"])
                self.assertEqual(answer["domain_choice"], ["classifier", "classifier"])
                self.assertEqual(
                    answer["detectedLanguage"], [{"language": "en", "confidence": 100.0}] * 2
                )
        # Without a classifier: generic, and the answer says why.
        status, answer = self.post({"q": text, "source": "en", "target": "fr", "domain": "auto"})
        self.assertEqual(
            (status, answer["domain"], answer["domain_choice"]),
            (200, "generic", "generic: no label"),
        )

    def test_languages_and_detect(self):
        self.assertEqual(
            self.client.get("/languages").json(),
            [
                {"code": "en", "name": "English", "targets": ["fr"]},
                {"code": "fr", "name": "French", "targets": []},
            ],
        )
        self.assertEqual(
            self.post({"q": "the cell"}, path="/detect"),
            (200, [{"language": "en", "confidence": 100.0}]),
        )
        # A server that knows no language: no list, no detection, and auto says so.
        with TestClient(fake_backend.app()) as client:
            self.assertEqual(client.get("/languages").json(), [])
            response = client.post("/detect", json={"q": "the cell"})
            self.assertEqual(response.status_code, 501)
            response = client.post("/translate", json={"q": "a", "source": "auto", "target": "x"})
            self.assertEqual(
                response.json()["detectedLanguage"], {"language": "auto", "confidence": 0.0}
            )

    def test_detect_domain(self):
        self.assert_error(self.post({"q": "a"}, path="/detect_domain"), 501, "--classifier")
        application = fake_backend.app(classifier=fake_backend.FakeClassifier())
        with TestClient(application) as client:
            response = client.post("/detect_domain", json={"q": ["open the file", "a dose"]})
            self.assertEqual(response.status_code, 200, response.text)
            self.assertEqual(
                response.json(),
                [
                    {"domain": "software", "probability": 0.8,
                     "probabilities": {"medical": 0.2, "software": 0.8}},
                    {"domain": "medical", "probability": 0.9,
                     "probabilities": {"medical": 0.9, "software": 0.1}},
                ],
            )  # fmt: skip

    def test_opennmt_py_route(self):
        status, answer = self.post(
            [{"src": "a b", "id": 100}, {"src": "c", "id": 100, "domain": "medical"}],
            path="/translator/translate",
        )
        self.assertEqual(status, 200, answer)
        self.assertEqual(
            [r["tgt"] for r in answer[0]], [expected("a b", "generic"), expected("c", "medical")]
        )
        self.assertEqual(answer[0][0]["src"], "a b")
        self.assert_error(
            self.post([{"src": "a", "source": "a"}], path="/translator/translate"),
            422,
            r"^\[0\]\.source: unknown",
        )


class LibreTranslateClientTest(unittest.TestCase):
    def test_the_libretranslatepy_client(self):
        application = fake_backend.app(source_language="en", target_language="fr")
        with fake_backend.LiveServer(application) as live:
            client = libretranslatepy.LibreTranslateAPI(live.url, api_key="anything")
            self.assertEqual(
                client.translate("the big cell", "en", "fr"), expected("the big cell", "generic")
            )
            self.assertEqual(
                client.translate("a host", "auto", "fr"), expected("a host", "generic")
            )
            self.assertEqual(
                client.languages(),
                [
                    {"code": "en", "name": "English", "targets": ["fr"]},
                    {"code": "fr", "name": "French", "targets": []},
                ],
            )
            self.assertEqual(client.detect("the cell"), [{"language": "en", "confidence": 100.0}])
            text = "The cell is here. A host is here!\nIs it?"
            self.assertEqual(
                client.translate(text, "auto", "fr"),
                "%s %s\n%s"
                % tuple(
                    expected(s, "generic")
                    for s in ("The cell is here.", "A host is here!", "Is it?")
                ),
            )
            with self.assertRaises(Exception) as context:  # urllib's HTTPError: 422.
                client.translate("the cell", "de", "fr")
            self.assertEqual(context.exception.code, 422)
            self.assertRegex(json.loads(context.exception.read())["error"], '^source: "de" is not')


if __name__ == "__main__":
    unittest.main()
