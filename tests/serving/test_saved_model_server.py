"""``ldr-serve`` on SavedModels and with a domain classifier, as a user runs it: real servers
(subprocesses) on tiny exported models, talked to over HTTP.

One tiny LDR Transformer is exported twice (a SavedModel of ``ldr-main export``, and
``ldr-export ctranslate2``), a tiny domain-mixing Transformer (which reads no label) as a
SavedModel, and a tiny domain classifier is trained and exported. Three servers start at
once: the LDR SavedModel with the classifier, the mixing SavedModel, the CTranslate2
directory with the classifier and at most 2 models loaded. Every translation is compared
with the exported model run directly (the SavedModel by ``ldr-translate``'s
:class:`~ldr_opennmt.serving.savedmodel_translate.SignatureRunner`, CTranslate2 by its
Translator) on the same tokens and label, every label the classifier gives with the classifier
run directly.
"""

import os
import re
import threading

import ctranslate2
import pytest

from ldr_opennmt import assets as assets_lib
from ldr_opennmt.serving import ct2_models, savedmodel_translate
from ldr_opennmt.serving.domain_classifier import DomainClassifier
from tests import corpus, helpers
from tests.serving import fixtures

SOURCES = ["the big cell", "a host is here", "spirit", "cell host spirit now", "small red host."]
CUES = fixtures.CUE_SENTENCES
NO_LABEL = "generic: no label"
# The SavedModel decodes with a beam of 2 and gives 2 hypotheses.
PARAMS = {"beam_width": 2, "num_hypotheses": 2}


