"""The wrong-domain guard and the calibrated confidence as ``ldr-serve`` applies them (numpy
only): their parameters read and checked, the guard's fallback to ``generic``, and the answers
of the native and LibreTranslate routes (``domain_choice``, ``domain_probability``,
``confidence``, ``low_confidence``)."""

import json
import math
import re
import unittest

import numpy as np

from ldr_opennmt.errors import UserError
from ldr_opennmt.serving import backends
from ldr_opennmt.serving import confidence as confidence_lib
from ldr_opennmt.serving import domain_guard
from tests.serving import fake_backend

#: A guard over three n-grams: " pat" says medical, "file" says software.
GUARD = {
    "domains": ["medical", "software"],
    "ngram_range": [4, 4],
    "vocabulary": [" pat", "file", "the "],
    "idf": [2.0, 2.0, 1.0],
    "coef": [[-6.0, 6.0, 0.0]],
    "intercept": [0.0],
    "threshold": 0.9,
    "fallback": "generic",
}
#: One domain's confidence: longer outputs than inputs are surer here.
CALIBRATION = {
    "mean": [0.0, 0.0, 0.0, 0.0],
    "scale": [1.0, 1.0, 1.0, 1.0],
    "coef": [0.0, 0.0, 4.0, 0.0],
    "intercept": 0.0,
    "threshold": 0.5,
}


class CharNgramsTest(unittest.TestCase):
    def test_each_word_padded_and_a_short_word_counted_once(self):
        self.assertEqual(
            domain_guard.char_ngrams("Ab", (1, 3)),
            [" ", "a", "b", " ", " a", "ab", "b ", " ab", "ab "],
        )
        # " a " is 3 long: whole at n = 3, and nothing longer.
        self.assertEqual(domain_guard.char_ngrams("a", (1, 4)), [" ", "a", " ", " a", "a ", " a "])
        self.assertEqual(domain_guard.char_ngrams("  x\ty ", (3, 3)), [" x ", " y "])
        self.assertEqual(domain_guard.char_ngrams("", (1, 4)), [])


class DomainGuardTest(unittest.TestCase):
    def setUp(self):
        self.guard = domain_guard.DomainGuard(GUARD)

    def test_features_are_unit_length_sublinear_tf_idf(self):
        row = self.guard.features(["the file the file file"])[0]
        # "file" 3 times: (1 + ln 3) * 2; "the " twice: (1 + ln 2) * 1 (" the" is not kept).
        expected = np.array([0.0, (1 + math.log(3)) * 2, 1 + math.log(2)])
        np.testing.assert_allclose(row, expected / np.linalg.norm(expected))
        np.testing.assert_array_equal(self.guard.features(["zzz"])[0], np.zeros(3))

    def test_a_sure_pick_keeps_its_domain_an_unsure_one_goes_to_generic(self):
        choices = self.guard.choose(["open the file", "the patient", "nothing known"])
        self.assertEqual([c[0] for c in choices], ["software", "medical", "generic"])
        self.assertEqual(choices[0][2], "guard")
        self.assertGreater(choices[0][1], 0.9)
        # Without a known n-gram: 0.5 each, below 0.9.
        self.assertEqual(choices[2][2], "guard: medical 0.50 below 0.90, generic")
        posteriors = self.guard.posteriors(["open the file"])
        np.testing.assert_allclose(posteriors.sum(axis=1), [1.0])

    def test_as_the_servers_classifier(self):
        results = self.guard([self.guard.tokenize("the file"), self.guard.tokenize("xyz")])
        self.assertEqual([domain for domain, _ in results], ["software", "generic"])
        self.assertEqual(
            self.guard.choice(results[1][1]), "guard: medical 0.50 below 0.90, generic"
        )

    def test_three_domains_softmax(self):
        params = dict(
            GUARD,
            domains=["medical", "religious", "software"],
            coef=[[6.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 6.0, 0.0]],
            intercept=[0.0, 0.0, 0.0],
        )
        guard = domain_guard.DomainGuard(params)
        posterior = guard.posteriors(["the patient"])[0]
        self.assertAlmostEqual(float(posterior.sum()), 1.0)
        self.assertEqual(int(np.argmax(posterior)), 0)

    def test_bad_parameters_are_refused_naming_the_key(self):
        for change, regex in (
            ({"domains": ["medical"]}, r"domains: expected two names"),
            ({"ngram_range": [3, 2]}, r"ngram_range"),
            ({"idf": [1.0]}, r"idf, coef and intercept do not match its 3 n-grams and 2 domains"),
            ({"coef": "x"}, r"coef is missing or not numbers"),
            ({"threshold": 2}, r"threshold: expected a number in \[0, 1\]"),
            ({"vocabulary": [1, 2, 3]}, r"vocabulary"),
        ):
            with self.subTest(change=change):
                with self.assertRaisesRegex(UserError, "^q.json: domain_guard: " + regex):
                    domain_guard.DomainGuard(dict(GUARD, **change), where="q.json")


