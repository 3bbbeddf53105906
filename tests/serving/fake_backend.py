"""A tiny stand-in for the CTranslate2 models of ``ldr-serve`` (no model, no TensorFlow),
a fake domain classifier, and a real uvicorn server in a thread: the HTTP tests' pieces.

:class:`FakeModel` "translates" a sentence into its domain's name followed by its tokens in
reverse order, so a test can see which domain answered which sentence. Like CTranslate2,
which encodes every token to UTF-8, it fails the whole batch on a token that is not valid
Unicode (a lone surrogate).
"""

import json
import threading
import time
import unittest

import uvicorn

from ldr_opennmt.serving import app as app_lib
from ldr_opennmt.serving import backends
from ldr_opennmt.serving import server as server_lib

DOMAINS = ("medical", "software", "generic")
JSON = {"Content-Type": "application/json"}


class FakeModel:
    """A DomainModel stand-in (see the module docstring)."""

    maximum_source_length = None
    target_tokenizer = None  # Target text split on spaces (a glossary's target terms).

    def __init__(self, name, delay_s=0.0, load_error=None):
        self.name = name
        self.delay_s = delay_s
        self.load_error = load_error
        self.loaded = load_error is None
        self.loads = int(self.loaded)
        self.batches = []

    def load(self):
        if self.load_error is not None:
            raise server_lib.UserError(self.load_error)

    def unload(self):
        pass

    def tokenize(self, text):
        return text.split()

    def detokenize(self, tokens):
        return " ".join(tokens)

    def translate(self, tokens, beam_size=1, num_hypotheses=1, **kwargs):
        self.batches.append(len(tokens))
        if self.delay_s:
            time.sleep(self.delay_s)
        for sentence in tokens:
            " ".join(sentence).encode("utf-8")  # Raises on a lone surrogate, as CTranslate2.
        results = []
        for sentence in tokens:
            base = [self.name] + list(reversed(sentence))
            hypotheses = [base + ["#%d" % k] * (k > 0) for k in range(num_hypotheses)]
            results.append((hypotheses, [-1.0 - k for k in range(num_hypotheses)]))
        return results


def expected(sentence, domain):
    """What :class:`FakeModel` answers for :obj:`sentence` in :obj:`domain`."""
    return " ".join([domain] + list(reversed(sentence.split())))


class FakeClassifier:
    """A DomainClassifier stand-in: ``software`` for a text with "file", else ``medical``."""

    domains = ["medical", "software"]

    def tokenize(self, text):
        return text.split()

    def __call__(self, token_lists):
        results = []
        for tokens in token_lists:
            posterior = [0.2, 0.8] if "file" in tokens else [0.9, 0.1]
            results.append((self.domains[posterior.index(max(posterior))], posterior))
        return results

    def soft_label(self, posterior):
        return " ".join("%s:%g" % pair for pair in zip(self.domains, posterior))


def options(**kwargs):
    """Server options for a fake backend (any Host accepted unless said)."""
    values = dict(allowed_hosts=["*"], max_wait_ms=1.0)
    values.update(kwargs)
    return server_lib.Options("/nonexistent/abs/dir/export", **values)


def app(models=None, classifier=None, **kwargs):
    """The application over :class:`FakeModel` s (one per :data:`DOMAINS` by default)."""
    opts = options(**kwargs)
    models = models or {name: FakeModel(name) for name in DOMAINS}
    backend = backends.CTranslate2Backend(opts, models=models)
    return app_lib.create_app(opts, backend=backend, classifier=classifier)


class LiveServer:
    """A real uvicorn server on 127.0.0.1 (a free port) in a thread, configured as
    ``ldr-serve`` configures it (:func:`ldr_opennmt.serving.app.server_config`: its options
    and its HTTP protocol)."""

    def __init__(self, application, log_level="warning"):
        self.sock = app_lib.bind("127.0.0.1", 0)
        self.port = self.sock.getsockname()[1]
        self.server = uvicorn.Server(app_lib.server_config(application, log_level))
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True
        )

    @property
    def url(self):
        return "http://127.0.0.1:%d" % self.port

    def __enter__(self):
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise AssertionError("uvicorn did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc):
        self.server.should_exit = True
        self.thread.join(timeout=30)
        self.sock.close()


class AppTestCase(unittest.TestCase):
    """A test case with one application over the fake backend for its tests (``client``),
    English to French, at most 4 sentences and a beam of 4."""

    @classmethod
    def setUpClass(cls):
        # Imported here: httpx, which it needs, is a test tool (not in .venv-serve).
        from starlette.testclient import TestClient  # pylint: disable=import-outside-toplevel

        cls.app = app(max_sentences=4, max_beam_size=4, source_language="en", target_language="fr")
        cls.client = TestClient(cls.app).__enter__()

    @classmethod
    def tearDownClass(cls):
        cls.client.__exit__(None, None, None)

    def post(self, body, path="/translate", headers=JSON):
        data = body if isinstance(body, (bytes, str)) else json.dumps(body)
        response = self.client.post(path, content=data, headers=headers)
        return response.status_code, response.json()

    def assert_error(self, response, status, regex):
        self.assertEqual(response[0], status, response[1])
        self.assertEqual(list(response[1]), ["error"])
        message = response[1]["error"]
        self.assertNotIn("\n", message)
        self.assertRegex(message, regex)
        message.encode("utf-8")  # Encodable: no lone surrogate.
        return message
