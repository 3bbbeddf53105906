"""What ``ldr-serve`` translates with: the CTranslate2 models of an ``ldr-export ctranslate2``
directory (:class:`CTranslate2Backend`), or a SavedModel of ``ldr-main export``
(:class:`SavedModelBackend`), behind one interface.

A backend says which labels it takes (:attr:`labels`, :attr:`declared`), whether it reads
them (:attr:`ignored`) and translates ensembles (:attr:`ensemble_refusal`), tokenizes,
checks decoding options, and queues jobs (:meth:`submit`): each of its batches is one call
into its model (:mod:`ldr_opennmt.serving.batching`).

* CTranslate2: one model per domain, one queue per domain with ``--inter_threads`` workers;
  a batch is one ``translate_batch`` call of that domain's model, its jobs share the beam
  size and number of hypotheses. With ``--lazy`` a model is loaded on its first use, and
  ``--max_loaded_models`` caps the models loaded at once (the least recently used is
  unloaded first, :class:`~ldr_opennmt.serving.ct2_models.LoadedModels`).
* SavedModel: one model that takes a domain per sentence, one queue with one worker (calls
  into a loaded TensorFlow model are serialised, :mod:`ldr_opennmt.serving.client`), so a
  batch may mix domains; plain labels and ensemble labels go into separate batches (a batch
  with an ensemble label runs every domain view). Its beam and number of hypotheses are
  those of the export.
"""

import functools
import os

import tensorflow as tf

from ldr_opennmt import assets as assets_lib
from ldr_opennmt import domains as domains_lib
from ldr_opennmt import ensembles
from ldr_opennmt.errors import UserError
from ldr_opennmt.serving import batching, client, ct2_export, ct2_models

CTRANSLATE2 = "ctranslate2"
SAVED_MODEL = "savedmodel"


