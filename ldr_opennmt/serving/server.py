"""``ldr-serve``: an HTTP translation server for multi-domain models.

::

    ldr-serve --model_dir export/ct2 --port 8000              # ldr-export ctranslate2
    ldr-serve --model_dir export/ldr --classifier export/clf  # a SavedModel, a classifier
    curl -s localhost:8000/translate -H 'Content-Type: application/json' \\
      -d '{"sentences": ["The cell is here."], "domain": "medical"}'

``--model_dir`` is either the directory of ``ldr-export ctranslate2`` (one CTranslate2 model
per domain and ``generic``, with its ``manifest.json``), or a SavedModel exported by
``ldr-main export`` / ``onmt-main export``, which takes a domain per sentence: the families
that do not fold (domain mixing, residual adapters, TTM, ML, AdvL, RNNs) are served that way
(:mod:`ldr_opennmt.serving.backends`). Raw text comes in and goes out, with the tokenizers
exported in ``assets.extra/`` (as ``ldr-translate`` reads them; a model exported without
tokenization takes and gives space-separated tokens).

**Domains.** A request gives a domain for all its sentences or one per sentence. A model
that reads no label (domain mixing, ML, AdvL, Mixed: :func:`~ldr_opennmt.serving.client.
label_policy`) translates a named domain as ``generic`` and says so (``"domain_choice":
"ignored: ..."``), as ``ldr-translate`` warns. A sentence without a domain goes to the
domain classifier when the server has one (``--classifier``, the project's classifier
exported as a SavedModel: :mod:`ldr_opennmt.serving.domain_classifier`), else to
``generic``; a request may ask for another way (``"unlabelled"``: ``generic``,
``classifier``, or an ensemble of domain views, ``ens-uniform``, ``ens-learned``,
``ens-soft``, on a SavedModel whose family has them). A SavedModel also takes ensemble labels
as domains.

**Batching.** Concurrent requests are grouped into batches per queue (a CTranslate2
domain, the SavedModel, the classifier): a worker takes the oldest job, then waits up to
``--max_wait_ms`` for more until the batch holds ``--max_batch_size`` sentences
(:mod:`ldr_opennmt.serving.batching`). Each request gets back exactly its own results, in
its order.

**Limits.** A body larger than ``--max_request_bytes`` is refused (413), and so are more
than ``--max_sentences`` sentences or a sentence of more than ``--max_sentence_tokens``
tokens (422). At most ``--max_queued_sentences`` sentences are accepted and not yet answered:
past that a request is refused with 503 (retry later). A request not answered within
``--timeout_s`` gets 504. Every error is a JSON object ``{"error": "one line"}`` naming the
field; no request can stop the server.
"""

import asyncio
import contextlib
import json
import os
import sys
import threading

import fastapi
import pydantic
from fastapi import responses

from ldr_opennmt import domains as domains_lib
from ldr_opennmt import ensembles
from ldr_opennmt.errors import UserError
from ldr_opennmt.serving import backends, batching
from ldr_opennmt.serving.backends import RequestError
from ldr_opennmt.serving.domain_classifier import DomainClassifier

PROG = "ldr-serve"

#: How a sentence's domain was chosen (``domain_choice``).
GIVEN = "given"
NO_LABEL = "generic: no label"
CLASSIFIER = "classifier"
ENSEMBLE = "ensemble"
IGNORED = "ignored: "

#: What to do with a sentence without a domain (the request's ``unlabelled``).
UNLABELLED_GENERIC = "generic"
UNLABELLED_CLASSIFIER = "classifier"
ENS_SOFT = "ens-soft"
UNLABELLED = (
    UNLABELLED_GENERIC,
    UNLABELLED_CLASSIFIER,
    ensembles.ENS_UNIFORM,
    ensembles.ENS_LEARNED,
    ENS_SOFT,
)


