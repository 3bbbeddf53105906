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
that reads no label (domain mixing, ML, AdvL, Mixed:
:func:`~ldr_opennmt.serving.savedmodel_translate.label_policy`) translates a named domain as
``generic`` and says so (``"domain_choice": "ignored: ..."``), as ``ldr-translate`` warns. A
sentence without a domain goes to the domain classifier when the server has one
(``--classifier``, the project's classifier exported as a SavedModel:
:mod:`ldr_opennmt.serving.domain_classifier`), or else to the export's wrong-domain guard
(:mod:`ldr_opennmt.serving.domain_guard`: ``generic`` when it is unsure, and the answer says
why), else to ``generic``; a request may ask for another way (``"unlabelled"``: ``generic``,
``classifier``, or an ensemble of domain views, ``ens-uniform``, ``ens-learned``,
``ens-soft``, on a SavedModel whose family has them). A SavedModel also takes ensemble labels
as domains.

**What a translator can trust.** A calibrated domain (``ldr-export --confidence``) answers each
sentence with its ``confidence`` and ``low_confidence`` (:mod:`ldr_opennmt.serving.confidence`);
a request's ``glossary`` is annotated into its sentences for a model trained with terminology
(:mod:`ldr_opennmt.data.terms`), and the answer lists the ``terms`` applied.

**Batching.** Concurrent requests are grouped into batches per queue (a CTranslate2
domain, the SavedModel, the classifier): a worker takes the oldest job, then waits up to
``--max_wait_ms`` for more until the batch holds ``--max_batch_size`` sentences, but not when
every request in progress already has its jobs queued (:mod:`ldr_opennmt.serving.batching`).
Each request gets back exactly its own results, in its order.

**Limits.** A body larger than ``--max_request_bytes`` is refused (413), and so are more
than ``--max_sentences`` sentences or a sentence of more than ``--max_sentence_tokens``
tokens (422). At most ``--max_queued_sentences`` sentences are accepted and not yet answered:
past that a request is refused with 503 (retry later). A request not answered within
``--timeout_s`` gets 504. Every error is a JSON object ``{"error": "one line"}`` naming the
field; no request can stop the server. A batch that fails is run again one request at a time
(:mod:`ldr_opennmt.serving.batching`), so one bad input fails only its own request.

