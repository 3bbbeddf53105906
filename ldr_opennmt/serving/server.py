"""``ldr-serve``: an HTTP server on the CTranslate2 models of ``ldr-export ctranslate2``.

::

    ldr-serve --model_dir export/ct2 --port 8000
    curl -s localhost:8000/translate -H 'Content-Type: application/json' \\
      -d '{"sentences": ["The cell is here."], "domain": "medical"}'

The directory holds one CTranslate2 model per domain (and ``generic``) and a
``manifest.json`` (:mod:`ldr_opennmt.serving.ct2_export`); every model is loaded at start.
Raw text comes in and goes out: each model's tokenizers are those exported in its
``assets.extra/`` (read by :func:`ldr_opennmt.assets.load_tokenizer`, as ``ldr-translate``
reads them; a model exported without tokenization takes and gives space-separated tokens).

**Batching.** Each domain has a queue and ``--inter_threads`` worker threads (its
Translator's ``inter_threads``). A worker takes the oldest request, then waits up to
``--max_wait_ms`` for other requests of the same domain (and the same ``beam_size`` and
``num_hypotheses``) until the batch holds ``--max_batch_size`` sentences, and decodes them in
one ``translate_batch`` call. A request's sentences of one domain always go into one batch,
whole; each request gets back exactly its own results, in its order.

**Limits.** A body larger than ``--max_request_bytes`` is refused (413), and so are more
than ``--max_sentences`` sentences or a sentence of more than ``--max_sentence_tokens``
tokens (422). At most ``--max_queued_sentences`` sentences are accepted and not yet answered:
past that a request is refused with 503 (retry later). A request not answered within
``--timeout_s`` gets 504. Every error is a JSON object ``{"error": "one line"}`` naming the
field; no request can stop the server.
"""

import asyncio
import collections
import concurrent.futures
import contextlib
import json
import os
import threading
import time

import ctranslate2
import fastapi
import pydantic
from fastapi import responses

from ldr_opennmt import assets as assets_lib
from ldr_opennmt import domains as domains_lib
from ldr_opennmt.errors import UserError
from ldr_opennmt.serving import client, ct2_export

#: How a sentence's domain was chosen.
GIVEN = "given"
NO_LABEL = "generic: no label"


class Options:
    """The server's settings (the options of ``ldr-serve``)."""

    def __init__(
        self,
        model_dir,
        max_batch_size=32,
        max_wait_ms=5.0,
        max_request_bytes=1 << 20,
        max_sentences=256,
        max_sentence_tokens=256,
        max_queued_sentences=2048,
        timeout_s=30.0,
        max_decoding_length=256,
        max_beam_size=16,
        inter_threads=1,
        intra_threads=1,
        device="cpu",
    ):
        self.model_dir = model_dir
        self.max_batch_size = max_batch_size
        self.max_wait_ms = max_wait_ms
        self.max_request_bytes = max_request_bytes
        self.max_sentences = max_sentences
        self.max_sentence_tokens = max_sentence_tokens
        self.max_queued_sentences = max_queued_sentences
        self.timeout_s = timeout_s
        self.max_decoding_length = max_decoding_length
        self.max_beam_size = max_beam_size
        self.inter_threads = inter_threads
        self.intra_threads = intra_threads
        self.device = device
        self.check()

    def check(self):
        """Raises :class:`UserError` on a value out of range."""
        for name in (
            "max_batch_size",
            "max_request_bytes",
            "max_sentences",
            "max_sentence_tokens",
            "max_queued_sentences",
            "max_decoding_length",
            "max_beam_size",
            "inter_threads",
        ):
            if getattr(self, name) < 1:
                raise UserError("--%s must be >= 1, got %s" % (name, getattr(self, name)))
        for name in ("max_wait_ms", "intra_threads"):
            if getattr(self, name) < 0:
                raise UserError("--%s must be >= 0, got %s" % (name, getattr(self, name)))
        if not self.timeout_s > 0:
            raise UserError("--timeout_s must be > 0, got %s" % self.timeout_s)


