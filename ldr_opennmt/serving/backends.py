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

import functools
import os
import sys

from ldr_opennmt import domains as domains_lib
from ldr_opennmt.errors import UserError
from ldr_opennmt.serving import batching, ct2_models
from ldr_opennmt.serving import manifest as manifest_lib
from ldr_opennmt.serving.backend_kinds import CTRANSLATE2, RequestError

#: The line ``ldr-serve`` prints at start for an export without tokenizers.
NO_TOKENIZER = (
    "ldr-serve: warning: %s: the export has no tokenizer (exported from a corpus without "
    "one): sentences are split on spaces and translations are tokens joined by spaces"
)


class CTranslate2Backend:
    """The CTranslate2 models of an ``ldr-export ctranslate2`` directory.

    Args:
      options: The server's :class:`~ldr_opennmt.serving.server.Options`.
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
        else:
            manifest = {"declared_domains": [d for d in models if d != domains_lib.GENERIC]}
        self.models = models
        self.declared = ct2_models.declared_domains(manifest)
        self.ignored, self.ensemble_refusal = ct2_models.label_reasons(manifest)
        self.learned_refusal = None
        self.loaded = ct2_models.LoadedModels(models, options.max_loaded_models)
        self.queues = {
            name: batching.BatchQueue(
                name,
                functools.partial(self._run, name),
                options.max_batch_size,
                options.max_wait_ms,
                threads=options.inter_threads,
            )
            for name in models
        }

    @property
    def labels(self):
        """The domain labels this backend translates with (``generic`` included)."""
        return list(self.models)

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
            "queues": {name: queue.stats() for name, queue in self.queues.items()},
            "models": self.loaded.stats(),
        }
        unloadable = self.loaded.unloadable()
        if unloadable:
            health["status"] = "degraded"
            health["unloadable_models"] = unloadable
        return health

    def close(self):
        for queue in self.queues.values():
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
