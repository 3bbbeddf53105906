"""What ``ldr-serve`` translates with: the CTranslate2 models of an ``ldr-export ctranslate2``
directory (:class:`CTranslate2Backend`), or a SavedModel of ``ldr-main export``
(:class:`~ldr_opennmt.serving.savedmodel_backend.SavedModelBackend`), behind one interface.

A backend says which labels it takes (:attr:`labels`, :attr:`declared`), whether it reads
them (:attr:`ignored`) and translates ensembles (:attr:`ensemble_refusal`), tokenizes,
checks decoding options, and queues jobs (:meth:`submit`): each of its batches is one call
into its model (:mod:`ldr_opennmt.serving.batching`).

* CTranslate2: one model per domain, one queue per domain with ``--inter_threads`` workers;
  a batch is one ``translate_batch`` call of that domain's model, its jobs share the beam
  size and number of hypotheses. With ``--lazy`` a model is loaded on its first use, and
  ``--max_loaded_models`` caps the models loaded at once (the least recently used is
  unloaded first, :class:`~ldr_opennmt.serving.ct2_models.LoadedModels`).
* SavedModel (:mod:`ldr_opennmt.serving.savedmodel_backend`, imported only for one: it
  needs the training environment's TensorFlow): one model that takes a domain per
  sentence, one queue with one worker (calls into a loaded TensorFlow model are
  serialised, :mod:`ldr_opennmt.serving.savedmodel_translate`), so a batch may mix domains;
  plain labels and ensemble labels go into separate batches (a batch with an ensemble label
  runs every domain view). Its beam and number of hypotheses are those of the export.

This module and what it imports need no TensorFlow: ``ldr-serve`` runs in the serving
runtime (``.venv-serve``: Python 3.12+, CTranslate2 4) on CTranslate2 exports.
"""

import collections
import functools
import os
import sys
import threading

from ldr_opennmt import domains as domains_lib
from ldr_opennmt.data import terms
from ldr_opennmt.errors import UserError
from ldr_opennmt.serving import batching
from ldr_opennmt.serving import confidence as confidence_lib
from ldr_opennmt.serving import ct2_models
from ldr_opennmt.serving import manifest as manifest_lib
from ldr_opennmt.serving import tokenization
from ldr_opennmt.serving.backend_kinds import CTRANSLATE2, RequestError

#: The line ``ldr-serve`` prints at start for an export without tokenizers.
NO_TOKENIZER = (
    "ldr-serve: warning: %s: the export has no tokenizer (exported from a corpus without "
    "one): sentences are split on spaces and translations are tokens joined by spaces"
)