class RequestError(Exception):
    """A refused request: an HTTP status and a one-line message."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status = status


class DomainModel:
    """One domain's CTranslate2 Translator and tokenizers."""

    def __init__(self, name, path, options):
        self.name = name
        self.path = path
        self.source_tokenizer = assets_lib.load_tokenizer(path, "source")
        self.target_tokenizer = assets_lib.load_tokenizer(path, "target")
        # An export of the package's own SavedModel assets may say how many source tokens
        # the model takes (CTranslate2 exports have none today: then --max_sentence_tokens).
        self.maximum_source_length = client.read_inference_info(path).get(
            client.MAXIMUM_SOURCE_LENGTH
        )
        self.translator = ctranslate2.Translator(
            path,
            device=options.device,
            inter_threads=options.inter_threads,
            intra_threads=options.intra_threads,
        )

    def tokenize(self, text):
        return client._tokenize(self.source_tokenizer, text)

    def detokenize(self, tokens):
        return client._detokenize(self.target_tokenizer, tokens)


def load_models(options):
    """Loads every domain of the export (``{domain: DomainModel}``).

    Raises:
      UserError: if the directory is not an export of ``ldr-export ctranslate2`` or a
        model cannot be loaded.
    """
    model_dir = options.model_dir
    if not os.path.isdir(model_dir):
        raise UserError("--model_dir: %s: directory not found" % model_dir)
    if not ct2_export.is_export(model_dir):
        raise UserError(
            "--model_dir: %s: not an export of ldr-export ctranslate2 (no %s of format %s)"
            % (model_dir, ct2_export.MANIFEST, ct2_export.FORMAT)
        )
    manifest = ct2_export.read_manifest(model_dir)
    models = {}
    for domain, directory in manifest["domains"].items():
        path = os.path.join(model_dir, directory)
        try:
            models[domain] = DomainModel(domain, path, options)
        except (RuntimeError, ValueError, OSError) as e:
            if isinstance(e, UserError):
                raise
            raise UserError("%s: cannot load the CTranslate2 model (%s)" % (path, e)) from None
    if domains_lib.GENERIC not in models:
        raise UserError(
            "--model_dir: %s has no %s model: sentences without a domain need one "
            "(export it with ldr-export ctranslate2 --domains ... generic)"
            % (model_dir, domains_lib.GENERIC)
        )
    return models


class Job:
    """One request's sentences of one domain, decoded together in one batch."""

    def __init__(self, tokens, beam_size, num_hypotheses):
        self.tokens = tokens
        self.key = (beam_size, num_hypotheses)
        self.future = concurrent.futures.Future()


class DomainQueue:
    """The pending jobs of one domain and the worker threads that batch and decode them."""

    def __init__(self, model, options):
        self.model = model
        self.options = options
        self.jobs = collections.deque()
        self.condition = threading.Condition()
        self.closed = False
        self.batches = 0
        self.sentences = 0
        self.largest_batch = 0
        self.threads = [
            threading.Thread(
                target=self._work, name="ldr-serve-%s-%d" % (model.name, i), daemon=True
            )
            for i in range(options.inter_threads)
        ]
        for thread in self.threads:
            thread.start()

    def put(self, job):
        with self.condition:
            self.jobs.append(job)
            self.condition.notify_all()

    def close(self):
        with self.condition:
            self.closed = True
            self.condition.notify_all()
        for thread in self.threads:
            thread.join(timeout=10)

    def _take(self):
        """The next batch: the oldest job, then compatible jobs that arrive within
        ``max_wait_ms``, up to ``max_batch_size`` sentences (``None`` once closed)."""
        with self.condition:
            while not self.jobs and not self.closed:
                self.condition.wait()
            if not self.jobs:
                return None
            first = self.jobs.popleft()
            batch, size = [first], len(first.tokens)
            deadline = time.monotonic() + self.options.max_wait_ms / 1000.0
            while size < self.options.max_batch_size and not self.closed:
                match = next((job for job in self.jobs if job.key == first.key), None)
                if match is not None:
                    if size + len(match.tokens) > self.options.max_batch_size:
                        break
                    self.jobs.remove(match)
                    batch.append(match)
                    size += len(match.tokens)
                    continue
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self.condition.wait(remaining)
            return batch

    def _work(self):
        while True:
            batch = self._take()
            if batch is None:
                return
            # Jobs whose request timed out were cancelled: not decoded.
            batch = [job for job in batch if job.future.set_running_or_notify_cancel()]
            if not batch:
                continue
            beam_size, num_hypotheses = batch[0].key
            tokens = [sentence for job in batch for sentence in job.tokens]
            try:
                results = self.model.translator.translate_batch(
                    tokens,
                    beam_size=beam_size,
                    num_hypotheses=num_hypotheses,
                    max_decoding_length=self.options.max_decoding_length,
                    return_scores=True,
                )
            except Exception as e:  # pylint: disable=broad-except
                for job in batch:
                    job.future.set_exception(e)
                continue
            with self.condition:
                self.batches += 1
                self.sentences += len(tokens)
                self.largest_batch = max(self.largest_batch, len(tokens))
            start = 0
            for job in batch:
                job.future.set_result(results[start : start + len(job.tokens)])
                start += len(job.tokens)

    def stats(self):
        with self.condition:
            return {
                "batches": self.batches,
                "sentences": self.sentences,
                "largest_batch": self.largest_batch,
                "queued_jobs": len(self.jobs),
            }


