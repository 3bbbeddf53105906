"""``ldr-serve``'s HTTP API in process, over a fake backend (tests/serving/fake_backend.py):
one error shape, request validation by the models that make the OpenAPI schema, text that
is not valid Unicode, byte-order marks, a bad request among good ones, the server's internals
kept out of its answers, allowed hosts and CORS, and the offline docs."""

import asyncio
import concurrent.futures
import json
import re
import threading

import parameterized
from starlette.testclient import TestClient

from ldr_opennmt.serving import app as app_lib
from ldr_opennmt.serving import server as server_lib
from tests.serving import fake_backend
from tests.serving.fake_backend import FakeModel, expected

JSON = {"Content-Type": "application/json"}


class AppTest(fake_backend.AppTestCase):
    # One error shape, every route.

    def test_unknown_routes_and_methods_answer_the_error_shape(self):
        response = self.client.get("/nowhere")
        self.assert_error((response.status_code, response.json()), 404, "^not found: GET /nowhere")
        response = self.client.get("/translate")
        self.assert_error(
            (response.status_code, response.json()),
            405,
            r"^method GET not allowed on /translate \(allowed: POST\)$",
        )
        self.assertEqual(response.headers["allow"], "POST")
        response = self.client.delete("/health")
        self.assertEqual(response.status_code, 405)
        self.assertEqual(list(response.json()), ["error"])

    def test_head_is_answered_on_the_get_routes(self):
        # Issue 71 (8): HEAD /health was a 405 (a monitor's or a proxy's check).
        for path in ("/health", "/domains", "/languages", "/metrics", "/openapi.json", "/docs"):
            response = self.client.head(path)
            self.assertEqual(response.status_code, 200, path)
            self.assertEqual(response.content, b"", path)
        response = self.client.head("/translate")
        self.assertEqual(response.status_code, 405)
        self.assertEqual(response.headers["allow"], "POST")

    def test_content_type_must_be_json(self):
        body = json.dumps({"sentences": ["a b"]})
        for content_type in ("text/plain", "application/x-www-form-urlencoded", None):
            headers = {"Content-Type": content_type} if content_type else {}
            response = self.client.post("/translator/translate", content=body, headers=headers)
            self.assertEqual(response.status_code, 415, content_type)
            self.assertRegex(
                response.json()["error"], "^Content-Type: .* expected application/json$"
            )
        self.assert_error(
            self.post(body, headers={"Content-Type": "text/plain"}), 415, "^Content-Type: "
        )
        self.assert_error(
            self.post(body, headers={"Content-Type": "application/json; charset=utf-16"}),
            415,
            "charset",
        )
        self.assertEqual(
            self.post(body, headers={"Content-Type": "application/json; charset=UTF-8"})[0], 200
        )

    def test_a_json_body_without_its_content_type_is_a_415(self):
        # No Content-Type at all, or curl -d's default (a form): the body is not read as a
        # LibreTranslate form (was: 422 "q: missing (LibreTranslate's form body)").
        body = json.dumps({"sentences": ["a b"]})
        for path in ("/translate", "/detect"):
            response = self.client.post(path, content=body)
            self.assertEqual(response.status_code, 415, response.text)
            self.assertEqual(
                response.json(),
                {
                    "error": "Content-Type: missing, expected application/json or "
                    "application/x-www-form-urlencoded"
                },
            )
            for data in (body, "  [1]"):
                response = self.client.post(
                    path,
                    content=data,
                    headers={"Content-Type": "application/x-www-form-urlencoded"},
                )
                self.assertEqual(response.status_code, 415, response.text)
                self.assertEqual(
                    response.json()["error"],
                    "Content-Type: application/x-www-form-urlencoded, but the body is JSON: "
                    "send it with Content-Type: application/json",
                )

    def test_bodies_must_be_utf8_json(self):
        self.assert_error(self.post(b"{not json"), 400, "^body: not valid JSON")
        utf16 = json.dumps({"sentences": ["a"]}).encode("utf-16")
        self.assert_error(self.post(utf16), 400, "^body: not UTF-8")
        self.assert_error(self.post(b'{"sentences": ["\xff"]}'), 400, "^body: not UTF-8")

    # Validation by the models (what the OpenAPI schema says).

    def test_nulls_are_accepted_where_the_schema_says_so(self):
        schema = self.client.get("/openapi.json").json()["components"]["schemas"]
        native = schema["TranslateRequest"]
        self.assertFalse(native["additionalProperties"])
        self.assertEqual(native["required"], ["sentences"])
        self.assertEqual(native["properties"]["sentences"]["maxItems"], 4)
        self.assertIn({"type": "null"}, native["properties"]["domain"]["anyOf"])
        self.assertNotIn("anyOf", native["properties"]["sentences"])
        for body in (
            {"sentences": ["a"], "domain": None, "beam_size": None, "unlabelled": None},
            {"sentences": ["a"], "domains": [None]},
        ):
            self.assertEqual(self.post(body)[0], 200, body)
        self.assert_error(self.post({"sentences": None}), 422, "^sentences: null is not allowed")
        self.assert_error(self.post({"sentences": [None]}), 422, r"^sentences\[0\]: null is not")
        self.assert_error(
            self.post({"sentences": ["a"], "beam": 2}), 422, "^beam: unknown field .expected: "
        )
        self.assert_error(
            self.post({"sentences": ["a"] * 5}), 422, "^sentences: 5 items, more than .* 4$"
        )
        self.assert_error(self.post({"sentences": ["a"], "beam_size": True}), 422, "^beam_size: ")
        self.assert_error(self.post({"sentences": [3]}), 422, r"^sentences\[0\]: expected a str")

    # Text that is not valid Unicode, byte-order marks.

    @parameterized.parameterized.expand(
        [
            ("sentence", '{"sentences": ["ok", "a \\ud800 b"]}', r"^sentences\[1\]: not valid"),
            ("domain", '{"sentences": ["a"], "domain": "med\\udfffical"}', "^domain: not valid"),
            ("unlabelled", '{"sentences": ["a"], "unlabelled": "\\ud800"}', "^unlabelled: not"),
            (
                "domains",
                '{"sentences": ["a", "b"], "domains": [null, "\\udc80"]}',
                r"^domains\[1\]: not valid",
            ),
            ("field_name", '{"sentences": ["a"], "\\ud800x": 1}', r"^the field name .\\ud800x"),
            ("libretranslate", '{"q": "\\ud800", "source": "en", "target": "fr"}', "^q: not valid"),
        ]
    )
    def test_lone_surrogates_are_a_422_naming_the_field(self, _, body, regex):
        message = self.assert_error(self.post(body), 422, regex)
        self.assertIn("\\u", message)  # The value escaped, as it was sent.

    def test_a_bad_client_does_not_fail_the_clients_batched_with_it(self):
        # Eight clients at once, one with a lone surrogate: it gets a 422 at the request,
        # before its sentence joins a batch; every other client gets its translations.
        models = {name: FakeModel(name, delay_s=0.05) for name in fake_backend.DOMAINS}
        application = fake_backend.app(models=models, max_wait_ms=300.0)
        bodies = [
            '{"sentences": ["s%d a", "s%d b"], "domain": "medical"}' % (i, i) for i in range(8)
        ]
        bodies[3] = '{"sentences": ["ok", "bad \\ud800"], "domain": "medical"}'
        barrier = threading.Barrier(len(bodies))
        with TestClient(application) as client:

            def _post(body):
                barrier.wait()
                return client.post("/translate", content=body, headers=JSON)

            with concurrent.futures.ThreadPoolExecutor(len(bodies)) as pool:
                responses = list(pool.map(_post, bodies))
        for i, response in enumerate(responses):
            if i == 3:
                self.assertEqual(response.status_code, 422, response.text)
                self.assertRegex(response.json()["error"], r"^sentences\[1\]: not valid Unicode")
                continue
            self.assertEqual(response.status_code, 200, response.text)
            texts = [t["text"] for t in response.json()["translations"]]
            self.assertEqual(
                texts, [expected("s%d a" % i, "medical"), expected("s%d b" % i, "medical")]
            )
        self.assertGreater(max(models["medical"].batches), 2)  # They were batched together.

    def test_a_failing_batch_is_retried_job_by_job(self):
        # Past the request checks (here: called in process), a sentence that fails the
        # model fails its own request only.
        models = {name: FakeModel(name, delay_s=0.05) for name in fake_backend.DOMAINS}
        application = fake_backend.app(models=models, max_wait_ms=300.0)
        server = application.state.server
        good = [server.parse(json.dumps({"sentences": ["x %d" % i]})) for i in range(3)]
        bad = server.parse(json.dumps({"sentences": ["y"]}))
        bad.tokens = [["bad", "\ud800"]]

        async def _all():
            return await asyncio.gather(
                *(server.run(r) for r in good[:2] + [bad] + good[2:]), return_exceptions=True
            )

        try:
            results = asyncio.run(_all())
        finally:
            server.close()
        self.assertIsInstance(results[2], server_lib.RequestError)
        self.assertEqual(results[2].status, 500)
        for i, result in zip((0, 1, 2), results[:2] + results[3:]):
            self.assertEqual(result["translations"][0]["text"], expected("x %d" % i, "generic"))

    def test_a_byte_order_mark_is_removed_with_a_warning(self):
        plain = self.post({"sentences": ["the cell", "a host"], "domain": "medical"})
        marked = self.post({"sentences": ["\ufeffthe cell", "a host"], "domain": "medical"})
        self.assertEqual(marked[1]["translations"], plain[1]["translations"])
        self.assertEqual(
            marked[1]["warnings"],
            ["sentences[0]: a byte-order mark (U+FEFF) at its start was removed"],
        )
        self.assertNotIn("warnings", plain[1])
        body = b"\xef\xbb\xbf" + json.dumps({"sentences": ["the cell"]}).encode()
        status, answer = self.post(body)
        self.assertEqual(status, 200, answer)
        self.assertEqual(
            answer["warnings"], ["body: a byte-order mark (U+FEFF) at its start was removed"]
        )

    # The server's internals stay out of its answers.

    def test_no_absolute_path_or_python_repr_in_answers(self):
        error = (
            "/srv/models/export/medical: cannot load the CTranslate2 model (<ctranslate2._ext."
            "Translator object at 0x7f3a2c1b8e30> failed)"
        )
        models = {name: FakeModel(name) for name in fake_backend.DOMAINS}
        models["medical"] = FakeModel("medical", load_error=error)
        application = fake_backend.app(models=models, lazy=True)
        with TestClient(application) as client:
            response = client.post(
                "/translate", json={"sentences": ["a"], "domain": "medical"}, headers=JSON
            )
            self.assertEqual(response.status_code, 500)
            message = response.json()["error"]
            self.assertEqual(
                message,
                "translation failed: medical: cannot load the CTranslate2 model (<object> failed)",
            )
            for path in ("/openapi.json", "/health", "/domains"):
                text = client.get(path).text
                self.assertNotIn("/nonexistent", text, path)
                self.assertNotRegex(text, "0x[0-9a-f]{6,}", path)
            description = client.get("/openapi.json").json()["info"]["description"]
            self.assertIn("with export (ctranslate2)", description)

    # Hosts and CORS.

    def test_hosts_outside_the_allowed_list_are_refused(self):
        application = fake_backend.app(allowed_hosts=list(server_lib.DEFAULT_HOSTS))
        with TestClient(application, base_url="http://localhost:8000") as client:
            self.assertEqual(client.get("/health").status_code, 200)
            for host in ("127.0.0.1:8000", "[::1]:8000", "localhost"):
                self.assertEqual(client.get("/health", headers={"Host": host}).status_code, 200)
            # Names compare as DNS compares them (round six: refused before): any case, and
            # the root's trailing dot.
            for host in ("LocalHost:8000", "localhost.", "LOCALHOST.:8000"):
                self.assertEqual(client.get("/health", headers={"Host": host}).status_code, 200)
            for host in ("localhost..", "localhost.evil.example", "xlocalhost"):
                self.assertEqual(client.get("/health", headers={"Host": host}).status_code, 400)
            response = client.post(
                "/translate", json={"sentences": ["a"]}, headers={"Host": "evil.example:8000"}
            )
            self.assertEqual(response.status_code, 400)
            self.assertEqual(
                response.json(),
                {"error": 'Host: "evil.example:8000" is not allowed (--allowed_hosts)'},
            )
            # No CORS by default: no header lets a page of another origin read the answer.
            response = client.get("/health", headers={"Origin": "http://evil.example"})
            self.assertNotIn("access-control-allow-origin", response.headers)

    def test_wildcard_hosts_compare_as_dns_names(self):
        application = fake_backend.app(allowed_hosts=["*.Example.COM."])
        with TestClient(application, base_url="http://api.example.com") as client:
            for host, status in (
                ("API.example.com", 200),
                ("api.example.com.:8000", 200),
                ("example.com.evil.org", 400),
            ):
                response = client.get("/health", headers={"Host": host})
                self.assertEqual(response.status_code, status, host)

    def test_cors_origins_option(self):
        application = fake_backend.app(cors_origins=["https://app.example"])
        with TestClient(application) as client:
            response = client.options(
                "/translate",
                headers={
                    "Origin": "https://app.example",
                    "Access-Control-Request-Method": "POST",
                    "Access-Control-Request-Headers": "content-type",
                },
            )
            self.assertEqual(response.status_code, 200)
            self.assertEqual(response.headers["access-control-allow-origin"], "https://app.example")
            response = client.get("/health", headers={"Origin": "https://other.example"})
            self.assertNotIn("access-control-allow-origin", response.headers)

    # What ldr-serve says at start (its real process: test_server.py).

    def test_startup_lines_say_the_url_and_what_is_served(self):
        sock = app_lib.bind("127.0.0.1", 0)
        self.addCleanup(sock.close)
        url = "http://127.0.0.1:%d" % sock.getsockname()[1]
        listening = "ldr-serve: listening on %s (API pages: %s/docs; Ctrl-C stops)" % (url, url)
        self.assertEqual(
            app_lib.startup_lines(self.app, sock),
            [
                listening,
                "ldr-serve: /nonexistent/abs/dir/export: domains medical, software, generic "
                "(ctranslate2, loaded, en to fr); text without a domain is translated as generic "
                "(no --classifier)",
            ],
        )
        application = fake_backend.app(classifier=fake_backend.FakeClassifier(), lazy=True)
        with TestClient(application):
            self.assertEqual(
                app_lib.startup_lines(application, sock)[1],
                "ldr-serve: /nonexistent/abs/dir/export: domains medical, software, generic "
                "(ctranslate2, loaded on first use); text without a domain gets the domain the "
                "classifier picks",
            )

    # Docs.

    def test_docs_are_served_from_local_assets(self):
        for page in ("/docs", "/redoc"):
            html = self.client.get(page).text
            urls = re.findall(r'(?:src|href)="([^"]+)"', html) + re.findall(r"url: '([^']+)'", html)
            self.assertTrue(urls, html)
            for url in urls:
                self.assertTrue(url.startswith("/"), (page, url))
                if url.startswith("/docs-assets/"):
                    self.assertEqual(self.client.get(url).status_code, 200, url)
            self.assertNotIn("cdn", html.lower())
