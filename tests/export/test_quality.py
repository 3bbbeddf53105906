"""What ``ldr-export ctranslate2 --domain_guard --confidence --corpus`` learns from a corpus
(:mod:`ldr_opennmt.export.quality`): fitted with scikit-learn, applied by the serving modules
with numpy to the same figures, stored in the export with its hash, and served."""

import json
import os
import shutil
import types

import numpy as np
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression

from ldr_opennmt.cli import export as export_cli
from ldr_opennmt.errors import UserError
from ldr_opennmt.export import quality
from ldr_opennmt.serving import confidence as confidence_lib
from ldr_opennmt.serving import ct2_models, domain_guard
from ldr_opennmt.serving import manifest as manifest_lib
from tests import builds, corpus

WORDS = {
    "medical": ["patient", "dose", "tumour", "cell", "blood", "heart"],
    "religious": ["lord", "prophet", "temple", "spirit", "heaven", "sin"],
    "software": ["click", "file", "server", "window", "menu", "save"],
}


def _texts(domain, count, seed):
    rng = np.random.RandomState(seed)
    shared = ["the", "a", "is", "here", "now", "big"]
    return [
        " ".join(rng.choice(WORDS[domain] + shared, size=rng.randint(2, 7))) for _ in range(count)
    ]


class CharNgramsTest(tf.test.TestCase):
    @settings(max_examples=200, deadline=None)
    @given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40))
    def test_the_serving_ngrams_are_scikit_learns_char_wb(self, text):
        analyzer = TfidfVectorizer(analyzer="char_wb", ngram_range=quality.NGRAM_RANGE)
        self.assertEqual(
            domain_guard.char_ngrams(text, quality.NGRAM_RANGE), analyzer.build_analyzer()(text)
        )


class GuardTest(tf.test.TestCase):
    def test_the_serving_posteriors_are_scikit_learns(self):
        for domains in (["medical", "software"], ["medical", "religious", "software"]):
            with self.subTest(domains=domains):
                texts, labels = [], []
                for i, domain in enumerate(domains):
                    texts += _texts(domain, 60, i)
                    labels += [i] * 60
                vectorizer, classifier = quality.fit_guard_model(texts, labels, features=300)
                guard = domain_guard.DomainGuard(
                    quality.guard_params(vectorizer, classifier, domains)
                )
                probe = _texts(domains[0], 10, 99) + ["Unseen words altogether!", "x"]
                np.testing.assert_allclose(
                    guard.posteriors(probe),
                    classifier.predict_proba(vectorizer.transform(probe)),
                    rtol=1e-9,
                    atol=1e-12,
                )

    def test_the_threshold_sends_about_five_percent_of_dev_to_generic(self):
        train = {d: _texts(d, 200, i) for i, d in enumerate(WORDS)}
        dev = {d: _texts(d, 100, 10 + i) for i, d in enumerate(WORDS)}
        params, summary = quality.fit_guard(train, dev)
        self.assertGreater(summary["dev_accuracy"], 0.9)
        self.assertLessEqual(summary["dev_fallback_rate"], quality.DEV_FALLBACK_RATE + 0.01)
        self.assertGreater(summary["dev_fallback_rate"], 0)
        self.assertEqual(summary["train_sentences"], {d: 200 for d in WORDS})
        guard = domain_guard.DomainGuard(params)
        self.assertEqual(guard.threshold, params["threshold"])
        kept = [c for c in guard.choose(sum(dev.values(), [])) if c[0] != "generic"]
        self.assertAlmostEqual(len(kept) / 300, 1 - summary["dev_fallback_rate"], delta=0.01)
        # Text of every domain at once is unsure: generic, saying what it would have picked.
        domain, probability, why = guard.choose(["heaven file blood"])[0]
        self.assertEqual(domain, "generic")
        self.assertLess(probability, guard.threshold)
        self.assertRegex(why, r"^guard: \w+ 0\.\d\d below 0\.\d\d, generic$")

    def test_an_empty_domain_is_refused(self):
        with self.assertRaisesRegex(UserError, "training text of domain 'software' has no"):
            quality.fit_guard({"medical": ["a patient"], "software": [" "]}, {})


class ConfidenceFitTest(tf.test.TestCase):
    def test_the_serving_confidence_is_scikit_learns_logistic_model(self):
        rng = np.random.RandomState(0)
        rows = rng.normal(size=(200, len(confidence_lib.FEATURES))) * [1, 0.5, 2, 3] + [
            -5,
            -1,
            0,
            2,
        ]
        good = rows[:, 0] + rng.normal(scale=1.0, size=200) > -5
        entry = quality.fit_domain_confidence(rows.tolist(), good.tolist())
        model = confidence_lib.DomainConfidence(entry, "medical")
        scaled = (rows - rows.mean(axis=0)) / rows.std(axis=0)
        reference = LogisticRegression(max_iter=1000).fit(scaled, good)
        np.testing.assert_allclose(model(rows), reference.predict_proba(scaled)[:, 1], rtol=1e-6)
        self.assertGreater(entry["dev_auroc"], 0.7)
        self.assertAlmostEqual(
            entry["dev_flagged"], float((model(rows) < entry["threshold"]).mean())
        )
        # The flag is Youden's best on dev: it flags more of the bad than of the good.
        flagged = model(rows) < entry["threshold"]
        self.assertGreater(flagged[~good].mean(), flagged[good].mean())

    def test_one_class_gives_a_constant_confidence(self):
        entry = quality.fit_domain_confidence([[0.0, 1.0, 2.0, 3.0]] * 5, [True] * 5)
        self.assertIsNone(entry["dev_auroc"])
        model = confidence_lib.DomainConfidence(entry, "medical")
        np.testing.assert_allclose(model([[9.0, 9.0, 9.0, 9.0]]), [0.5])

    def test_a_missing_raw_file_is_named(self):
        directory = self.get_temp_dir()
        with self.assertRaisesRegex(
            UserError, r"^%s: not found: --corpus must be a corpus built by ldr-data"
            % os.path.join(directory, "raw", "dev.medical.en")
        ):  # fmt: skip
            quality.raw_lines(directory, "dev", "medical", "en")


