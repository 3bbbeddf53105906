"""``ldr-serve`` as a user runs it: the real server (a subprocess) on a tiny exported model,
talked to over HTTP.

The tiny LDR Transformer has random weights and raw-text tokenizers; its checkpoint is
exported by ``ct2_export.export`` (what ``ldr-export ctranslate2`` runs). Every translation
the server gives is compared with CTranslate2 run directly on the same domain's model
directory for the same tokens.
"""

import asyncio
import http.client
import json
import os
import shutil
import subprocess
import sys
import threading
import urllib.error
import urllib.request

import ctranslate2
import libretranslatepy
import pytest
import tensorflow as tf

from ldr_experiments import serve_bench_report
from ldr_opennmt import assets as assets_lib
from ldr_opennmt.cli import serve as serve_cli
from ldr_opennmt.export import ct2_export
from ldr_opennmt.serving import backends, ct2_models
from ldr_opennmt.serving import server as server_lib
from tests import builds, corpus, helpers
from tests.serving import fake_backend, fixtures

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MAX_LENGTH = fixtures.MAX_LENGTH
SOURCES = ["the big cell", "a host is here", "spirit", "cell host spirit now", "small red host."]
DOMAINS = ["medical", "religious", "software", "generic"]
_free_port = fixtures.free_port
# ldr-translate's decoding options for the server's (fixtures.ServerProcess).
DECODING = ("--max_decoding_length", str(MAX_LENGTH))


def Server(model_dir, *options):  # pylint: disable=invalid-name
    """``ldr-serve`` on :obj:`model_dir`, answering."""
    return fixtures.ServerProcess(model_dir, *options).wait()


