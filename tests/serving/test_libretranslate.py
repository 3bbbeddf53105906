"""LibreTranslate's and OpenNMT-py's APIs of ``ldr-serve`` (in process over the fake backend,
and the real ``libretranslatepy`` client against a uvicorn server on 127.0.0.1), and
``POST /detect_domain``."""

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
            (200, {"translatedText": expected("the cell", "generic"), "domain": "generic"}),
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
        ):
            self.assert_error(self.post(dict(base, q=q)), 422, regex)
        self.assert_error(
            self.post({"q": "a", "source": "en", "target": "fr", "domain": "law"}),
            422,
            '^domain: unknown domain "law"',
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
            with self.assertRaises(Exception) as context:  # urllib's HTTPError: 422.
                client.translate("the cell", "de", "fr")
            self.assertEqual(context.exception.code, 422)
            self.assertRegex(json.loads(context.exception.read())["error"], '^source: "de" is not')


if __name__ == "__main__":
    unittest.main()