class Options:
    """The server's settings (the options of ``ldr-serve``)."""

    def __init__(
        self,
        model_dir,
        classifier=None,
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
        lazy=False,
        max_loaded_models=None,
    ):
        self.model_dir = model_dir
        self.classifier = classifier
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
        # A cap on the loaded models loads them on first use.
        self.lazy = lazy or max_loaded_models is not None
        self.max_loaded_models = max_loaded_models
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
        if self.max_loaded_models is not None and self.max_loaded_models < 1:
            raise UserError("--max_loaded_models must be >= 1, got %s" % self.max_loaded_models)


class TranslateRequest(pydantic.BaseModel):
    """The body of ``POST /translate`` (documentation: the server parses the JSON itself,
    to answer every mistake with one line naming the field)."""

    sentences: list[str] = pydantic.Field(..., description="Raw source sentences.")
    domain: str | None = pydantic.Field(
        None,
        description="The domain of every sentence (a domain of GET /domains; on a SavedModel "
        "that has them, an ensemble label too). null: none.",
    )
    domains: list[str | None] | None = pydantic.Field(
        None, description="One domain per sentence (null: none)."
    )
    unlabelled: str | None = pydantic.Field(
        None,
        description="For the sentences without a domain: generic, classifier (--classifier), "
        "or an ensemble of domain views (SavedModel): ens-uniform, ens-learned, ens-soft "
        "(the classifier's posterior). Default: classifier with --classifier, else generic.",
    )
    beam_size: int = pydantic.Field(
        None, description="Beam size (CTranslate2; default 1: greedy). A SavedModel has its own."
    )
    num_hypotheses: int = pydantic.Field(
        None, description="Translations returned per sentence (default 1)."
    )


class Translation(pydantic.BaseModel):
    text: str
    domain: str = pydantic.Field(
        ..., description="The domain (or ensemble label) the sentence was translated with."
    )
    domain_choice: str = pydantic.Field(
        ...,
        description="'given', 'generic: no label', 'classifier', 'ensemble', or 'ignored: "
        "WHY' (the model reads no label).",
    )
    hypotheses: list[str]
    scores: list[float]


class TranslateResponse(pydantic.BaseModel):
    translations: list[Translation]


class _Request:
    """A checked request: its sentences, how each was routed, and the decoding options."""

    def __init__(self, sentences, routes, tokens, unlabelled, beam_size, num_hypotheses):
        self.sentences = sentences
        #: Per sentence ``[route, domain, choice]``: the backend's label (a CTranslate2
        #: domain, a SavedModel label), the domain answered and how it was chosen; route
        #: ``None`` until the classifier has labelled the sentence.
        self.routes = routes
        self.tokens = tokens
        self.unlabelled = unlabelled
        self.beam_size = beam_size
        self.num_hypotheses = num_hypotheses