class ConfidenceTest(unittest.TestCase):
    def test_features_and_flags(self):
        self.assertEqual(
            confidence_lib.features(3, 7, -2.0),
            [-2.0, -2.0 / 7, math.log(8 / 4), math.log(4)],
        )
        confidence = confidence_lib.Confidence(
            {"features": list(confidence_lib.FEATURES), "domains": {"medical": CALIBRATION}}
        )
        scored = confidence.score("medical", [4, 4], [(["a"] * 9, -1.0), (["a"], -1.0)])
        self.assertGreater(scored[0][0], 0.5)
        self.assertFalse(scored[0][1])
        self.assertLess(scored[1][0], 0.5)
        self.assertTrue(scored[1][1])
        self.assertIsNone(confidence.score("software", [4], [(["a"], -1.0)]))

    def test_bad_parameters_are_refused_naming_the_domain_and_key(self):
        with self.assertRaisesRegex(UserError, r"^q.json: confidence: features: "):
            confidence_lib.Confidence({"features": ["score"], "domains": {}}, where="q.json")
        for change, regex in (
            ({"scale": [1.0, 0.0, 1.0, 1.0]}, r"scale: expected positive"),
            ({"coef": [1.0]}, r"coef: expected 4 numbers"),
            ({"threshold": -1}, r"threshold"),
            ({"intercept": None}, r"intercept"),
        ):
            with self.subTest(change=change):
                with self.assertRaisesRegex(UserError, r"^q.json: confidence: medical: " + regex):
                    confidence_lib.Confidence(
                        {
                            "features": list(confidence_lib.FEATURES),
                            "domains": {"medical": dict(CALIBRATION, **change)},
                        },
                        where="q.json",
                    )