class CTranslate2Backend:
    """The CTranslate2 models of an ``ldr-export ctranslate2`` directory.

    Args:
      options: The server's :class:`~ldr_opennmt.serving.options.Options`.
      models: ``{domain: model}`` to serve instead of the directory's (tests).
    """

    kind = CTRANSLATE2

    def __init__(self, options, models=None):
        self.options = options
        if models is None:
            export = ct2_models.Export(options.model_dir)
            ct2_models.generic_required(options.model_dir, export.paths)
            models = export.models(
                tokenizer_required=False,
                device=options.device,
                inter_threads=options.inter_threads,
                intra_threads=options.intra_threads,
                load=not options.lazy,
                compute_type=getattr(options, "compute_type", None) or "default",
            )
            if all(model.source_tokenizer is None for model in models.values()):
                print(NO_TOKENIZER % options.model_dir, file=sys.stderr)
            manifest = export.manifest
            #: The export's wrong-domain guard (``domain: auto`` without TensorFlow), or
            #: ``None``; the dev figures its ``quality.json`` records.
            self.guard, _, self.quality_summary = export.quality
            #: Why it applies no glossary (``None``: trained with terminology annotation).
            self.terminology_refusal = (
                None
                if manifest.get("terminology")
                else "this model was not trained to apply terminology (train it on a corpus of"
                " ldr-data terms, then export it again)"
            )
            calibrations = {name: export.calibration(name) for name in models}
        else:
            manifest = {"declared_domains": [d for d in models if d != domains_lib.GENERIC]}
            self.guard, self.quality_summary, calibrations = None, {}, {}
            self.terminology_refusal = "this model was not trained to apply terminology"
        #: ``{key: DomainConfidence}``: the calibrated confidence of each model that has one
        #: (:mod:`ldr_opennmt.serving.confidence`).
        self.calibrations = {k: v for k, v in calibrations.items() if v is not None}
        #: ``{key: DomainModel}`` and ``{key: BatchQueue}``: a domain's key is its name, and
        #: ``NAME#N`` once replaced while the server runs (:meth:`put`).
        self.models = dict(models)
        self.declared = ct2_models.declared_domains(manifest)
        self.ignored, self.ensemble_refusal = ct2_models.label_reasons(manifest)
        self.learned_refusal = None
        self.loaded = ct2_models.LoadedModels(self.models, options.max_loaded_models)
        self.queues = {name: self._queue(name, name) for name in models}
        #: ``{domain: key}``: what each domain translates with now, replaced whole on a change.
        self._routes = collections.OrderedDict((name, name) for name in models)
        #: ``{domain: where its model comes from}`` (the export, and its domain there).
        self.sources = {name: "%s (%s)" % (options.model_dir, name) for name in models}
        self._generation = 0
        self._lock = threading.Lock()
        #: Called with each new queue's batches (:meth:`ldr_opennmt.serving.metrics.Metrics.
        #: on_batch`), set by the application.
        self.on_batch = None

    def _queue(self, domain, key):
        queue = batching.BatchQueue(
            domain,
            functools.partial(self._run, key),
            self.options.max_batch_size,
            self.options.max_wait_ms,
            threads=self.options.inter_threads,
        )
        if getattr(self, "on_batch", None) is not None:
            queue.on_batch = self.on_batch
        return queue

    @property
    def labels(self):
        """The domain labels this backend translates with now (``generic`` included)."""
        return list(self._routes)

    def route(self, domain):
        """The key :obj:`domain` translates with now: a request keeps it to its end (a model
        replaced meanwhile finishes the requests that started on it, :meth:`put`)."""
        try:
            return self._routes[domain]
        except KeyError:  # Removed since the request was checked.
            raise RequestError(
                422, "unknown domain %s (this server has: %s)" % (domain, ", ".join(self.labels))
            ) from None

    def annotate(self, route, text, glossary):
        """``(tokens, applied terms)`` of :obj:`text` with the glossary's terms annotated by
        :obj:`route`'s tokenizers (:func:`ldr_opennmt.data.terms.annotate`)."""
        model = self.models[route]
        return terms.annotate(
            text,
            glossary,
            model.tokenize,
            lambda target: tokenization.tokenize(model.target_tokenizer, target),
        )

    def confidence(self, route, source_lengths, outputs):
        """``[(confidence, low_confidence)]`` of translations by :obj:`route`'s model, or
        ``None`` when it has no calibration (:meth:`~ldr_opennmt.serving.confidence.
        Confidence.score`'s arguments)."""
        calibration = self.calibrations.get(route)
        if calibration is None or not outputs:
            return None
        rows = [
            confidence_lib.features(length, len(tokens), score)
            for length, (tokens, score) in zip(source_lengths, outputs)
        ]
        return [(float(p), bool(p < calibration.threshold)) for p in calibration(rows)]

    def put(self, domain, model, source, calibration=None):
        """Adds :obj:`domain`, or replaces its model, while the server runs: :obj:`model` (a
        :class:`~ldr_opennmt.serving.ct2_models.DomainModel`, loaded here: its files checked
        against its export's hashes) serves the requests that start from now on; the model it
        replaces goes on with those already started, and is retired once they are done.

        Its confidence is :obj:`calibration` (its export's, or ``None``: its answers carry
        none).

        Returns:
          ``"added"`` or ``"replaced"``.

        Raises:
          UserError: if the model cannot be loaded.
        """
        model.load()  # Checked and loaded before anything changes.
        with self._lock:
            self._generation += 1
            key = "%s#%d" % (domain, self._generation)
            self.models[key] = model
            if calibration is not None:
                self.calibrations[key] = calibration
            self.loaded.adopt(key)
            self.queues[key] = self._queue(domain, key)
            routes = collections.OrderedDict(self._routes)
            old = routes.get(domain)
            routes[domain] = key
            self._routes = routes
            self.sources[domain] = source
        if old is not None:
            self._retire(old)
        return "replaced" if old is not None else "added"

    def remove(self, domain):
        """Stops translating :obj:`domain` (the requests already started finish first)."""
        with self._lock:
            routes = collections.OrderedDict(self._routes)
            old = routes.pop(domain)
            self._routes = routes
            self.sources.pop(domain, None)
        self._retire(old)

    def _retire(self, key):
        """Closes :obj:`key`'s queue and unloads its model once no request can still use it:
        after ``--timeout_s`` (a request that started before the change has ended by then,
        answered or timed out)."""

        def retire():
            queue = self.queues.pop(key, None)
            if queue is not None:
                queue.close()
            self.loaded.forget(key)
            self.calibrations.pop(key, None)

        timer = threading.Timer(self.options.timeout_s + 1.0, retire)
        timer.daemon = True
        timer.start()

    def source_limit(self, route):
        return self.models[route].maximum_source_length

    def tokenize(self, route, text):
        return self.models[route].tokenize(text)

    def detokenize(self, route, tokens):
        return self.models[route].detokenize(tokens)

    def check_decoding(self, beam_size, num_hypotheses):
        """``(beam_size, num_hypotheses)`` of a request, defaults filled in.

        Raises:
          RequestError: on a value out of range.
        """
        beam_size = ct2_models.BEAM_SIZE if beam_size is None else beam_size
        if not 1 <= beam_size <= self.options.max_beam_size:
            raise RequestError(
                422,
                "beam_size: must be between 1 and %d, got %d"
                % (self.options.max_beam_size, beam_size),
            )
        num_hypotheses = 1 if num_hypotheses is None else num_hypotheses
        if not 1 <= num_hypotheses <= beam_size:
            raise RequestError(
                422,
                "num_hypotheses: must be between 1 and beam_size (%d), got %d"
                % (beam_size, num_hypotheses),
            )
        return beam_size, num_hypotheses

    def _run(self, domain, key, tokens):
        beam_size, num_hypotheses = key
        model = self.loaded.acquire(domain)
        try:
            return model.translate(
                tokens,
                beam_size=beam_size,
                num_hypotheses=num_hypotheses,
                max_decoding_length=self.options.max_decoding_length,
            )
        finally:
            self.loaded.release(domain)

    def submit(self, routes, tokens, beam_size, num_hypotheses):
        """Queues the sentences of one request, one job per domain.

        Returns:
          ``[(indices, job)]``: the sentences (indices into :obj:`routes`) of each job.
        """
        by_domain = {}
        for i, route in enumerate(routes):
            by_domain.setdefault(route, []).append(i)
        jobs = []
        for domain, indices in by_domain.items():
            job = batching.Job([tokens[i] for i in indices], key=(beam_size, num_hypotheses))
            self.queues[domain].put(job)
            jobs.append((indices, job))
        return jobs

    def health(self):
        """Queues and loaded models; ``"status": "degraded"`` with ``unloadable_models``
        (``{domain: why}``) when a model could no longer be loaded (a model directory
        changed on disk since the export, a file missing)."""
        health = {
            "queues": {name: self.queues[key].stats() for name, key in self._routes.items()},
            "models": self.loaded.stats(),
        }
        unloadable = self.loaded.unloadable()
        if unloadable:
            health["status"] = "degraded"
            health["unloadable_models"] = unloadable
        return health

    def close(self):
        for queue in list(self.queues.values()):  # A retired one may leave meanwhile.
            queue.close()