class TranslateRequest(pydantic.BaseModel):
    """The body of ``POST /translate`` (documentation: the server parses the JSON itself,
    to answer every mistake with one line naming the field)."""

    sentences: list[str] = pydantic.Field(..., description="Raw source sentences.")
    domain: str | None = pydantic.Field(
        None, description="The domain of every sentence (a declared domain or generic)."
    )
    domains: list[str | None] | None = pydantic.Field(
        None, description="One domain per sentence (null: no label, translated as generic)."
    )
    beam_size: int = pydantic.Field(None, description="Beam size (default 1: greedy).")
    num_hypotheses: int = pydantic.Field(
        None, description="Translations returned per sentence (<= beam_size, default 1)."
    )


class Translation(pydantic.BaseModel):
    text: str
    domain: str
    domain_choice: str = pydantic.Field(..., description="'given' or 'generic: no label'.")
    hypotheses: list[str]
    scores: list[float]


class TranslateResponse(pydantic.BaseModel):
    translations: list[Translation]


class Server:
    """The models, their queues and the request checks (one per application)."""

    def __init__(self, options, models=None):
        self.options = options
        self.models = models if models is not None else load_models(options)
        self.queues = {name: DomainQueue(model, options) for name, model in self.models.items()}
        self.queued = 0
        self.queued_lock = threading.Lock()
        self.refused_overload = 0

    def close(self):
        for queue in self.queues.values():
            queue.close()

    def _field(self, body, name, kind, default=None):
        value = body.get(name, default)
        if value is None:
            return default
        if kind is int and (isinstance(value, bool) or not isinstance(value, int)):
            raise RequestError(422, "%s: expected an integer, got %s" % (name, _short(value)))
        if kind is list and not isinstance(value, list):
            raise RequestError(422, "%s: expected a list, got %s" % (name, _short(value)))
        if kind is str and not isinstance(value, str):
            raise RequestError(422, "%s: expected a string, got %s" % (name, _short(value)))
        return value

    def _domain(self, label, field):
        if label is None:
            return domains_lib.GENERIC, NO_LABEL
        if not isinstance(label, str):
            raise RequestError(
                422, "%s: expected a domain name or null, got %s" % (field, _short(label))
            )
        if label not in self.models:
            raise RequestError(
                422,
                "%s: unknown domain %s (this server has: %s)"
                % (field, _short(label), ", ".join(self.models)),
            )
        return label, GIVEN

    def parse(self, data):
        """Checks a request body (bytes).

        Returns:
          ``(sentences, [(domain, choice)], [tokens], beam_size, num_hypotheses)``.

        Raises:
          RequestError: on the first mistake found.
        """
        try:
            body = json.loads(data)
        except (ValueError, UnicodeDecodeError) as e:  # Not UTF-8 either.
            raise RequestError(400, "body: not valid JSON (%s)" % _one_line(e)) from None
        except RecursionError:
            raise RequestError(400, "body: not valid JSON (nested too deeply)") from None
        if not isinstance(body, dict):
            raise RequestError(422, "body: expected a JSON object, got %s" % _short(body))
        unknown = sorted(set(body) - set(TranslateRequest.__fields__))
        if unknown:
            raise RequestError(
                422,
                "%s: unknown field (expected: %s)"
                % (unknown[0], ", ".join(TranslateRequest.__fields__)),
            )
        if "sentences" not in body:
            raise RequestError(422, "sentences: missing (a list of sentences)")
        sentences = self._field(body, "sentences", list)
        if sentences is None:
            raise RequestError(422, "sentences: expected a list, got null")
        if not sentences:
            raise RequestError(422, "sentences: empty list")
        if len(sentences) > self.options.max_sentences:
            raise RequestError(
                422,
                "sentences: %d sentences, more than this server's limit of %d per request"
                % (len(sentences), self.options.max_sentences),
            )
        for i, sentence in enumerate(sentences):
            if not isinstance(sentence, str):
                raise RequestError(
                    422, "sentences[%d]: expected a string, got %s" % (i, _short(sentence))
                )
            if not sentence.strip():
                raise RequestError(422, "sentences[%d]: empty sentence" % i)
        if body.get("domain") is not None and body.get("domains") is not None:
            raise RequestError(422, "domain, domains: give one of them, not both")
        if body.get("domains") is not None:
            labels = self._field(body, "domains", list)
            if len(labels) != len(sentences):
                raise RequestError(
                    422,
                    "domains: %d labels for %d sentences (one per sentence, null for none)"
                    % (len(labels), len(sentences)),
                )
            chosen = [self._domain(label, "domains[%d]" % i) for i, label in enumerate(labels)]
        else:
            label = self._field(body, "domain", str)
            chosen = [self._domain(label, "domain")] * len(sentences)
        beam_size = self._field(body, "beam_size", int, 1)
        if not 1 <= beam_size <= self.options.max_beam_size:
            raise RequestError(
                422,
                "beam_size: must be between 1 and %d, got %d"
                % (self.options.max_beam_size, beam_size),
            )
        num_hypotheses = self._field(body, "num_hypotheses", int, 1)
        if not 1 <= num_hypotheses <= beam_size:
            raise RequestError(
                422,
                "num_hypotheses: must be between 1 and beam_size (%d), got %d"
                % (beam_size, num_hypotheses),
            )
        tokens = []
        for i, (sentence, (domain, _)) in enumerate(zip(sentences, chosen)):
            model = self.models[domain]
            sentence_tokens = model.tokenize(sentence)
            limit = self.options.max_sentence_tokens
            if model.maximum_source_length is not None:
                limit = min(limit, model.maximum_source_length)
            if not sentence_tokens:
                raise RequestError(422, "sentences[%d]: empty sentence (no tokens)" % i)
            if len(sentence_tokens) > limit:
                raise RequestError(
                    422,
                    "sentences[%d]: %d tokens, more than this server's limit of %d"
                    % (i, len(sentence_tokens), limit),
                )
            tokens.append(sentence_tokens)
        return sentences, chosen, tokens, beam_size, num_hypotheses

    def _reserve(self, count):
        with self.queued_lock:
            if self.queued + count > self.options.max_queued_sentences:
                self.refused_overload += 1
                raise RequestError(
                    503,
                    "overloaded: %d sentences queued, at most %d: retry later"
                    % (self.queued, self.options.max_queued_sentences),
                )
            self.queued += count

    def _release(self, count):
        with self.queued_lock:
            self.queued -= count

    async def translate(self, data):
        """Translates a request body: the response as a dictionary."""
        sentences, chosen, tokens, beam_size, num_hypotheses = self.parse(data)
        by_domain = collections.OrderedDict()
        for i, (domain, _) in enumerate(chosen):
            by_domain.setdefault(domain, []).append(i)
        self._reserve(len(sentences))
        jobs = []
        try:
            for domain, indices in by_domain.items():
                job = Job([tokens[i] for i in indices], beam_size, num_hypotheses)
                self.queues[domain].put(job)
                jobs.append((domain, indices, job))
            try:
                results = await asyncio.wait_for(
                    asyncio.gather(*(asyncio.wrap_future(job.future) for _, _, job in jobs)),
                    timeout=self.options.timeout_s,
                )
            except asyncio.TimeoutError:
                raise RequestError(
                    504,
                    "timeout: not translated within %g s (--timeout_s)" % self.options.timeout_s,
                ) from None
            except Exception as e:  # pylint: disable=broad-except
                raise RequestError(500, "translation failed: %s" % _one_line(e)) from None
        finally:
            for _, _, job in jobs:
                job.future.cancel()  # No-op once done; skips the decoding otherwise.
            self._release(len(sentences))
        translations = [None] * len(sentences)
        for (domain, indices, _), domain_results in zip(jobs, results):
            model = self.models[domain]
            for i, result in zip(indices, domain_results):
                hypotheses = [model.detokenize(h) for h in result.hypotheses]
                translations[i] = {
                    "text": hypotheses[0],
                    "domain": domain,
                    "domain_choice": chosen[i][1],
                    "hypotheses": hypotheses,
                    "scores": [float(score) for score in result.scores],
                }
        return {"translations": translations}

    def health(self):
        with self.queued_lock:
            queued, refused = self.queued, self.refused_overload
        return {
            "status": "ok",
            "queued_sentences": queued,
            "max_queued_sentences": self.options.max_queued_sentences,
            "refused_overload": refused,
            "domains": {name: queue.stats() for name, queue in self.queues.items()},
        }