class RequestError(Exception):
    """A refused request: an HTTP status and a one-line message."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status = status


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
            manifest, paths = ct2_models.open_export(options.model_dir)
            ct2_models.generic_required(options.model_dir, paths)
            models = {
                domain: ct2_models.DomainModel(
                    domain,
                    path,
                    device=options.device,
                    inter_threads=options.inter_threads,
                    intra_threads=options.intra_threads,
                    load=not options.lazy,
                )
                for domain, path in paths.items()
            }
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
        return {
            "queues": {name: queue.stats() for name, queue in self.queues.items()},
            "models": self.loaded.stats(),
        }

    def close(self):
        for queue in self.queues.values():
            queue.close()


class SavedModelBackend:
    """A SavedModel of ``ldr-main export`` (or ``onmt-main export``) with the package's
    assets (``assets.extra/``: tokenizers, ``domains.txt``, ``inference.json``)."""

    kind = SAVED_MODEL

    def __init__(self, options):
        self.options = options
        export_dir = options.model_dir
        if not os.path.isfile(os.path.join(assets_lib.assets_dir(export_dir), assets_lib.DOMAINS)):
            raise UserError(
                "--model_dir: %s: incomplete export (no %s/%s: interrupted, or made by an older "
                "version): export the model again"
                % (export_dir, assets_lib.ASSETS_EXTRA, assets_lib.DOMAINS)
            )
        info = client.read_inference_info(export_dir)
        _, self.declared = assets_lib.read_domains(export_dir)
        takes_domain = "domain" in client.serving_inputs(export_dir)
        self.ignored, self.ensemble_refusal = client.label_reasons(
            self.declared, info, takes_domain
        )
        self.source_tokenizer = assets_lib.load_tokenizer(export_dir, "source")
        self.target_tokenizer = assets_lib.load_tokenizer(export_dir, "target")
        self.translator = client.Translator(export_dir)
        self.maximum_source_length = self.translator.maximum_source_length
        # The first call builds the graph's kernels: made here, not by the first request.
        self.translator.translate_batch([["."]], [domains_lib.GENERIC])
        self.num_hypotheses = self.translator.num_hypotheses or len(
            self.translator.translate_batch([["."]], [domains_lib.GENERIC])[0][0]
        )
        self.learned_refusal = None
        if self.ensemble_refusal is None:
            # ens-learned needs weights fitted for the model (ldr-eval fit-ensemble); the
            # graph refuses the label without them: asked once here, so that no batch fails.
            try:
                self.translator.translate_batch([["."]], [ensembles.ENS_LEARNED])
            except tf.errors.InvalidArgumentError:
                self.learned_refusal = (
                    "the export has no ens-learned weights (fit them with ldr-eval "
                    "fit-ensemble, then export the model again)"
                )
        self.queue = batching.BatchQueue(
            SAVED_MODEL, self._run, options.max_batch_size, options.max_wait_ms, threads=1
        )

    @property
    def labels(self):
        """The domain labels this backend takes (``generic`` included; a model that
        declares no domains takes any label, and ignores it)."""
        return list(self.declared or []) + [domains_lib.GENERIC]

    def source_limit(self, route):
        return self.maximum_source_length

    def tokenize(self, route, text):
        return client._tokenize(self.source_tokenizer, text)

    def detokenize(self, route, tokens):
        return client._detokenize(self.target_tokenizer, tokens)

    def check_decoding(self, beam_size, num_hypotheses):
        """``(None, num_hypotheses)``: the export decodes with its own beam.

        Raises:
          RequestError: if :obj:`beam_size` is given, or more hypotheses are asked for than
            the export gives.
        """
        if beam_size is not None:
            raise RequestError(
                422,
                "beam_size: this server's SavedModel decodes with the beam of its export "
                "(params: beam_width): leave beam_size out",
            )
        num_hypotheses = 1 if num_hypotheses is None else num_hypotheses
        if not 1 <= num_hypotheses <= self.num_hypotheses:
            raise RequestError(
                422,
                "num_hypotheses: must be between 1 and %d (the export's params: num_hypotheses), "
                "got %d" % (self.num_hypotheses, num_hypotheses),
            )
        return None, num_hypotheses

    def _run(self, key, items):
        tokens = [sentence for sentence, _ in items]
        labels = [label for _, label in items]
        return self.translator.translate_batch(tokens, labels)

    def submit(self, routes, tokens, beam_size, num_hypotheses):
        """Queues the sentences of one request: one job of plain labels, one of ensemble
        labels (each may mix domains).

        Returns:
          ``[(indices, job)]``: the sentences (indices into :obj:`routes`) of each job.
        """
        groups = {}
        for i, route in enumerate(routes):
            groups.setdefault(ensembles.is_ensemble_label(route), []).append(i)
        jobs = []
        for ensemble, indices in groups.items():
            job = batching.Job([(tokens[i], routes[i]) for i in indices], key=ensemble)
            self.queue.put(job)
            jobs.append((indices, job))
        return jobs

    def health(self):
        return {"queues": {SAVED_MODEL: self.queue.stats()}}

    def close(self):
        self.queue.close()


def load(options):
    """The backend of ``options.model_dir``: a CTranslate2 directory (its ``manifest.json``)
    or a SavedModel (its ``saved_model.pb``).

    Raises:
      UserError: if it is neither, or cannot be served.
    """
    model_dir = options.model_dir
    if not os.path.isdir(model_dir):
        raise UserError("--model_dir: %s: directory not found" % model_dir)
    if ct2_export.is_export(model_dir):
        return CTranslate2Backend(options)
    if os.path.isfile(os.path.join(model_dir, "saved_model.pb")):
        if options.lazy or options.max_loaded_models is not None:
            raise UserError(
                "--lazy, --max_loaded_models: for an ldr-export ctranslate2 directory (one "
                "model per domain); %s is a SavedModel, one model for every domain" % model_dir
            )
        return SavedModelBackend(options)
    raise UserError(
        "--model_dir: %s: not an export of ldr-export ctranslate2 (no %s of format %s) nor a "
        "SavedModel of ldr-main export (no saved_model.pb)"
        % (model_dir, ct2_export.MANIFEST, ct2_export.FORMAT)
    )