class Server:
    """The backend, the classifier, the queues and the request checks (one per application).

    Args:
      options: :class:`Options`.
      backend: A backend to serve instead of ``options.model_dir`` (tests).
      classifier: A classifier instead of ``options.classifier`` (tests).
    """

    def __init__(self, options, backend=None, classifier=None):
        self.options = options
        self.backend = backend if backend is not None else backends.load(options)
        try:
            if classifier is None and options.classifier:
                if self.backend.ignored is not None:
                    # Every sentence is translated as generic: nothing to label.
                    print(
                        "%s: warning: --classifier %s is not loaded: %s: %s"
                        % (PROG, options.classifier, options.model_dir, self.backend.ignored),
                        file=sys.stderr,
                    )
                else:
                    classifier = DomainClassifier(options.classifier)
            self.classifier = classifier
            self._check_classifier()
        except BaseException:
            self.backend.close()
            raise
        self.classifier_queue = None
        if self.classifier is not None:
            self.classifier_queue = batching.BatchQueue(
                CLASSIFIER, self._classify, options.max_batch_size, options.max_wait_ms
            )
        self.default_unlabelled = (
            UNLABELLED_CLASSIFIER
            if self.classifier is not None and self.backend.ignored is None
            else UNLABELLED_GENERIC
        )
        self.queued = 0
        self.queued_lock = threading.Lock()
        self.refused_overload = 0

    def _check_classifier(self):
        """Refuses a classifier with a domain the model does not have."""
        if self.classifier is None or self.backend.ignored is not None:
            return
        missing = [d for d in self.classifier.domains if d not in self.backend.labels]
        if missing:
            raise UserError(
                "--classifier: %s predicts %s, which %s has no model for (it has: %s)"
                % (
                    self.classifier.export_dir,
                    ", ".join(missing),
                    self.options.model_dir,
                    ", ".join(self.backend.labels),
                )
            )

    def close(self):
        self.backend.close()
        if self.classifier_queue is not None:
            self.classifier_queue.close()

    def _classify(self, key, token_lists):
        return self.classifier(token_lists)

    # Checks.

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

    def _ensemble_refusal(self, label):
        """Why the backend does not translate the ensemble label :obj:`label` (or ``None``)."""
        if self.backend.ensemble_refusal:
            return self.backend.ensemble_refusal
        if label.strip(domains_lib.ASCII_SPACE) == ensembles.ENS_LEARNED:
            return self.backend.learned_refusal
        return None

    def _given(self, label, field):
        """``[route, domain, choice]`` of a sentence given :obj:`label`."""
        if not isinstance(label, str):
            raise RequestError(
                422, "%s: expected a domain name or null, got %s" % (field, _short(label))
            )
        backend = self.backend
        if ensembles.is_ensemble_label(label):
            refusal = self._ensemble_refusal(label)
            if refusal:
                raise RequestError(
                    422, "%s: ensemble label %s: %s" % (field, _short(label), refusal)
                )
            stripped = label.strip(domains_lib.ASCII_SPACE)
            if stripped not in (ensembles.ENS_UNIFORM, ensembles.ENS_LEARNED):
                try:
                    ensembles.parse_label(stripped, backend.declared, where=field)
                except UserError as e:
                    raise RequestError(422, _one_line(e)) from None
            return [stripped, stripped, GIVEN]
        known = label in backend.labels or (backend.ignored is not None and not backend.declared)
        if not known:
            raise RequestError(
                422,
                "%s: unknown domain %s (this server has: %s)"
                % (field, _short(label), ", ".join(backend.labels)),
            )
        if backend.ignored is not None:
            choice = GIVEN if label == domains_lib.GENERIC else IGNORED + backend.ignored
            return [domains_lib.GENERIC, domains_lib.GENERIC, choice]
        return [label, label, GIVEN]

    def _unlabelled_mode(self, body):
        """The request's ``unlabelled`` (checked against what this server has)."""
        mode = self._field(body, "unlabelled", str)
        if mode is None:
            return self.default_unlabelled
        if mode not in UNLABELLED:
            raise RequestError(
                422, "unlabelled: must be one of %s, got %s" % (", ".join(UNLABELLED), _short(mode))
            )
        if mode.startswith(ensembles.RESERVED_PREFIX):
            refusal = self._ensemble_refusal(mode)
            if refusal:
                raise RequestError(422, "unlabelled: %s: %s" % (_short(mode), refusal))
        # A model that reads no label translates every sentence as generic: no classifier.
        needs_classifier = mode == ENS_SOFT or (
            mode == UNLABELLED_CLASSIFIER and self.backend.ignored is None
        )
        if needs_classifier and self.classifier is None:
            raise RequestError(
                422,
                "unlabelled: %s needs a domain classifier, and this server has none (start it "
                "with --classifier)" % _short(mode),
            )
        return mode

    def _unlabelled(self, mode):
        """``[route, domain, choice]`` of a sentence without a label (route ``None``: the
        classifier decides)."""
        if self.backend.ignored is not None or mode == UNLABELLED_GENERIC:
            return [domains_lib.GENERIC, domains_lib.GENERIC, NO_LABEL]
        if mode in (UNLABELLED_CLASSIFIER, ENS_SOFT):
            return [None, None, CLASSIFIER if mode == UNLABELLED_CLASSIFIER else ENSEMBLE]
        return [mode, mode, ENSEMBLE]  # ens-uniform, ens-learned.

    def _tokenize(self, i, sentence, route):
        backend = self.backend
        tokens = backend.tokenize(route, sentence)
        limit = self.options.max_sentence_tokens
        if backend.source_limit(route) is not None:
            limit = min(limit, backend.source_limit(route))
        if not tokens:
            raise RequestError(422, "sentences[%d]: empty sentence (no tokens)" % i)
        if len(tokens) > limit:
            raise RequestError(
                422,
                "sentences[%d]: %d tokens, more than this server's limit of %d"
                % (i, len(tokens), limit),
            )
        return tokens

    def parse(self, data):
        """Checks a request body (bytes).

        Returns:
          A :class:`_Request`.

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
            fields = ["domains[%d]" % i for i in range(len(labels))]
        else:
            labels = [self._field(body, "domain", str)] * len(sentences)
            fields = ["domain"] * len(sentences)
        unlabelled = self._unlabelled_mode(body)
        routes = [
            self._unlabelled(unlabelled) if label is None else self._given(label, field)
            for label, field in zip(labels, fields)
        ]
        beam_size, num_hypotheses = self.backend.check_decoding(
            self._field(body, "beam_size", int), self._field(body, "num_hypotheses", int)
        )
        tokens = [
            self._tokenize(i, sentence, route or domains_lib.GENERIC)
            for i, (sentence, (route, _, _)) in enumerate(zip(sentences, routes))
        ]
        return _Request(sentences, routes, tokens, unlabelled, beam_size, num_hypotheses)

    # Translation.

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

    async def _label(self, request, jobs):
        """Labels the sentences that wait for the classifier (route ``None``)."""
        pending = [i for i, (route, _, _) in enumerate(request.routes) if route is None]
        if not pending:
            return
        items = []
        for i in pending:
            tokens = self.classifier.tokenize(request.sentences[i])
            items.append(tokens or request.tokens[i])
        job = batching.Job(items)
        jobs.append(job)
        self.classifier_queue.put(job)
        try:
            results = await asyncio.wrap_future(job.future)
        except Exception as e:  # pylint: disable=broad-except
            raise RequestError(500, "classification failed: %s" % _one_line(e)) from None
        for i, (domain, posterior) in zip(pending, results):
            if request.unlabelled == ENS_SOFT:
                label = self.classifier.soft_label(posterior)
                request.routes[i] = [label, label, ENSEMBLE]
            else:
                request.routes[i] = [domain, domain, CLASSIFIER]
                if self.backend.kind == backends.CTRANSLATE2 and domain != domains_lib.GENERIC:
                    # The tokens of the domain's own tokenizer (the same in an export of
                    # ldr-export ctranslate2, whose models share their assets).
                    request.tokens[i] = self._tokenize(i, request.sentences[i], domain)

    async def _translate(self, request):
        jobs = []
        try:
            await self._label(request, jobs)
            submitted = self.backend.submit(
                [route for route, _, _ in request.routes],
                request.tokens,
                request.beam_size,
                request.num_hypotheses,
            )
            jobs.extend(job for _, job in submitted)
            try:
                results = await asyncio.gather(
                    *(asyncio.wrap_future(job.future) for _, job in submitted)
                )
            except Exception as e:  # pylint: disable=broad-except
                raise RequestError(500, "translation failed: %s" % _one_line(e)) from None
        finally:
            for job in jobs:
                job.future.cancel()  # No-op once done; skips the batch otherwise.
        translations = [None] * len(request.sentences)
        for (indices, _), job_results in zip(submitted, results):
            for i, (hypotheses, scores) in zip(indices, job_results):
                route, domain, choice = request.routes[i]
                texts = [
                    self.backend.detokenize(route, h) for h in hypotheses[: request.num_hypotheses]
                ]
                translations[i] = {
                    "text": texts[0],
                    "domain": domain,
                    "domain_choice": choice,
                    "hypotheses": texts,
                    "scores": scores[: request.num_hypotheses],
                }
        return {"translations": translations}

    async def translate(self, data):
        """Translates a request body: the response as a dictionary.

        Raises:
          RequestError: on a refused or failed request.
        """
        request = self.parse(data)
        self._reserve(len(request.sentences))
        try:
            return await asyncio.wait_for(self._translate(request), self.options.timeout_s)
        except asyncio.TimeoutError:
            raise RequestError(
                504, "timeout: not translated within %g s (--timeout_s)" % self.options.timeout_s
            ) from None
        finally:
            self._release(len(request.sentences))

    def domains(self):
        """``GET /domains``: the labels and the ways of translating unlabelled sentences."""
        modes = [UNLABELLED_GENERIC]
        if self.classifier is not None and self.backend.ignored is None:
            modes.append(UNLABELLED_CLASSIFIER)
        if self.backend.ensemble_refusal is None:
            modes.append(ensembles.ENS_UNIFORM)
            if self.backend.learned_refusal is None:
                modes.append(ensembles.ENS_LEARNED)
            if self.classifier is not None:
                modes.append(ENS_SOFT)
        return {
            "domains": self.backend.labels,
            "model": self.backend.kind,
            "labels_ignored": self.backend.ignored,
            "unlabelled": self.default_unlabelled,
            "unlabelled_modes": modes,
            "classifier_domains": None if self.classifier is None else self.classifier.domains,
        }

    def health(self):
        with self.queued_lock:
            queued, refused = self.queued, self.refused_overload
        health = {
            "status": "ok",
            "model": self.backend.kind,
            "queued_sentences": queued,
            "max_queued_sentences": self.options.max_queued_sentences,
            "refused_overload": refused,
        }
        health.update(self.backend.health())
        if self.classifier_queue is not None:
            health["classifier"] = self.classifier_queue.stats()
        return health


def _short(value):
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 40 else text[:37] + "..."


def _one_line(error):
    lines = [line for line in str(error).splitlines() if line.strip()]
    return lines[-1] if lines else type(error).__name__


def _error(status, message):
    return responses.JSONResponse({"error": message}, status_code=status)


def create_app(options, backend=None, classifier=None):
    """The FastAPI application of :obj:`options` (models loaded now, or on first use with
    ``--lazy``; worker threads run until the application shuts down).

    Raises:
      UserError: if the export cannot be served.
    """
    server = Server(options, backend=backend, classifier=classifier)

    @contextlib.asynccontextmanager
    async def lifespan(_):
        yield
        server.close()

    app = fastapi.FastAPI(
        title="ldr-serve",
        description="Multi-domain translation with %s (%s)"
        % (os.path.abspath(options.model_dir), server.backend.kind),
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
            500: {"description": "The model failed on the batch"},
            503: {"description": "Queue full: retry later"},
            504: {"description": "Not translated within --timeout_s"},
        },
    )
    async def translate(request: fastapi.Request):
        """Translates raw sentences, with a domain per request or per sentence (or none)."""
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
            answer = await server.translate(b"".join(chunks))
        except RequestError as e:
            return _error(e.status, str(e))
        # Serialized here: FastAPI would validate the answer against TranslateResponse
        # (documentation only) first, which costs more than the translation of a sentence.
        return responses.Response(
            json.dumps(answer, ensure_ascii=False).encode("utf-8"), media_type="application/json"
        )

    @app.get("/domains")
    async def domains():
        """The domains this server translates (``generic`` included), whether the model
        reads them, and what it does with sentences without one."""
        return server.domains()

    @app.get("/health")
    async def health():
        """Liveness, queue length, batching counters per queue, loaded models."""
        return server.health()

    return app


def serve(options, host="127.0.0.1", port=8000, log_level="info"):
    """Loads the models and serves them until interrupted."""
    import uvicorn  # pylint: disable=import-outside-toplevel

    app = create_app(options)
    uvicorn.run(app, host=host, port=port, log_level=log_level)
    return 0
