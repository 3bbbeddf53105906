"""Domains added, replaced and removed while ``ldr-serve`` runs (the admin routes of
:mod:`ldr_opennmt.serving.admin`), on a real uvicorn server over the tiny LDR's CTranslate2
export, with clients translating meanwhile."""

import http.client
import json
import os
import shutil
import tempfile
import threading
import time
import unittest

import pytest

from ldr_opennmt.errors import UserError
from ldr_opennmt.serving import admin
from ldr_opennmt.serving import app as app_lib
from ldr_opennmt.serving import server as server_lib
from tests import builds
from tests.serving import fake_backend

TOKEN = "a-token-of-the-tests-0123456789"
SENTENCE = "the patient takes two tablets"


def _call(port, method, path, body=None, token=TOKEN):
    """``(status, headers, JSON answer)`` of one request."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = "Bearer " + token
    data = None if body is None else json.dumps(body).encode("utf-8")
    try:
        connection.request(method, path, body=data, headers=headers)
        response = connection.getresponse()
        return response.status, dict(response.getheaders()), json.loads(response.read() or b"null")
    finally:
        connection.close()


@pytest.mark.e2e
class AdminTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.export = builds.tiny_ldr_ct2()  # Shared: read only.
        # A short --timeout_s: a replaced model is retired 1 s after it.
        options = server_lib.Options(cls.export, admin_token=TOKEN, max_wait_ms=1.0, timeout_s=1.0)
        cls.live = fake_backend.LiveServer(app_lib.create_app(options)).__enter__()
        cls.port = cls.live.port

    @classmethod
    def tearDownClass(cls):
        cls.live.__exit__(None, None, None)

    def _translate(self, domain, sentence=SENTENCE):
        status, _, body = _call(
            self.port, "POST", "/translate", {"sentences": [sentence], "domain": domain}, None
        )
        return status, body

    def _restore(self, domain):
        status, _, body = _call(
            self.port, "PUT", "/admin/domains/" + domain, {"export": self.export}
        )
        self.assertEqual(status, 200, body)

    def test_without_the_token_nothing_changes(self):
        before = _call(self.port, "GET", "/domains", token=None)[2]["domains"]
        for token in (None, "a-wrong-token-of-the-same-size-00", TOKEN[:-1]):
            for method, path, body in (
                ("GET", "/admin/domains", None),
                ("PUT", "/admin/domains/law", {"export": self.export, "domain": "medical"}),
                ("DELETE", "/admin/domains/medical", None),
            ):
                status, headers, answer = _call(self.port, method, path, body, token)
                self.assertEqual(status, 401, (method, token, answer))
                self.assertEqual(headers.get("www-authenticate"), "Bearer")
                self.assertEqual(list(answer), ["error"])
        self.assertEqual(_call(self.port, "GET", "/domains", token=None)[2]["domains"], before)

    def test_a_domain_replaced_while_clients_translate_drops_no_request(self):
        medical = self._translate("medical")[1]["translations"][0]["text"]
        religious = self._translate("religious")[1]["translations"][0]["text"]
        self.assertNotEqual(medical, religious)  # The tiny LDR's domains translate apart.
        statuses, texts, stop = [], [], threading.Event()

        def client():
            while not stop.is_set():
                status, body = self._translate("medical")
                statuses.append(status)
                if status == 200:
                    texts.append(body["translations"][0]["text"])

        clients = [threading.Thread(target=client) for _ in range(4)]
        for thread in clients:
            thread.start()
        try:
            time.sleep(0.5)
            status, _, answer = _call(
                self.port,
                "PUT",
                "/admin/domains/medical",
                {"export": self.export, "domain": "religious"},
            )
            time.sleep(0.5)
        finally:
            stop.set()
            for thread in clients:
                thread.join(timeout=60)
        self.addCleanup(self._restore, "medical")
        self.assertEqual(status, 200, answer)
        self.assertEqual(answer["action"], "replaced")
        self.assertEqual(answer["source"], "%s (religious)" % self.export)
        # Every request answered, each by one model or the other; afterwards, the new one.
        self.assertGreater(len(statuses), 10)
        self.assertEqual(set(statuses), {200})
        self.assertEqual(set(texts) - {medical, religious}, set())
        self.assertEqual(self._translate("medical")[1]["translations"][0]["text"], religious)
        listed = _call(self.port, "GET", "/admin/domains")[2]["domains"]
        self.assertIn({"domain": "medical", "source": answer["source"]}, listed)

    def test_a_domain_is_added_then_removed(self):
        software = self._translate("software")[1]["translations"][0]["text"]
        status, _, answer = _call(
            self.port, "PUT", "/admin/domains/law", {"export": self.export, "domain": "software"}
        )
        self.assertEqual((status, answer["action"]), (200, "added"), answer)
        self.assertIn("law", _call(self.port, "GET", "/domains", token=None)[2]["domains"])
        status, body = self._translate("law")
        self.assertEqual(status, 200, body)
        self.assertEqual(body["translations"][0]["text"], software)
        self.assertEqual(body["translations"][0]["domain"], "law")
        status, _, answer = _call(self.port, "DELETE", "/admin/domains/law")
        self.assertEqual((status, answer), (200, {"domain": "law", "action": "removed"}))
        self.assertNotIn("law", _call(self.port, "GET", "/domains", token=None)[2]["domains"])
        status, body = self._translate("law")
        self.assertEqual(status, 422)
        self.assertRegex(body["error"], "unknown domain")

    def test_what_cannot_change_is_refused_in_one_line(self):
        for method, path, body, status, regex in (
            ("DELETE", "/admin/domains/generic", None, 409, "^domain: generic cannot be removed"),
            ("DELETE", "/admin/domains/nowhere", None, 404, "is not served here"),
            ("PUT", "/admin/domains/law", {"export": "/nonexistent/export"}, 422,
             "^export: /nonexistent/export: directory not found"),
            ("PUT", "/admin/domains/law", {"export": self.export}, 422,
             "^domain: \"law\" is not in .* \\(it has: medical, religious, software, generic\\)"),
            ("PUT", "/admin/domains/law", {"export": self.export, "model": "x"}, 422,
             "^model: unknown field"),
            ("PUT", "/admin/domains/ens-x", {"export": self.export}, 422, "ensemble labels"),
            ("PUT", "/admin/domains/law", ["x"], 422, "^export: expected"),
        ):  # fmt: skip
            answer = _call(self.port, method, path, body)
            self.assertEqual(answer[0], status, answer)
            self.assertEqual(list(answer[2]), ["error"])
            self.assertRegex(answer[2]["error"], regex)
        self.assertNotIn("law", _call(self.port, "GET", "/domains", token=None)[2]["domains"])

    def test_an_export_of_another_language_pair_is_refused(self):
        english_french = builds.tiny_ldr_ct2(languages=("en", "fr"))  # Shared: read only.
        folder = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, folder)
        german = os.path.join(folder, "ct2")
        shutil.copytree(english_french, german)
        with open(os.path.join(german, "manifest.json")) as f:
            manifest = json.load(f)
        manifest["target_language"] = "de"
        with open(os.path.join(german, "manifest.json"), "w") as f:
            json.dump(manifest, f)
        options = server_lib.Options(english_french, admin_token=TOKEN)
        with fake_backend.LiveServer(app_lib.create_app(options)) as live:
            status, _, answer = _call(
                live.port, "PUT", "/admin/domains/medical", {"export": german}
            )
            self.assertEqual(status, 422, answer)
            self.assertEqual(
                answer["error"],
                "export: target language of %s is de, this server's is fr" % german,
            )

    def test_the_routes_are_off_without_a_token(self):
        options = server_lib.Options(self.export)
        with fake_backend.LiveServer(app_lib.create_app(options)) as live:
            status, _, _ = _call(live.port, "GET", "/admin/domains")
            self.assertEqual(status, 404)
            schema = _call(live.port, "GET", "/openapi.json", token=None)[2]
            self.assertFalse(any(path.startswith("/admin") for path in schema["paths"]))


class TokenTest(unittest.TestCase):
    def test_the_token_comes_from_a_file_or_the_environment(self):
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "token")
            with open(path, "w") as f:
                f.write(TOKEN + "\n")
            self.assertEqual(admin.read_token(path, environ={}), TOKEN)
            with open(path, "w") as f:
                f.write("short\n")
            with self.assertRaisesRegex(UserError, "^--admin_token_file .*: an admin token of 5"):
                admin.read_token(path, environ={})
            with self.assertRaisesRegex(UserError, "cannot be read"):
                admin.read_token(os.path.join(folder, "none"), environ={})
        self.assertEqual(admin.read_token(None, environ={admin.TOKEN_ENV: TOKEN}), TOKEN)
        self.assertIsNone(admin.read_token(None, environ={}))


if __name__ == "__main__":
    unittest.main()