def _short(value):
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 40 else text[:37] + "..."


def _one_line(error):
    lines = [line for line in str(error).splitlines() if line.strip()]
    return lines[-1] if lines else type(error).__name__


def _error(status, message):
    return responses.JSONResponse({"error": message}, status_code=status)


def create_app(options, models=None):
    """The FastAPI application of :obj:`options` (models loaded now; worker threads run
    until the application shuts down).

    Raises:
      UserError: if the export cannot be served.
    """
    server = Server(options, models=models)

    @contextlib.asynccontextmanager
    async def lifespan(_):
        yield
        server.close()

    app = fastapi.FastAPI(
        title="ldr-serve",
        description="Multi-domain translation with the CTranslate2 models of %s"
        % os.path.abspath(options.model_dir),
        lifespan=lifespan,
    )
    app.state.server = server

    @app.post(
        "/translate",
        response_model=TranslateResponse,
        openapi_extra={
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": TranslateRequest.schema()}},
            }
        },
        responses={
            400: {"description": "Malformed JSON"},
            413: {"description": "Body larger than --max_request_bytes"},
            422: {"description": "A field is wrong (the message names it)"},
            503: {"description": "Queue full: retry later"},
            504: {"description": "Not translated within --timeout_s"},
        },
    )
    async def translate(request: fastapi.Request):
        """Translates raw sentences, with a domain per request or per sentence."""
        limit = options.max_request_bytes
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            return _error(413, "body: %s bytes, more than the limit of %d" % (declared, limit))
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                return _error(413, "body: more than the limit of %d bytes" % limit)
            chunks.append(chunk)
        try:
            return await server.translate(b"".join(chunks))
        except RequestError as e:
            return _error(e.status, str(e))

    @app.get("/domains")
    async def domains():
        """The domains this server translates (``generic`` included)."""
        return {"domains": list(server.models), "default": domains_lib.GENERIC}

    @app.get("/health")
    async def health():
        """Liveness, queue length and batching counters per domain."""
        return server.health()

    return app


def serve(options, host="127.0.0.1", port=8000, log_level="info"):
    """Loads the models and serves them until interrupted."""
    import uvicorn  # pylint: disable=import-outside-toplevel

    app = create_app(options)
    uvicorn.run(app, host=host, port=port, log_level=log_level)
    return 0