class ServedTest(fake_backend.AppTestCase):
    """The fake backend with the guard and medical's calibration, as an export's would be."""

    @classmethod
    def setUpClass(cls):
        from starlette.testclient import TestClient  # pylint: disable=import-outside-toplevel

        opts = fake_backend.options(source_language="en", target_language="fr")
        models = {name: fake_backend.FakeModel(name) for name in fake_backend.DOMAINS}
        backend = backends.CTranslate2Backend(opts, models=models)
        backend.guard = domain_guard.DomainGuard(GUARD)
        backend.calibrations = {"medical": confidence_lib.DomainConfidence(CALIBRATION, "m")}
        cls.app = fake_backend.app_lib.create_app(opts, backend=backend)
        cls.client = TestClient(cls.app).__enter__()

    def test_without_a_domain_the_guard_chooses(self):
        status, answer = self.post({"sentences": ["the patient is here", "open the file", "hm"]})
        self.assertEqual(status, 200, answer)
        got = [(t["domain"], t["domain_choice"]) for t in answer["translations"]]
        self.assertEqual(
            got,
            [
                ("medical", "guard"),
                ("software", "guard"),
                ("generic", "guard: medical 0.50 below 0.90, generic"),
            ],
        )
        self.assertEqual(
            answer["translations"][1]["text"], fake_backend.expected("open the file", "software")
        )
        self.assertGreater(answer["translations"][0]["domain_probability"], 0.9)
        # The calibrated domain answers with a confidence; the others with none.
        medical = answer["translations"][0]
        self.assertTrue(0 <= medical["confidence"] <= 1)
        self.assertEqual(medical["low_confidence"], medical["confidence"] < 0.5)
        for translation in answer["translations"][1:]:
            self.assertNotIn("confidence", translation)
            self.assertNotIn("low_confidence", translation)

    def test_a_given_domain_is_not_guarded(self):
        status, answer = self.post({"sentences": ["open the file"], "domain": "medical"})
        self.assertEqual(status, 200, answer)
        self.assertEqual(answer["translations"][0]["domain_choice"], "given")
        self.assertNotIn("domain_probability", answer["translations"][0])
        self.assertIn("confidence", answer["translations"][0])

    def test_domains_says_the_guard_and_the_calibrated_domains(self):
        answer = self.client.get("/domains").json()
        self.assertEqual(answer["classifier"], "guard")
        self.assertEqual(answer["guard_threshold"], 0.9)
        self.assertEqual(answer["classifier_domains"], ["medical", "software"])
        self.assertEqual(answer["confidence_domains"], ["medical"])
        self.assertEqual(answer["unlabelled"], "classifier")

    def test_libretranslate_text_is_as_sure_as_its_least_sure_sentence(self):
        # The fake model answers "medical" + reversed tokens: a longer output than input.
        status, answer = self.post(
            {"q": ["The patient. A patient is here.", "Open the file."], "source": "en",
             "target": "fr", "domain": "medical"},
        )  # fmt: skip
        self.assertEqual(status, 200, answer)
        scores = self.post({"sentences": ["The patient.", "A patient is here."], "domain":
                            "medical"})[1]["translations"]  # fmt: skip
        self.assertEqual(answer["confidence"][0], min(t["confidence"] for t in scores))
        self.assertEqual(answer["low_confidence"][0], any(t["low_confidence"] for t in scores))
        self.assertEqual(len(answer["confidence"]), 2)

    def test_metrics_count_the_guards_choices_and_the_confidences(self):
        self.post({"sentences": ["the patient is here", "hm", "hm"]})
        self.post({"sentences": ["open the file"], "domain": "medical"})
        text = self.client.get("/metrics").text

        def value(name, **labels):
            found = re.search(
                r"^%s\{%s\} ([0-9.]+)$"
                % (name, ",".join('%s="%s"' % item for item in sorted(labels.items()))),
                text,
                re.MULTILINE,
            )
            return float(found.group(1)) if found else 0.0

        # Counters of the whole class's requests: at least this test's.
        guard = "ldr_serve_guard_choices_total"
        self.assertGreaterEqual(value(guard, domain="medical", fallback="false"), 1)
        self.assertGreaterEqual(value(guard, domain="generic", fallback="true"), 2)
        self.assertEqual(value(guard, domain="software", fallback="true"), 0)
        sure = "ldr_serve_confidence_sentences_total"
        medical = value(sure, domain="medical", low_confidence="false") + value(
            sure, domain="medical", low_confidence="true"
        )
        self.assertGreaterEqual(medical, 2)
        self.assertEqual(value(sure, domain="generic", low_confidence="false"), 0)

    def test_detect_domain_uses_the_guard(self):
        response = self.client.post(
            "/detect_domain", content=json.dumps({"q": "open the file"}), headers=fake_backend.JSON
        )
        self.assertEqual(response.status_code, 200, response.text)
        self.assertEqual(response.json()[0]["domain"], "software")


if __name__ == "__main__":
    unittest.main()