@pytest.mark.e2e
class SavedModelServerTest(helpers.SharedDirTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.servers = {}
        try:
            # Each server starts as soon as its models are exported (each takes seconds).
            cls.classifier_dir = fixtures.classifier_export()
            mixing, _ = fixtures.tiny_model(os.path.join(cls.dir, "mixing"), "mixing_transformer")
            cls.mixing = fixtures.saved_model(mixing, os.path.join(cls.dir, "mixing"))
            cls.servers["mixing"] = fixtures.ServerProcess(
                cls.mixing, "--classifier", cls.classifier_dir
            )
            model, _ = fixtures.tiny_model(os.path.join(cls.dir, "ldr"), params=PARAMS)
            cls.saved_model = fixtures.saved_model(model, os.path.join(cls.dir, "ldr"))
            cls.ct2 = fixtures.ct2_directory(model, os.path.join(cls.dir, "ldr"))
            cls.servers["saved_model"] = fixtures.ServerProcess(
                cls.saved_model,
                "--classifier", cls.classifier_dir,
                "--max_wait_ms", "300",
                "--max_sentences", "8",
            )  # fmt: skip
            cls.servers["ct2"] = fixtures.ServerProcess(
                cls.ct2, "--classifier", cls.classifier_dir, "--max_loaded_models", "2"
            )
            for server in cls.servers.values():
                server.wait()
        except BaseException:
            cls.tearDownClass()
            raise
        cls.translators = {}
        cls.classifier = DomainClassifier(cls.classifier_dir)

    @classmethod
    def tearDownClass(cls):
        cls.outputs = {name: server.stop() for name, server in cls.servers.items()}
        super().tearDownClass()

    def _saved_model_translator(self, export_dir):
        if export_dir not in self.translators:
            self.translators[export_dir] = (
                savedmodel_translate.SignatureRunner(export_dir),
                assets_lib.load_tokenizer(export_dir, "source"),
                assets_lib.load_tokenizer(export_dir, "target"),
            )
        return self.translators[export_dir]

    def _expected(self, sentence, label, export_dir=None):
        """The SavedModel run directly on one sentence: ``(hypotheses, scores)``."""
        translator, source, target = self._saved_model_translator(export_dir or self.saved_model)
        tokens, _ = source.tokenize(sentence)
        hypotheses, scores = translator.translate_batch([tokens], [label])[0]
        return [target.detokenize(h) for h in hypotheses], scores

    def _expected_ct2(self, sentence, domain):
        path = os.path.join(self.ct2, domain)
        key = ("ct2", domain)
        if key not in self.translators:
            self.translators[key] = (
                ctranslate2.Translator(path, device="cpu", intra_threads=1),
                assets_lib.load_tokenizer(path, "source"),
                assets_lib.load_tokenizer(path, "target"),
            )
        translator, source, target = self.translators[key]
        tokens, _ = source.tokenize(sentence)
        result = translator.translate_batch(
            [tokens], beam_size=1, max_decoding_length=fixtures.MAX_LENGTH
        )
        return target.detokenize(result[0].hypotheses[0])

    def _predicted(self, sentence):
        """The classifier run directly: ``(domain, posterior)``."""
        return self.classifier([self.classifier.tokenize(sentence)])[0]

    def _post(self, name, body, status=200):
        response = self.servers[name].post(body)
        self.assertEqual(response[0], status, response[1])
        return response[1]

    def _assert_error(self, name, body, status, regex):
        error = self._post(name, body, status)
        self.assertEqual(list(error), ["error"])
        self.assertNotIn("\n", error["error"])
        self.assertRegex(error["error"], regex)

    def _assert_translations(self, body, sentences, labels, domains, choices, hypotheses=1):
        translations = body["translations"]
        self.assertLen(translations, len(sentences))
        for translation, sentence, label, domain, choice in zip(
            translations, sentences, labels, domains, choices
        ):
            texts, scores = self._expected(sentence, label)
            self.assertEqual(translation["hypotheses"], texts[:hypotheses], (sentence, label))
            self.assertAllClose(translation["scores"], scores[:hypotheses], atol=1e-4)
            self.assertEqual(translation["text"], texts[0])
            self.assertEqual(
                (translation["domain"], translation["domain_choice"]), (domain, choice)
            )

    def test_the_classifier_and_the_domains_matter(self):
        # The classifier learned the cue words, and the domain changes the translation: the
        # tests below can see a wrong label.
        for domain, sentence in CUES.items():
            self.assertEqual(self._predicted(sentence)[0], domain, sentence)
        outputs = {
            d: tuple(self._expected(s, d)[0][0] for s in SOURCES)
            for d in corpus.DOMAINS + ["generic"]
        }
        self.assertLen(set(outputs.values()), 4, outputs)

    def test_domains_and_health(self):
        status, domains = self.servers["saved_model"].get("/domains")
        self.assertEqual(status, 200)
        self.assertEqual(
            domains,
            {
                "domains": corpus.DOMAINS + ["generic"],
                "model": "savedmodel",
                "labels_ignored": None,
                "unlabelled": "classifier",
                "unlabelled_modes": ["generic", "classifier", "ens-uniform", "ens-soft"],
                "classifier_domains": corpus.DOMAINS,
                "classifier": "savedmodel",
                "guard_threshold": None,
                "confidence_domains": [],
                "glossary": False,
            },
        )
        status, health = self.servers["saved_model"].get("/health")
        self.assertEqual((status, health["model"]), (200, "savedmodel"))
        self.assertEqual(sorted(health["queues"]), ["savedmodel"])
        self.assertIn("classifier", health)

    def test_domain_per_request_and_per_sentence(self):
        for domain in ("software", "generic"):
            body = self._post("saved_model", {"sentences": SOURCES, "domain": domain})
            self._assert_translations(body, SOURCES, [domain] * 5, [domain] * 5, ["given"] * 5)
        labels = ["software", "medical", "generic", "religious", "medical"]
        body = self._post(
            "saved_model", {"sentences": SOURCES, "domains": labels, "num_hypotheses": 2}
        )
        self._assert_translations(body, SOURCES, labels, labels, ["given"] * 5, hypotheses=2)

    def test_no_label_goes_to_the_classifier(self):
        sentences = [CUES["religious"], SOURCES[0], CUES["software"], CUES["medical"]]
        labels = [None, "medical", None, None]
        body = self._post("saved_model", {"sentences": sentences, "domains": labels})
        predicted = [self._predicted(s)[0] for s in sentences]
        domains = [predicted[0], "medical", predicted[2], predicted[3]]
        self.assertEqual(domains, ["religious", "medical", "software", "medical"])
        choices = ["classifier", "given", "classifier", "classifier"]
        self._assert_translations(body, sentences, domains, domains, choices)
        # Asked for generic instead.
        body = self._post("saved_model", {"sentences": sentences[:1], "unlabelled": "generic"})
        self._assert_translations(body, sentences[:1], ["generic"], ["generic"], [NO_LABEL])

    def test_ensembles_of_domain_views(self):
        sentences = [CUES["religious"], SOURCES[1]]
        body = self._post(
            "saved_model",
            {"sentences": sentences, "domains": [None, "software"], "unlabelled": "ens-uniform"},
        )
        self._assert_translations(
            body,
            sentences,
            ["ens-uniform", "software"],
            ["ens-uniform", "software"],
            ["ensemble", "given"],
        )
        # ens-soft: the classifier's posterior as the weights.
        body = self._post("saved_model", {"sentences": sentences, "unlabelled": "ens-soft"})
        soft = [self.classifier.soft_label(self._predicted(s)[1]) for s in sentences]
        self.assertTrue(all(":" in label for label in soft), soft)
        self._assert_translations(body, sentences, soft, soft, ["ensemble"] * 2)
        # Explicit weights as a domain.
        label = "medical:0.5 generic:0.5"
        body = self._post("saved_model", {"sentences": sentences, "domain": label})
        self._assert_translations(body, sentences, [label] * 2, [label] * 2, ["given"] * 2)
        # Refused in one line: no fitted weights, an unknown view, no classifier.
        self._assert_error(
            "saved_model",
            {"sentences": sentences, "unlabelled": "ens-learned"},
            422,
            '^unlabelled: "ens-learned": the export has no ens-learned weights',
        )
        self._assert_error(
            "saved_model",
            {"sentences": sentences, "domains": ["medical:0.5 legal:0.5", None]},
            422,
            r"^domains\[0\]: .*unknown view 'legal'",
        )
        self._assert_error(
            "saved_model",
            {"sentences": sentences, "unlabelled": "pred"},
            422,
            "^unlabelled: must be one of generic, classifier, ens-uniform, ens-learned, "
            'ens-soft, got "pred"$',
        )
        self._assert_error(
            "saved_model",
            {"sentences": sentences, "beam_size": 2},
            422,
            "^beam_size: this server's SavedModel decodes with the beam of its export",
        )
        self._assert_error(
            "saved_model",
            {"sentences": sentences, "num_hypotheses": 3},
            422,
            r"^num_hypotheses: must be between 1 and 2 \(the export's params: num_hypotheses\)",
        )

    def test_concurrent_clients_are_batched_and_answered_their_own(self):
        before = self.servers["saved_model"].get("/health")[1]["queues"]["savedmodel"]
        clients = 8
        barrier = threading.Barrier(clients)
        labels = ["medical", "religious", "software", "generic"]
        requests = [
            {
                "sentences": [SOURCES[i % 5], SOURCES[(i + 2) % 5]],
                "domains": [labels[i % 4], labels[(i + 1) % 4]],
            }
            for i in range(clients)
        ]
        responses = [None] * clients

        def _client(i):
            # Every head at once, the bodies spread over 140 ms: each alone without
            # --max_wait_ms. A batch waits only for requests in progress (issue 58).
            server = self.servers["saved_model"]
            responses[i] = server.post_head_first(requests[i], 0.05 + 0.02 * i, barrier.wait)

        threads = [threading.Thread(target=_client, args=(i,)) for i in range(clients)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        for request, (status, body) in zip(requests, responses):
            self.assertEqual(status, 200, body)
            domains = request["domains"]
            self._assert_translations(body, request["sentences"], domains, domains, ["given"] * 2)
        after = self.servers["saved_model"].get("/health")[1]["queues"]["savedmodel"]
        self.assertEqual(after["sentences"] - before["sentences"], 2 * clients)
        # Within --max_wait_ms (300 ms) the requests share batches, whatever their domains.
        self.assertLessEqual(after["batches"] - before["batches"], 3, after)
        self.assertGreater(after["largest_batch"], 2, after)

    def test_a_model_that_reads_no_label(self):
        # Domain mixing: a label is translated as generic, and the answer says why.
        reason = (
            "the model reads no domain label to translate (its serving_default signature has "
            "no domain input)"
        )
        body = self._post(
            "mixing", {"sentences": SOURCES[:3], "domains": ["medical", None, "generic"]}
        )
        for translation, sentence in zip(body["translations"], SOURCES):
            texts, _ = self._expected(sentence, "generic", export_dir=self.mixing)
            self.assertEqual(translation["hypotheses"], texts[:1])
            self.assertEqual(translation["domain"], "generic")
        self.assertEqual(
            [t["domain_choice"] for t in body["translations"]],
            ["ignored: " + reason, NO_LABEL, "given"],
        )
        status, domains = self.servers["mixing"].get("/domains")
        self.assertEqual((domains["labels_ignored"], domains["unlabelled"]), (reason, "generic"))
        self.assertEqual(domains["unlabelled_modes"], ["generic"])
        for body in (
            {"sentences": ["spirit"], "unlabelled": "ens-uniform"},
            {"sentences": ["spirit"], "domain": "ens-uniform"},
        ):
            field = "unlabelled" if "unlabelled" in body else "domain"
            self._assert_error(
                "mixing", body, 422, '^%s: .*"ens-uniform": %s$' % (field, re.escape(reason))
            )
        self._assert_error(
            "mixing", {"sentences": ["spirit"], "domain": "legal"}, 422, "^domain: unknown domain"
        )

    def test_ctranslate2_directory_with_a_classifier_and_lazy_models(self):
        server = self.servers["ct2"]
        self.assertEqual(server.get("/health")[1]["models"]["loaded_models"], [])
        sentences = [CUES["software"], SOURCES[0], CUES["religious"]]
        body = self._post("ct2", {"sentences": sentences, "domains": [None, "medical", None]})
        domains = ["software", "medical", "religious"]
        for translation, sentence, domain in zip(body["translations"], sentences, domains):
            self.assertEqual(translation["text"], self._expected_ct2(sentence, domain))
            self.assertEqual(translation["domain"], domain)
        self.assertEqual(
            [t["domain_choice"] for t in body["translations"]],
            ["classifier", "given", "classifier"],
        )
        models = server.get("/health")[1]["models"]
        # At most 2 models loaded: 3 loads, the least recently used one unloaded.
        self.assertEqual(models["max_loaded_models"], 2)
        self.assertLen(models["loaded_models"], 2)
        self.assertEqual((models["loads"], models["unloads"]), (3, 1))
        body = self._post("ct2", {"sentences": SOURCES, "domain": "generic"})
        self.assertEqual(
            [t["text"] for t in body["translations"]],
            [self._expected_ct2(s, "generic") for s in SOURCES],
        )
        self.assertIn("generic", server.get("/health")[1]["models"]["loaded_models"])
        # No ensembles: one model per domain.
        self._assert_error(
            "ct2",
            {"sentences": ["spirit"], "unlabelled": "ens-uniform"},
            422,
            '^unlabelled: "ens-uniform": %s$' % re.escape(ct2_models.ENSEMBLE_REFUSAL),
        )
        self._assert_error(
            "ct2",
            {"sentences": ["spirit"], "domain": "medical:0.5 generic:0.5"},
            422,
            "^domain: ensemble label .*one model per domain",
        )

    def test_ldr_translate_refuses_ctranslate2_options_on_a_saved_model(self):
        status, stdout, stderr = fixtures.run_client(
            "--export", self.saved_model, "--domain", "medical", "--beam_size", "4", stdin="a\n"
        )
        self.assertEqual((status, stdout), (2, ""))
        self.assertEqual(
            stderr,
            "ldr-translate: error: --beam_size: only for an ldr-export ctranslate2 directory: "
            "the SavedModel %s decodes as it was exported (params: beam_width, "
            "maximum_decoding_length)\n" % self.saved_model,
        )