def load(options):
    """The backend of ``options.model_dir``: a CTranslate2 directory (its ``manifest.json``)
    or a SavedModel (its ``saved_model.pb``).

    Raises:
      UserError: if it is neither, or cannot be served.
    """
    model_dir = options.model_dir
    if not os.path.isdir(model_dir):
        raise UserError("--model_dir: %s: directory not found" % model_dir)
    if manifest_lib.is_export(model_dir):
        return CTranslate2Backend(options)
    if os.path.isfile(os.path.join(model_dir, "saved_model.pb")):
        if options.lazy or options.max_loaded_models is not None:
            raise UserError(
                "--lazy, --max_loaded_models: for an ldr-export ctranslate2 directory (one "
                "model per domain); %s is a SavedModel, one model for every domain" % model_dir
            )
        return savedmodel_backend()(options)
    raise UserError(
        "--model_dir: %s: not an export of ldr-export ctranslate2 (no %s of format %s) nor a "
        "SavedModel of ldr-main export (no saved_model.pb)"
        % (model_dir, manifest_lib.MANIFEST, manifest_lib.FORMAT)
    )


def savedmodel_backend(what="--model_dir"):
    """The SavedModel backend class, imported now (TensorFlow).

    Raises:
      UserError: where TensorFlow is not installed (the serving runtime).
    """
    try:
        # pylint: disable=import-outside-toplevel
        from ldr_opennmt.serving.savedmodel_backend import SavedModelBackend
    except ImportError as e:
        raise UserError(
            "%s: a SavedModel needs the training environment (TensorFlow is not installed "
            "here: %s); serve an ldr-export ctranslate2 directory, or run in the training "
            "environment" % (what, e)
        ) from None
    return SavedModelBackend