@pytest.mark.e2e
class ServerTest(helpers.SharedDirTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        # A tiny LDR model with tokenizers, trained (randomly) on the files of an English to
        # French corpus of ``ldr-data build files``: its CTranslate2 export (shared, read only).
        cls.model_dir = builds.tiny_ldr_ct2(languages=("en", "fr"))
        cls.translators = {}
        cls.server = Server(
            cls.model_dir,
            "--max_wait_ms", "300",
            "--max_sentences", "8",
            "--max_sentence_tokens", "12",
            "--max_request_bytes", "2000",
            "--max_beam_size", "4",
        )  # fmt: skip

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        super().tearDownClass()

    def _expected(self, sentence, domain, beam_size=1, num_hypotheses=1):
        """CTranslate2 run directly on the domain's model directory: the hypotheses' texts."""
        path = os.path.join(self.model_dir, domain)
        if domain not in self.translators:
            self.translators[domain] = (
                ctranslate2.Translator(path, device="cpu", intra_threads=1),
                assets_lib.load_tokenizer(path, "source"),
                assets_lib.load_tokenizer(path, "target"),
            )
        translator, source, target = self.translators[domain]
        tokens, _ = source.tokenize(sentence)
        result = translator.translate_batch(
            [tokens],
            beam_size=beam_size,
            num_hypotheses=num_hypotheses,
            max_decoding_length=MAX_LENGTH,
        )[0]
        return [target.detokenize(hypothesis) for hypothesis in result.hypotheses]

    def _assert_translated(self, response, sentences, domains, choices):
        status, body = response
        self.assertEqual(status, 200, body)
        translations = body["translations"]
        self.assertEqual(len(translations), len(sentences))
        for translation, sentence, domain, choice in zip(translations, sentences, domains, choices):
            self.assertEqual(translation["domain"], domain)
            self.assertEqual(translation["domain_choice"], choice)
            self.assertEqual(translation["hypotheses"], self._expected(sentence, domain))
            self.assertEqual(translation["text"], translation["hypotheses"][0])

    def _assert_error(self, response, status, regex):
        self.assertEqual(response[0], status, response[1])
        self.assertEqual(list(response[1]), ["error"])
        message = response[1]["error"]
        self.assertNotIn("\n", message)
        self.assertRegex(message, regex)
        return message

    def test_the_export_is_tokenized_and_domains_differ(self):
        # The tokenizers are exported (raw text in, raw text out) and the domain changes
        # the translation, so the tests below can see a wrong domain.
        path = os.path.join(self.model_dir, "medical")
        self.assertIsNotNone(assets_lib.load_tokenizer(path, "source"))
        outputs = {d: tuple(self._expected(s, d)[0] for s in SOURCES) for d in DOMAINS}
        self.assertEqual(len(set(outputs.values())), len(DOMAINS), outputs)

    def test_it_says_where_it_listens_and_what_it_serves(self):
        lines = self.server.output_so_far().splitlines()
        self.assertIn(
            "ldr-serve: listening on http://127.0.0.1:%d (API pages: http://127.0.0.1:%d/docs; "
            "Ctrl-C stops)" % (self.server.port, self.server.port),
            lines,
        )
        self.assertIn(
            "ldr-serve: %s: domains medical, religious, software, generic (ctranslate2, loaded, "
            "en to fr); text without a domain is translated as generic (no --classifier)"
            % self.model_dir,
            lines,
        )

    def test_libretranslatepy_client_on_the_corpus_languages(self):
        # Issue 55 item 4: the export of a corpus's files records its languages (GET
        # /languages was empty, POST /detect a 501), and a text of three sentences is
        # translated sentence by sentence in one batch (it was one invented sentence).
        client = libretranslatepy.LibreTranslateAPI("http://127.0.0.1:%d" % self.server.port)
        self.assertEqual(
            client.languages(),
            [
                {"code": "en", "name": "English", "targets": ["fr"]},
                {"code": "fr", "name": "French", "targets": []},
            ],
        )
        self.assertEqual(client.detect("The big cell."), [{"language": "en", "confidence": 100.0}])
        sentences = ["The big cell.", "A host is here!", "Spirit now?"]
        before = self.server.get("/health")[1]["queues"]["generic"]
        translated = client.translate(" ".join(sentences), "auto", "fr")
        after = self.server.get("/health")[1]["queues"]["generic"]
        self.assertEqual(translated, " ".join(self._expected(s, "generic")[0] for s in sentences))
        self.assertNotEqual(translated, self._expected(" ".join(sentences), "generic")[0])
        self.assertEqual(
            (after["batches"] - before["batches"], after["sentences"] - before["sentences"]),
            (1, 3),
        )
        status, answer = self.server.post(
            {"q": "\n".join(sentences), "source": "auto", "target": "fr", "domain": "auto"}
        )
        self.assertEqual(status, 200, answer)
        self.assertEqual(
            answer,
            {
                "translatedText": "\n".join(self._expected(s, "generic")[0] for s in sentences),
                "detectedLanguage": {"language": "en", "confidence": 100.0},
                "domain": "generic",
                "domain_choice": "generic: no label",
            },
        )

    def test_domain_per_request(self):
        for domain in DOMAINS:
            response = self.server.post({"sentences": SOURCES, "domain": domain})
            self._assert_translated(response, SOURCES, [domain] * 5, ["given"] * 5)

    def test_domain_per_sentence_and_no_label(self):
        domains = ["software", None, "medical", "generic", "software"]
        response = self.server.post({"sentences": SOURCES, "domains": domains})
        self._assert_translated(
            response,
            SOURCES,
            ["software", "generic", "medical", "generic", "software"],
            ["given", "generic: no label", "given", "given", "given"],
        )
        for body in ({"sentences": SOURCES[:2]}, {"sentences": SOURCES[:2], "domain": None}):
            self._assert_translated(
                self.server.post(body), SOURCES[:2], ["generic"] * 2, ["generic: no label"] * 2
            )

    def test_beam_search_and_hypotheses(self):
        status, body = self.server.post(
            {"sentences": SOURCES[:3], "domain": "religious", "beam_size": 4, "num_hypotheses": 3}
        )
        self.assertEqual(status, 200, body)
        for translation, sentence in zip(body["translations"], SOURCES):
            self.assertEqual(translation["hypotheses"], self._expected(sentence, "religious", 4, 3))
            self.assertEqual(len(translation["scores"]), 3)

    def test_concurrent_clients_are_batched_and_answered_their_own(self):
        before = self.server.get("/health")[1]["queues"]
        clients = 8
        barrier = threading.Barrier(clients)
        requests = [
            {
                "sentences": [SOURCES[i % 5], SOURCES[(i + 2) % 5]],
                "domain": "medical" if i % 2 else "software",
            }
            for i in range(clients)
        ]
        responses = [None] * clients

        def _client(i):
            # Every head at once, the bodies spread over 140 ms: each alone without
            # --max_wait_ms. A batch waits only for requests in progress (issue 58: one
            # client's request waited --max_wait_ms for requests that did not exist).
            responses[i] = self.server.post_head_first(requests[i], 0.05 + 0.02 * i, barrier.wait)

        threads = [threading.Thread(target=_client, args=(i,)) for i in range(clients)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        for request, response in zip(requests, responses):
            domain = request["domain"]
            self._assert_translated(response, request["sentences"], [domain] * 2, ["given"] * 2)
        after = self.server.get("/health")[1]["queues"]
        for domain in ("medical", "software"):
            sentences = after[domain]["sentences"] - before[domain]["sentences"]
            batches = after[domain]["batches"] - before[domain]["batches"]
            self.assertEqual(sentences, clients)  # 4 requests of 2 sentences each.
            # Within --max_wait_ms (300 ms) the 4 requests of a domain share batches.
            self.assertLessEqual(batches, 2, after)
            self.assertGreater(after[domain]["largest_batch"], 2, after)

    def test_exports_that_cannot_be_served(self):
        def _refused(mutate, regex):
            broken = os.path.join(self.dir, "broken")
            shutil.rmtree(broken, ignore_errors=True)
            shutil.copytree(self.model_dir, broken)
            mutate(broken)
            argv = [sys.executable, "-m", "ldr_opennmt.cli.serve", "--model_dir", broken]
            argv += ["--port", str(_free_port())]
            env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
            run = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env)
            self.assertEqual(run.returncode, 2, run.stderr)
            self.assertRegex(run.stderr.strip().splitlines()[-1], "^ldr-serve: error: " + regex)

        def _no_generic(broken):
            manifest = ct2_export.read_manifest(broken)
            del manifest["domains"]["generic"]
            with open(os.path.join(broken, ct2_export.MANIFEST), "w") as f:
                json.dump(manifest, f)

        def _truncated(broken):
            with open(os.path.join(broken, "software", "model.bin"), "r+b") as f:
                f.truncate(100)

        _refused(_no_generic, "--model_dir: .* has no generic model")
        # Refused by the manifest's sha256 before CTranslate2 reads it (issue 43 item 8).
        _refused(_truncated, "domain 'software': software/model.bin: content differs from")

    def test_ldr_translate_on_the_directory_equals_the_server(self):
        # Each line to its domain's model, by --domain_file or --domain: the server's text.
        lines = SOURCES + SOURCES[:3]  # --max_sentences 8.
        labels = ["medical", "generic", "software", "religious", "medical"] + DOMAINS[1:]
        source = corpus.write_lines(os.path.join(self.dir, "in.txt"), lines)
        label_file = corpus.write_lines(os.path.join(self.dir, "in.domain"), labels)
        output = os.path.join(self.dir, "out.txt")
        status, _, stderr = fixtures.run_client(
            "--export", self.model_dir, "--domain_file", label_file, "--input", source,
            "--output", output, "--batch_size", "3", *DECODING,
        )  # fmt: skip
        self.assertEqual(status, 0, stderr)
        status, body = self.server.post({"sentences": lines, "domains": labels})
        self.assertEqual(status, 200, body)
        served = [translation["text"] for translation in body["translations"]]
        self.assertEqual(corpus.read_lines(output), served)
        for domain in ("religious", "generic"):
            status, stdout, stderr = fixtures.run_client(
                "--export", self.model_dir, "--domain", domain, *DECODING,
                stdin="\n".join(SOURCES) + "\n",
            )  # fmt: skip
            self.assertEqual(status, 0, stderr)
            served = self.server.post({"sentences": SOURCES, "domain": domain})[1]
            self.assertEqual(
                stdout.splitlines(), [t["text"] for t in served["translations"]], domain
            )
        # Beam search, as the server's beam_size.
        status, stdout, stderr = fixtures.run_client(
            "--export", self.model_dir, "--domain", "software", "--beam_size", "4", *DECODING,
            stdin="\n".join(SOURCES) + "\n",
        )  # fmt: skip
        self.assertEqual(status, 0, stderr)
        served = self.server.post({"sentences": SOURCES, "domain": "software", "beam_size": 4})
        self.assertEqual(stdout.splitlines(), [t["text"] for t in served[1]["translations"]])

    def test_ldr_translate_checks_on_the_directory(self):
        source = corpus.write_lines(os.path.join(self.dir, "check.txt"), SOURCES[:3])
        output = os.path.join(self.dir, "check.out")

        def _error(*args, export=None):
            status, stdout, stderr = fixtures.run_client(
                "--export", export or self.model_dir, "--input", source, "--output", output, *args
            )
            self.assertEqual((status, stdout), (2, ""), stderr)
            self.assertFalse(os.path.exists(output))
            return stderr.strip().splitlines()[-1]

        def _labels(name, labels):
            return corpus.write_lines(os.path.join(self.dir, name), labels)

        refusal = "%s: %s" % (self.model_dir, ct2_models.ENSEMBLE_REFUSAL)
        self.assertEqual(
            _error("--domain", "ens-uniform"),
            "ldr-translate: error: --domain: ensemble label 'ens-uniform': %s" % refusal,
        )
        labels = _labels("ens.domain", ["medical", "medical:0.5 generic:0.5", "generic"])
        self.assertEqual(
            _error("--domain_file", labels),
            "ldr-translate: error: %s:2: ensemble label 'medical:0.5 generic:0.5': %s"
            % (labels, refusal),
        )
        labels = _labels("bad.domain", ["medical", "generic", "legal"])
        self.assertEqual(
            _error("--domain_file", labels),
            "ldr-translate: error: %s:3: unknown domain label 'legal' (declared: medical, "
            "religious, software, or generic)" % labels,
        )
        self.assertRegex(
            _error("--domain_file", _labels("short.domain", ["medical", "generic"])),
            r"short.domain:3: missing domain label \(2 labels, but .*check.txt has 3 lines\)$",
        )
        self.assertRegex(
            _error("--domain", "medical", "--max_decoding_length", "0"),
            "--max_decoding_length must be >= 1, got 0$",
        )
        # An export of some domains only: a declared domain without its model.
        subset = os.path.join(self.dir, "subset")
        shutil.rmtree(subset, ignore_errors=True)
        shutil.copytree(self.model_dir, subset)
        manifest = ct2_export.read_manifest(subset)
        del manifest["domains"]["software"]
        with open(os.path.join(subset, ct2_export.MANIFEST), "w") as f:
            json.dump(manifest, f)
        labels = _labels("subset.domain", ["medical", "software", "generic"])
        self.assertEqual(
            _error("--domain_file", labels, export=subset),
            "ldr-translate: error: %s:2: domain 'software' has no model in %s (exported: "
            "medical, religious, generic; export it with ldr-export ctranslate2 --domains)"
            % (labels, subset),
        )
        # A model without domain-specific parameters: labels translated as generic, warned.
        manifest["domain_specific"] = False
        with open(os.path.join(subset, ct2_export.MANIFEST), "w") as f:
            json.dump(manifest, f)
        status, stdout, stderr = fixtures.run_client(
            "--export", subset, "--domain_file", labels, "--input", source, *DECODING
        )
        self.assertEqual(status, 0, stderr)
        self.assertRegex(
            stderr,
            "^ldr-translate: warning: %s:1: domain label 'medical' \\(and 1 other\\) ignored, "
            "translated as generic: %s: MultiDomainTransformer has no domain-specific parameters "
            "\\(manifest.json: domain_specific false\\)" % (labels, subset),
        )
        self.assertRegex(
            stderr.splitlines()[-1],
            r"^ldr-translate: warning: \d of 3 translations reached --max_decoding_length \(10\)",
        )
        generic = self.server.post({"sentences": SOURCES[:3], "domain": "generic"})[1]
        self.assertEqual(stdout.splitlines(), [t["text"] for t in generic["translations"]])

    def test_benchmark_of_a_running_server(self):
        # ldr_experiments/serve_bench.py --url: the load part on a server already running, several
        # sentences per request; no offline figures without --model_dir, so no targets.
        sentences = corpus.write_lines(os.path.join(self.dir, "bench-url.txt"), SOURCES)
        argv = [sys.executable, "-m", "ldr_experiments.serve_bench"]
        argv += ["--url", "http://127.0.0.1:%d" % self.server.port, "--sentences", sentences]
        argv += ["--clients", "1", "4", "--seconds", "0.3", "--sentences_per_request", "3"]
        run = subprocess.run(argv, capture_output=True, text=True, timeout=300)
        self.assertEqual(run.returncode, 0, run.stderr[-3000:])
        self.assertNotRegex(run.stdout, "(?m)^(PASS|MISS)")
        self.assertIn("#### `ldr-serve` at http://127.0.0.1:%d" % self.server.port, run.stdout)
        self.assertIn("3 per request", run.stdout)
        rows = [line.split(" | ") for line in run.stdout.splitlines() if line.startswith("| ")]
        # After the header: kept-alive connections, then a new connection per request.
        self.assertEqual([row[0] for row in rows[1:]], ["| 1", "| 4"] * 2)
        self.assertEqual([row[-1] for row in rows[1:]], ["keep-alive |"] * 2 + ["new |"] * 2)
        for row in rows[1:]:
            self.assertGreater(int(row[1]), 0)  # Requests.
            self.assertEqual(row[2], "0")  # No error.
            self.assertGreaterEqual(float(row[4]), float(row[3]))  # p99 >= p50.
            self.assertEqual(row[6], "n/a")  # No offline figures.

    def test_serving_benchmark_script(self):
        # ldr-experiments serve-bench as docs/serving-benchmark.md runs it, briefly, adding its
        # run to a BENCHMARKS.md.
        sentences = corpus.write_lines(os.path.join(self.dir, "bench.txt"), SOURCES)
        report = os.path.join(self.dir, "bench.md")
        argv = [sys.executable, "-m", "ldr_experiments.serve_bench"]
        benchmarks_md = os.path.join(self.dir, "BENCHMARKS.md")
        with open(benchmarks_md, "w") as f:
            f.write("# Benchmarks\n")
        argv += ["--model_dir", self.model_dir, "--sentences", sentences, "--out", report]
        argv += ["--benchmarks", benchmarks_md]
        argv += ["--clients", "1", "3", "--seconds", "0.5", "--max_batch_size", "2"]
        argv += ["--max_decoding_length", str(MAX_LENGTH), "--parts", "load", "lazy"]
        argv += ["--compute_types", "int8"]
        run = subprocess.run(argv, capture_output=True, text=True, timeout=300)
        self.assertEqual(run.returncode, 0, run.stderr[-3000:])
        verdicts = [line for line in run.stdout.splitlines() if line.startswith(("PASS", "MISS"))]
        self.assertLen(verdicts, 4)
        self.assertRegex(verdicts[0], r"^(PASS|MISS) throughput with 3 clients: [\d.]+% of offline")
        self.assertRegex(verdicts[1], r"^(PASS|MISS) p99 latency with 3 clients: [\d.]+x one batch")
        for verdict, connection in zip(verdicts[2:], ("keep-alive", "new")):
            self.assertRegex(
                verdict,
                r"^(PASS|MISS) p50 latency of one client, %s connection: [\d.]+ ms \(target <= "
                r"1.5x one sentence \+ 2 ms = [\d.]+ ms\) \[int8\]$" % connection,
            )
        with open(report) as f:
            text = f.read()
        self.assertIn("Offline, batches of 2:", text)
        self.assertIn("compute type int8", text)
        self.assertRegex(text, r"\n\| 3 \| \d+ \| 0 \|.*\| keep-alive \|")  # 3 clients, no errors.
        self.assertRegex(text, r"\n\| 3 \| \d+ \| 0 \|.*\| new \|")
        self.assertRegex(text, r"Server memory after the load: \d+ MiB resident")
        self.assertIn("| `--lazy` |", text)
        self.assertIn("| `--max_loaded_models 1` |", text)
        self.assertNotIn("every domain loaded at start", text)  # Not asked for.
        with open(benchmarks_md) as f:
            self.assertEqual(
                f.read(),
                "# Benchmarks\n\n%s\n\n%s\n\n%s"
                % (serve_bench_report.SECTION, serve_bench_report.SECTION_INTRO, text),
            )

    def test_compute_type_and_device_reach_ctranslate2(self):
        # --compute_type int8 (converted at load time: int8_float32 on a CPU) and --device.
        options = server_lib.Options(self.model_dir, compute_type="int8", device="cpu")
        backend = backends.CTranslate2Backend(options)
        try:
            translator = backend.models["medical"].translator
            self.assertEqual((translator.compute_type, translator.device), ("int8_float32", "cpu"))
        finally:
            backend.close()
        args = serve_cli.parse_args(["--model_dir", "x", "--compute_type", "int8"])
        self.assertEqual((args.compute_type, args.device), ("int8", "cpu"))

    def test_domains_health_and_openapi(self):
        self.assertEqual(
            self.server.get("/domains"),
            (
                200,
                {
                    "domains": DOMAINS,
                    "model": "ctranslate2",
                    "labels_ignored": None,
                    "unlabelled": "generic",
                    "unlabelled_modes": ["generic"],
                    "classifier_domains": None,
                    "classifier": None,
                    "guard_threshold": None,
                    "confidence_domains": [],
                    "glossary": False,
                },
            ),
        )
        status, health = self.server.get("/health")
        self.assertEqual((status, health["status"], health["model"]), (200, "ok", "ctranslate2"))
        self.assertEqual(sorted(health["queues"]), sorted(DOMAINS))
        self.assertEqual(sorted(health["models"]["loaded_models"]), sorted(DOMAINS))
        status, openapi = self.server.get("/openapi.json")
        self.assertEqual(status, 200)
        self.assertIn("/translate", openapi["paths"])
        schema = openapi["paths"]["/translate"]["post"]["requestBody"]["content"]
        native = {"$ref": "#/components/schemas/TranslateRequest"}
        self.assertIn(native, schema["application/json"]["schema"]["oneOf"])
        properties = openapi["components"]["schemas"]["TranslateRequest"]["properties"]
        self.assertEqual(properties["sentences"]["maxItems"], 8)  # --max_sentences.
        self.assertNotIn(self.model_dir, json.dumps(openapi))  # No path of the server's.
        with urllib.request.urlopen("http://127.0.0.1:%d/docs" % self.server.port) as page:
            self.assertIn("swagger", page.read().decode().lower())

    def test_malformed_requests_are_4xx_naming_the_field(self):
        post = self.server.post
        self._assert_error(post(b"{not json"), 400, "^body: not valid JSON")
        not_utf8 = b'{"sentences": ["\xff"]}'
        self._assert_error(post(not_utf8), 400, "^body: not UTF-8 .byte 0xff at byte 16.$")
        self._assert_error(post(b"[" * 990 + b"]" * 990), 400, "^body: not valid JSON .nested")
        self._assert_error(post(["a"]), 422, "^body: expected a JSON object")
        self._assert_error(post({"domain": "medical"}), 422, "^sentences: missing")
        self._assert_error(post({"sentences": "the cell"}), 422, "^sentences: expected a list")
        self._assert_error(post({"sentences": []}), 422, "^sentences: empty list")
        self._assert_error(
            post({"sentences": ["a", "  "]}), 422, r"^sentences\[1\]: empty sentence"
        )
        self._assert_error(
            post({"sentences": ["a", 3]}), 422, r"^sentences\[1\]: expected a string"
        )
        self._assert_error(
            post({"sentences": ["a"], "domain": "legal"}), 422, '^domain: unknown domain "legal"'
        )
        self._assert_error(
            post({"sentences": ["a", "b"], "domains": ["medical", "law"]}),
            422,
            r"^domains\[1\]: unknown domain",
        )
        self._assert_error(
            post({"sentences": ["a", "b"], "domains": ["medical"]}), 422, "^domains: 1 labels for 2"
        )
        self._assert_error(
            post({"sentences": ["a"], "domain": "medical", "domains": ["medical"]}),
            422,
            "^domain, domains: give one",
        )
        self._assert_error(post({"sentences": ["a"], "beam": 2}), 422, "^beam: unknown field")
        self._assert_error(
            post({"sentences": ["a"], "beam_size": "2"}), 422, "^beam_size: expected an integer"
        )
        self._assert_error(post({"sentences": ["a"], "beam_size": 5}), 422, "^beam_size: must be")
        self._assert_error(
            post({"sentences": ["a"], "beam_size": 2, "num_hypotheses": 3}),
            422,
            "^num_hypotheses: must be",
        )
        # The server is still up and translating.
        self._assert_translated(
            post({"sentences": ["spirit"]}), ["spirit"], ["generic"], [NO_LABEL]
        )

    def test_limits(self):
        post = self.server.post
        self._assert_error(
            post({"sentences": ["spirit"] * 9}), 422, "^sentences: 9 items, more than .* of 8$"
        )
        long = " ".join(["cell"] * 13)
        self._assert_error(
            post({"sentences": ["spirit", long]}),
            422,
            r"^sentences\[1\]: 13 tokens, more than .* 12$",
        )
        self._assert_error(post({"sentences": ["x" * 3000]}), 413, "^body: 30.. bytes, more than")
        # A chunked body (no Content-Length) is counted as it arrives.
        connection = http.client.HTTPConnection("127.0.0.1", self.server.port, timeout=60)
        body = json.dumps({"sentences": ["y" * 3000]}).encode()
        connection.request(
            "POST",
            "/translate",
            body=iter([body[:1000], body[1000:]]),
            headers={"Content-Type": "application/json"},
            encode_chunked=True,
        )
        response = connection.getresponse()
        self.assertEqual(response.status, 413)
        self.assertRegex(json.loads(response.read())["error"], "^body: more than the limit")
        connection.close()
        self._assert_translated(
            post({"sentences": ["spirit"] * 8}), ["spirit"] * 8, ["generic"] * 8, [NO_LABEL] * 8
        )


NO_LABEL = "generic: no label"


class OverloadTest(tf.test.TestCase):
    """A full queue answers 503 at once; a request past --timeout_s gets 504, and its job is
    not decoded if its batch had not started."""

    def test_overload_and_timeout(self):
        # The model takes 3 s per batch, a request may wait 2 s: the first request's batch
        # runs past its timeout, the second waits behind it and times out too.
        model = fake_backend.FakeModel("generic", delay_s=3.0)
        options = fake_backend.options(max_queued_sentences=3, timeout_s=2.0)
        server = server_lib.Server(
            options, backend=backends.CTranslate2Backend(options, models={"generic": model})
        )

        async def _clients():
            first = asyncio.ensure_future(server.translate(b'{"sentences": ["a", "b"]}'))
            await asyncio.sleep(0.3)
            second = asyncio.ensure_future(server.translate(b'{"sentences": ["c"]}'))
            await asyncio.sleep(0.2)
            self.assertEqual(server.health()["queued_sentences"], 3)
            with self.assertRaises(server_lib.RequestError) as context:
                await server.translate(b'{"sentences": ["d"]}')
            self.assertEqual(context.exception.status, 503)
            self.assertRegex(str(context.exception), "^overloaded: 3 sentences queued, at most 3")
            return await asyncio.gather(first, second, return_exceptions=True)

        try:
            for result in asyncio.run(_clients()):
                self.assertIsInstance(result, server_lib.RequestError)
                self.assertEqual(result.status, 504)
                self.assertRegex(str(result), r"^timeout: not translated within 2 s")
            health = server.health()
            self.assertEqual((health["queued_sentences"], health["refused_overload"]), (0, 1))
            # The second job was cancelled, not run: a third request, queued now, runs after
            # the first batch and after whatever the queue still held, so once it is answered
            # the second job would have run already (no sleep to guess how long that takes).
            model.delay_s = 0.0
            asyncio.run(server.translate(b'{"sentences": ["e"]}'))
            self.assertEqual(model.batches, [2, 1])
        finally:
            server.close()


class _FailingModel:
    name = "generic"
    maximum_source_length = None
    loaded = True
    loads = 1

    def load(self):
        pass

    def tokenize(self, text):
        return text.split()

    def translate(self, tokens, **kwargs):
        raise RuntimeError("CTranslate2 trace\nout of memory")


class TranslationFailureTest(tf.test.TestCase):
    def test_a_failed_batch_is_a_500_and_the_server_goes_on(self):
        options = server_lib.Options("unused", max_queued_sentences=2)
        server = server_lib.Server(
            options,
            backend=backends.CTranslate2Backend(options, models={"generic": _FailingModel()}),
        )
        try:
            for _ in range(3):  # The queue is released each time: never 503.
                with self.assertRaises(server_lib.RequestError) as context:
                    asyncio.run(server.translate(b'{"sentences": ["a b", "c"]}'))
                self.assertEqual(context.exception.status, 500)
                self.assertEqual(str(context.exception), "translation failed: out of memory")
            self.assertEqual(server.health()["queued_sentences"], 0)
        finally:
            server.close()


class CommandLineTest(helpers.SharedDirTestCase):
    def test_not_an_export(self):
        os.makedirs(self.dir, exist_ok=True)
        helpers.assert_cli_error(
            self,
            serve_cli.main,
            ["--model_dir", self.dir],
            "not an export of ldr-export ctranslate2",
        )
        helpers.assert_cli_error(
            self, serve_cli.main, ["--model_dir", os.path.join(self.dir, "missing")], "not found"
        )

    def test_bad_option(self):
        helpers.assert_cli_error(
            self,
            serve_cli.main,
            ["--model_dir", self.dir, "--port", "70000"],
            "^--port must be between 0 and 65535, got 70000$",
        )
        helpers.assert_cli_error(
            self,
            serve_cli.main,
            ["--model_dir", self.dir, "--max_batch_size", "0"],
            "^--max_batch_size must be >= 1, got 0$",
        )

    def test_lazy_options(self):
        helpers.assert_cli_error(
            self,
            serve_cli.main,
            ["--model_dir", self.dir, "--max_loaded_models", "0"],
            "^--max_loaded_models must be >= 1, got 0$",
        )
        saved_model = os.path.join(self.dir, "saved_model")
        os.makedirs(saved_model)
        open(os.path.join(saved_model, "saved_model.pb"), "wb").close()
        helpers.assert_cli_error(
            self,
            serve_cli.main,
            ["--model_dir", saved_model, "--lazy"],
            "^--lazy, --max_loaded_models: for an ldr-export ctranslate2 directory",
        )


class _FakeModel:
    """A DomainModel stand-in that counts its loads."""

    def __init__(self, fail=False):
        self.loaded = False
        self.loads = 0
        self.fail = fail

    def load(self):
        if self.fail:
            raise server_lib.UserError("cannot load")
        if not self.loaded:
            self.loaded = True
            self.loads += 1

    def unload(self):
        self.loaded = False


class LoadedModelsTest(tf.test.TestCase):
    def test_least_recently_used_model_is_unloaded_first(self):
        models = {name: _FakeModel() for name in ("a", "b", "c")}
        loaded = ct2_models.LoadedModels(models, limit=2)
        for name in ("a", "b", "a", "c"):  # c replaces b, the least recently used.
            loaded.release(loaded.acquire(name) and name)
        self.assertEqual([n for n, m in models.items() if m.loaded], ["a", "c"])
        self.assertEqual(loaded.stats()["loaded_models"], ["a", "c"])
        self.assertEqual((loaded.stats()["loads"], loaded.stats()["unloads"]), (3, 1))

    def test_a_model_in_use_is_not_unloaded(self):
        models = {name: _FakeModel() for name in ("a", "b")}
        loaded = ct2_models.LoadedModels(models, limit=1)
        loaded.acquire("a")
        acquired = threading.Event()
        thread = threading.Thread(target=lambda: (loaded.acquire("b"), acquired.set()))
        thread.start()
        self.assertFalse(acquired.wait(0.2))  # b waits while a decodes.
        self.assertTrue(models["a"].loaded)
        loaded.release("a")
        self.assertTrue(acquired.wait(5))
        thread.join()
        self.assertEqual((models["a"].loaded, models["b"].loaded), (False, True))

    def test_a_model_that_fails_to_load_frees_its_slot(self):
        models = {"bad": _FakeModel(fail=True), "good": _FakeModel()}
        loaded = ct2_models.LoadedModels(models, limit=1)
        with self.assertRaisesRegex(server_lib.UserError, "cannot load"):
            loaded.acquire("bad")
        loaded.acquire("good")
        self.assertEqual(loaded.stats()["loaded_models"], ["good"])


class OptionsTest(tf.test.TestCase):
    def test_timeout_shorter_than_the_batch_wait_is_refused(self):
        with self.assertRaisesRegex(
            server_lib.UserError, r"^--timeout_s 0.5 is not longer than --max_wait_ms 800 \(0.8 s\)"
        ):
            server_lib.Options("x", timeout_s=0.5, max_wait_ms=800)

    def test_bad_hosts_and_timeouts(self):
        with self.assertRaisesRegex(server_lib.UserError, "^--allowed_hosts: .*a wildcard"):
            server_lib.Options("x", allowed_hosts=["ev*il.com"])
        with self.assertRaisesRegex(server_lib.UserError, "^--read_timeout_s must be > 0"):
            server_lib.Options("x", read_timeout_s=0)