**Checks.** A body is UTF-8 JSON with no lone surrogate in any string (422 naming the field,
before anything is queued); it is validated by the pydantic models of
:mod:`ldr_opennmt.serving.api_models`, which also make the OpenAPI schema; a byte-order mark
at the start of a sentence is removed, with a note in the answer's ``warnings``. The HTTP side
(routes, LibreTranslate's and OpenNMT-py's APIs, metrics, hosts, timeouts) is
:mod:`ldr_opennmt.serving.app`.
"""

import asyncio
import collections
import json
import sys
import threading

from ldr_opennmt import domains as domains_lib
from ldr_opennmt import ensembles
from ldr_opennmt.data import terms
from ldr_opennmt.errors import UserError
from ldr_opennmt.serving import api_models, backends, batching, http_io
from ldr_opennmt.serving import manifest as manifest_lib
from ldr_opennmt.serving.backend_kinds import RequestError
from ldr_opennmt.serving.options import DEFAULT_HOSTS, Options  # noqa: F401 (server.Options)

PROG = "ldr-serve"

#: How a sentence's domain was chosen (``domain_choice``).
GIVEN = "given"
NO_LABEL = "generic: no label"
CLASSIFIER = "classifier"
GUARD = "guard"
#: Why a backend applies no glossary (one that does says ``terminology_refusal = None``).
GLOSSARY_REFUSAL = (
    "glossaries are applied by the CTranslate2 export (ldr-export ctranslate2) of a model trained"
    " on a corpus of ldr-data terms"
)
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


class _Request:
    """A checked request: its sentences, how each was routed, and the decoding options."""

    def __init__(
        self, sentences, routes, tokens, unlabelled, beam_size, num_hypotheses, groups=None
    ):
        self.sentences = sentences
        #: Per sentence ``[route, domain, choice]``: the backend's label (a CTranslate2
        #: domain, a SavedModel label), the domain answered and how it was chosen; route
        #: ``None`` until the classifier has labelled the sentence.
        self.routes = routes
        self.tokens = tokens
        self.unlabelled = unlabelled
        self.beam_size = beam_size
        self.num_hypotheses = num_hypotheses
        #: Per sentence, the text it belongs to (``None``: each sentence is its own): the
        #: classifier labels a text as a whole, and its sentences get that label.
        self.groups = groups
        #: Per sentence, the classifier's (or guard's) probability of its pick, or ``None``.
        self.probabilities = [None] * len(sentences)


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
                    classifier = _classifier_class()(options.classifier)
            elif classifier is None and self.backend.ignored is None:
                # The export's wrong-domain guard (ldr-export --domain_guard): no TensorFlow.
                classifier = getattr(self.backend, "guard", None)
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
        #: Sentences answered by the guard, ``{(domain, fell back): count}``, and with a
        #: confidence, ``{(domain, low_confidence): count}`` (read by ``GET /metrics``).
        self.guard_choices = collections.Counter()
        self.confidences = collections.Counter()
        self.refused_overload = 0
        self.models = api_models.request_models(options.max_sentences, options.max_beam_size)
        self.source_language, self.target_language = _languages(options)
        #: Requests in progress (counted by the HTTP protocol) and jobs: a batch waits for
        #: more jobs only when a request may still queue one.
        self.activity = batching.Activity()
        for queue in self.queues():
            queue.activity = self.activity

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
                422, "%s: expected a domain name or null, got %s" % (field, api_models.short(label))
            )
        backend = self.backend
        if ensembles.is_ensemble_label(label):
            refusal = self._ensemble_refusal(label)
            if refusal:
                raise RequestError(
                    422, "%s: ensemble label %s: %s" % (field, api_models.short(label), refusal)
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
                % (field, api_models.short(label), ", ".join(backend.labels)),
            )
        if backend.ignored is not None:
            choice = GIVEN if label == domains_lib.GENERIC else IGNORED + backend.ignored
            return [backend.route(domains_lib.GENERIC), domains_lib.GENERIC, choice]
        # The model the domain has now: the request keeps it to its end.
        return [backend.route(label), label, GIVEN]

    def _unlabelled_mode(self, mode):
        """The request's ``unlabelled`` (checked against what this server has)."""
        if mode is None:
            return self.default_unlabelled
        if mode not in UNLABELLED:
            raise RequestError(
                422,
                "unlabelled: must be one of %s, got %s"
                % (", ".join(UNLABELLED), api_models.short(mode)),
            )
        if mode.startswith(ensembles.RESERVED_PREFIX):
            refusal = self._ensemble_refusal(mode)
            if refusal:
                raise RequestError(422, "unlabelled: %s: %s" % (api_models.short(mode), refusal))
        # A model that reads no label translates every sentence as generic: no classifier.
        needs_classifier = mode == ENS_SOFT or (
            mode == UNLABELLED_CLASSIFIER and self.backend.ignored is None
        )
        if needs_classifier and self.classifier is None:
            raise RequestError(
                422,
                "unlabelled: %s needs a domain classifier, and this server has none (start it "
                "with --classifier)" % api_models.short(mode),
            )
        return mode

    def _unlabelled(self, mode):
        """``[route, domain, choice]`` of a sentence without a label (route ``None``: the
        classifier decides)."""
        if self.backend.ignored is not None or mode == UNLABELLED_GENERIC:
            return [self.backend.route(domains_lib.GENERIC), domains_lib.GENERIC, NO_LABEL]
        if mode in (UNLABELLED_CLASSIFIER, ENS_SOFT):
            return [None, None, CLASSIFIER if mode == UNLABELLED_CLASSIFIER else ENSEMBLE]
        return [mode, mode, ENSEMBLE]  # ens-uniform, ens-learned.

    def _glossary(self, glossary):
        """The request's ``glossary``, checked (``None``: none given)."""
        if glossary is None:
            return None
        refusal = getattr(self.backend, "terminology_refusal", GLOSSARY_REFUSAL)
        if refusal:
            raise RequestError(422, "glossary: %s" % refusal)
        try:
            return terms.check_glossary(glossary, "glossary")
        except UserError as e:
            raise RequestError(422, _one_line(e)) from None

    def _tokenize(self, i, sentence, route, name=None, glossary=None, applied=None):
        backend = self.backend
        if glossary:
            tokens, found = backend.annotate(route, sentence, glossary)
            if applied is not None:
                applied[i] = found
        else:
            tokens = backend.tokenize(route, sentence)
        limit = self.options.max_sentence_tokens
        if backend.source_limit(route) is not None:
            limit = min(limit, backend.source_limit(route))
        name = name or "sentences[%d]" % i
        if not tokens:
            raise RequestError(422, "%s: empty sentence (no tokens)" % name)
        if len(tokens) > limit:
            raise RequestError(
                422,
                "%s: %d tokens, more than this server's limit of %d" % (name, len(tokens), limit),
            )
        return tokens

    def decode(self, data):
        """The JSON value of a body (bytes or text), with no lone surrogate in it.

        Returns:
          ``(value, warnings)``: a byte-order mark at the start is removed with a warning.

        Raises:
          RequestError: 400 (not UTF-8, not JSON), 422 (a string that is not valid Unicode).
        """
        warnings = []
        if isinstance(data, bytes):
            try:
                data = data.decode("utf-8")
            except UnicodeDecodeError as e:
                raise RequestError(
                    400, "body: not UTF-8 (byte 0x%02x at byte %d)" % (data[e.start], e.start)
                ) from None
        if data.startswith(api_models.BOM):
            data = data.lstrip(api_models.BOM)
            warnings.append("body: a byte-order mark (U+FEFF) at its start was removed")
        try:
            body = json.loads(data)
        except ValueError as e:
            raise RequestError(400, "body: not valid JSON (%s)" % _one_line(e)) from None
        except RecursionError:
            raise RequestError(400, "body: not valid JSON (nested too deeply)") from None
        try:
            api_models.check_text(body)
        except ValueError as e:
            raise RequestError(422, str(e)) from None
        except RecursionError:  # Python 3.12's parser accepts deeper nesting than 3.11's.
            raise RequestError(400, "body: not valid JSON (nested too deeply)") from None
        return body, warnings

    def validate(self, model, body):
        """:obj:`body` validated by the request model named :obj:`model`.

        Raises:
          RequestError: 422 naming the first wrong field.
        """
        if not isinstance(body, dict):
            raise RequestError(422, "body: expected a JSON object, got %s" % api_models.short(body))
        try:
            return api_models.validate(self.models[model], body)
        except ValueError as e:
            raise RequestError(422, str(e)) from None

    def parse(self, data):
        """Checks a native request body (bytes or text).

        Returns:
          A :class:`_Request`.

        Raises:
          RequestError: on the first mistake found.
        """
        body, warnings = self.decode(data)
        return self.parse_native(body, warnings)

    def parse_native(self, body, warnings=()):
        """Checks the decoded body of a native ``POST /translate``: a :class:`_Request`."""
        request = self.validate("TranslateRequest", body)
        sentences = request.sentences
        if request.domain is not None and request.domains is not None:
            raise RequestError(422, "domain, domains: give one of them, not both")
        if request.domains is not None:
            labels = request.domains
            if len(labels) != len(sentences):
                raise RequestError(
                    422,
                    "domains: %d labels for %d sentences (one per sentence, null for none)"
                    % (len(labels), len(sentences)),
                )
            fields = ["domains[%d]" % i for i in range(len(labels))]
        else:
            labels = [request.domain] * len(sentences)
            fields = ["domain"] * len(sentences)
        return self.prepare(
            sentences,
            labels,
            fields,
            request.unlabelled,
            request.beam_size,
            request.num_hypotheses,
            warnings=warnings,
            glossary=request.glossary,
        )

    def prepare(
        self,
        sentences,
        labels,
        fields,
        unlabelled=None,
        beam_size=None,
        num_hypotheses=None,
        warnings=(),
        names=None,
        groups=None,
        glossary=None,
    ):
        """Checks and routes sentences (valid Unicode) with their labels.

        Args:
          sentences: The raw sentences.
          labels: One domain label (or ``None``) per sentence.
          fields: The request field of each label (for the messages).
          unlabelled: The request's ``unlabelled`` (``None``: the server's default).
          beam_size, num_hypotheses: The request's (``None``: the backend's defaults).
          warnings: Notes so far.
          names: The request field of each sentence (default ``sentences[i]``).
          groups: The text each sentence belongs to (e.g. its index in LibreTranslate's
            ``q``): the classifier labels each text as a whole. ``None``: each sentence
            alone.
          glossary: The request's ``{source term: target term}`` (``None``: none), annotated
            in the sentences (:func:`ldr_opennmt.data.terms.annotate`).

        Returns:
          A :class:`_Request`.
        """
        names = names or ["sentences[%d]" % i for i in range(len(sentences))]
        sentences, notes = api_models.strip_bom(sentences, names)
        for name, sentence in zip(names, sentences):
            if not sentence.strip():
                raise RequestError(422, "%s: empty sentence" % name)
        unlabelled = self._unlabelled_mode(unlabelled)
        glossary = self._glossary(glossary)
        routes = [
            self._unlabelled(unlabelled) if label is None else self._given(label, field)
            for label, field in zip(labels, fields)
        ]
        beam_size, num_hypotheses = self.backend.check_decoding(beam_size, num_hypotheses)
        applied = [[] for _ in sentences]
        tokens = [
            self._tokenize(
                i,
                sentence,
                route or self.backend.route(domains_lib.GENERIC),
                names[i],
                glossary,
                applied,
            )
            for i, (sentence, (route, _, _)) in enumerate(zip(sentences, routes))
        ]
        request = _Request(sentences, routes, tokens, unlabelled, beam_size, num_hypotheses, groups)
        request.glossary, request.terms = glossary, applied
        request.warnings = list(warnings) + notes
        request.names = names
        return request

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
        groups = request.groups or range(len(request.sentences))
        members = {}  # Each text's pending sentences, in order.
        for i in pending:
            members.setdefault(groups[i], []).append(i)
        members = list(members.values())
        items = []
        for indices in members:
            tokens = self.classifier.tokenize(" ".join(request.sentences[i] for i in indices))
            tokens = tokens or [token for i in indices for token in request.tokens[i]]
            if len(indices) > 1:
                # A text's domain from its first --max_sentence_tokens tokens.
                tokens = tokens[: self.options.max_sentence_tokens]
            items.append(tokens)
        job = batching.Job(items)
        jobs.append(job)
        self.classifier_queue.put(job)
        try:
            results = await asyncio.wrap_future(job.future)
        except Exception as e:  # pylint: disable=broad-except
            raise RequestError(500, "classification failed: %s" % _one_line(e)) from None
        for indices, (domain, posterior) in zip(members, results):
            label = (
                self.classifier.soft_label(posterior) if request.unlabelled == ENS_SOFT else None
            )
            choice = getattr(self.classifier, "choice", lambda posterior: CLASSIFIER)(posterior)
            for i in indices:
                if label is not None:
                    request.routes[i] = [label, label, ENSEMBLE]
                    continue
                route = self.backend.route(domain)
                request.routes[i] = [route, domain, choice]
                request.probabilities[i] = max(posterior)
                if self.backend.kind == backends.CTRANSLATE2 and domain != domains_lib.GENERIC:
                    # The tokens of the domain's own tokenizer (the same in an export of
                    # ldr-export ctranslate2, whose models share their assets).
                    request.tokens[i] = self._tokenize(
                        i,
                        request.sentences[i],
                        route,
                        request.names[i],
                        request.glossary,
                        request.terms,
                    )

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
        confidence = getattr(self.backend, "confidence", None)
        for (indices, job), job_results in zip(submitted, results):
            sure = None
            if confidence is not None:
                route = request.routes[indices[0]][0]  # A job is one route's.
                sure = confidence(
                    route,
                    [len(t) for t in job.items],
                    [(hypotheses[0], scores[0]) for hypotheses, scores in job_results],
                )
            for k, (i, (hypotheses, scores)) in enumerate(zip(indices, job_results)):
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
                if request.glossary is not None:
                    translations[i]["terms"] = [list(term) for term in request.terms[i]]
                if request.probabilities[i] is not None:
                    translations[i]["domain_probability"] = request.probabilities[i]
                if sure is not None:
                    translations[i]["confidence"] = round(sure[k][0], 4)
                    translations[i]["low_confidence"] = sure[k][1]
                    self.confidences[domain, sure[k][1]] += 1
                if choice.startswith(GUARD):
                    self.guard_choices[domain, choice != GUARD] += 1
        return {"translations": translations}

    async def run(self, request):
        """Translates a checked :class:`_Request`: the native response as a dictionary
        (``warnings`` only when there are some).

        Raises:
          RequestError: on a refused or failed request.
        """
        self._reserve(len(request.sentences))
        try:
            answer = await asyncio.wait_for(self._translate(request), self.options.timeout_s)
        except asyncio.TimeoutError:
            raise RequestError(
                504, "timeout: not translated within %g s (--timeout_s)" % self.options.timeout_s
            ) from None
        finally:
            self._release(len(request.sentences))
        if request.warnings:
            answer["warnings"] = request.warnings
        return answer

    async def translate(self, data):
        """Translates a native request body (bytes or text): the response as a dictionary.

        Raises:
          RequestError: on a refused or failed request.
        """
        return await self.run(self.parse(data))

    async def detect_domain(self, texts):
        """The classifier's domain and posterior for each raw text.

        Returns:
          One ``{"domain", "probability", "probabilities"}`` per text.

        Raises:
          RequestError: 501 without a classifier; 422 on an empty text.
        """
        if self.classifier is None:
            raise RequestError(
                501, "this server has no domain classifier (start it with --classifier)"
            )
        names = ["q[%d]" % i for i in range(len(texts))] if len(texts) > 1 else ["q"]
        texts, _ = api_models.strip_bom(texts, names)
        items = []
        for i, (name, text) in enumerate(zip(names, texts)):
            if not text.strip():
                raise RequestError(422, "%s: empty text" % name)
            tokens = self.classifier.tokenize(text)
            items.append(tokens or self._tokenize(i, text, domains_lib.GENERIC, name))
        job = batching.Job(items)
        self._reserve(len(items))
        try:
            self.classifier_queue.put(job)
            results = await asyncio.wait_for(
                asyncio.wrap_future(job.future), self.options.timeout_s
            )
        except asyncio.TimeoutError:
            job.future.cancel()
            raise RequestError(
                504, "timeout: not classified within %g s (--timeout_s)" % self.options.timeout_s
            ) from None
        except Exception as e:  # pylint: disable=broad-except
            raise RequestError(500, "classification failed: %s" % _one_line(e)) from None
        finally:
            self._release(len(items))
        answers = []
        for domain, posterior in results:
            probabilities = dict(zip(self.classifier.domains, posterior))
            answers.append(
                {
                    "domain": domain,
                    "probability": probabilities.get(domain, max(posterior)),
                    "probabilities": probabilities,
                }
            )
        return answers

    def queues(self):
        """The batch queues (the backend's and the classifier's)."""
        queues = list(getattr(self.backend, "queues", {}).values())
        if getattr(self.backend, "queue", None) is not None:
            queues.append(self.backend.queue)
        if self.classifier_queue is not None:
            queues.append(self.classifier_queue)
        return queues

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
            # The export's guard (ldr-export --domain_guard) or the SavedModel of --classifier.
            "classifier": (
                None
                if self.classifier is None
                else (
                    "guard"
                    if self.classifier is getattr(self.backend, "guard", 0)
                    else "savedmodel"
                )
            ),
            "guard_threshold": getattr(self.classifier, "threshold", None),
            # Whether requests may give a glossary (a model trained with terminology).
            "glossary": getattr(self.backend, "terminology_refusal", GLOSSARY_REFUSAL) is None,
            # The domains whose answers carry a calibrated confidence (ldr-export --confidence).
            "confidence_domains": [
                label
                for label in self.backend.labels
                if self.backend.route(label) in getattr(self.backend, "calibrations", {})
            ],
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
        return _public_tree(health)