class ExportTest(tf.test.TestCase):
    """The tiny LDR exported with both (tests.builds.tiny_ldr_ct2_quality: the CLI's writer)."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.export, cls.corpus = builds.tiny_ldr_ct2_quality()

    def test_the_manifest_records_the_file_and_its_hash(self):
        manifest = manifest_lib.read_manifest(self.export)
        path = os.path.join(self.export, quality.QUALITY_FILE)
        self.assertEqual(
            manifest["quality"],
            {"file": quality.QUALITY_FILE, "sha256": manifest_lib.file_sha256(path)},
        )
        guard, confidence, summary = ct2_models.Export(self.export).quality
        self.assertEqual(guard.domains, corpus.DOMAINS)
        self.assertEqual(sorted(confidence.domains), sorted(corpus.DOMAINS + ["generic"]))
        self.assertEqual(set(summary), {"domain_guard", "confidence"})
        # Generic is calibrated on every domain's dev set, against each domain's own median.
        generic = json.load(open(path))["confidence"]["domains"]["generic"]
        self.assertEqual(sorted(generic["dev_median_chrf"]), sorted(corpus.DOMAINS))
        self.assertEqual(generic["dev_sentences"], 3 * 40)

    def test_a_changed_quality_file_is_refused_in_one_line(self):
        copy = os.path.join(self.get_temp_dir(), "ct2")
        shutil.copytree(self.export, copy)
        with open(os.path.join(copy, quality.QUALITY_FILE), "a") as f:
            f.write(" ")
        with self.assertRaisesRegex(
            UserError, r"quality.json: content differs from manifest.json .*export the model again$"
        ):
            ct2_models.Export(copy)
        os.remove(os.path.join(copy, quality.QUALITY_FILE))
        with self.assertRaisesRegex(UserError, r"quality.json: cannot read it .*incomplete"):
            ct2_models.Export(copy)

    def test_served_the_guard_routes_by_the_cue_words_and_answers_carry_a_confidence(self):
        from starlette.testclient import TestClient  # pylint: disable=import-outside-toplevel

        from ldr_opennmt.serving import app as app_lib  # pylint: disable=C0415
        from ldr_opennmt.serving import server as server_lib  # pylint: disable=C0415

        options = server_lib.Options(self.export, max_decoding_length=10, allowed_hosts=["*"])
        with TestClient(app_lib.create_app(options)) as client:
            response = client.post(
                "/translate",
                json={"sentences": ["the patient is here.", "click the big file.", "the temple."]},
            )
            self.assertEqual(response.status_code, 200, response.text)
            translations = response.json()["translations"]
            self.assertEqual(
                [(t["domain"], t["domain_choice"]) for t in translations],
                [("medical", "guard"), ("software", "guard"), ("religious", "guard")],
            )
            for translation in translations:
                self.assertTrue(0 <= translation["confidence"] <= 1)
                self.assertIsInstance(translation["low_confidence"], bool)
            domains = client.get("/domains").json()
            self.assertEqual(domains["classifier"], "guard")
            self.assertEqual(domains["confidence_domains"], corpus.DOMAINS + ["generic"])


class CommandLineTest(tf.test.TestCase):
    def _args(self, **kwargs):
        values = dict(corpus=None, domain_guard=False, confidence=False)
        values.update(kwargs)
        return types.SimpleNamespace(**values)

    def test_corpus_and_options_go_together(self):
        self.assertIsNone(export_cli._quality_corpus(self._args()))  # pylint: disable=W0212
        with self.assertRaisesRegex(UserError, r"^--corpus c: nothing to learn from it"):
            export_cli._quality_corpus(self._args(corpus="c"))  # pylint: disable=W0212
        with self.assertRaisesRegex(UserError, r"^--confidence needs --corpus"):
            export_cli._quality_corpus(self._args(confidence=True))  # pylint: disable=W0212
        with self.assertRaisesRegex(UserError, r"no complete corpus here"):
            export_cli._quality_corpus(  # pylint: disable=W0212
                self._args(corpus=self.get_temp_dir(), domain_guard=True)
            )

    def test_a_corpus_without_a_domain_of_the_model_is_refused(self):
        model = types.SimpleNamespace(domains=["medical", "law"])
        info = {"domains": ["medical", "software"], "source_lang": "en", "target_lang": "fr"}
        with self.assertRaisesRegex(UserError, r"^--corpus c: no domain 'law' \(it has medical"):
            export_cli._quality_writer(  # pylint: disable=W0212
                self._args(corpus="c", domain_guard=True), info, model
            )