def _classifier_class():
    """:class:`~ldr_opennmt.serving.domain_classifier.DomainClassifier`.

    Raises:
      UserError: where TensorFlow is not installed (the serving runtime): the classifier is
        a SavedModel.
    """
    try:
        # pylint: disable=import-outside-toplevel
        from ldr_opennmt.serving.domain_classifier import DomainClassifier
    except ImportError as e:
        if (e.name or "").split(".")[0] not in ("tensorflow", "opennmt", "keras"):
            raise
        raise UserError(
            "--classifier: the domain classifier is a SavedModel, which needs the training "
            "environment (TensorFlow is not installed here: %s); serve without --classifier, "
            "or run in the training environment (source run/setup_env.sh)" % e
        ) from None
    return DomainClassifier


def _one_line(error):
    lines = [line for line in str(error).splitlines() if line.strip()]
    return lines[-1] if lines else type(error).__name__


def _public_tree(value):
    """:obj:`value` (a JSON tree) with every string as :func:`http_io.public` writes it."""
    if isinstance(value, str):
        return http_io.public(value)
    if isinstance(value, dict):
        return {key: _public_tree(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_public_tree(item) for item in value]
    return value


def _languages(options):
    """``(source, target)`` language codes: the options', else those the export's manifest
    records (:func:`~ldr_opennmt.serving.manifest.read_manifest`: ``source_language`` and
    ``target_language``); ``None`` when unknown (a SavedModel records none)."""
    recorded = {}
    if manifest_lib.is_export(options.model_dir):
        recorded = manifest_lib.read_manifest(options.model_dir)
    source = options.source_language or recorded.get("source_language")
    target = options.target_language or recorded.get("target_language")
    return source or None, target or None
