"""``ldr-serve``'s backend for a SavedModel of ``ldr-main export`` (or ``onmt-main export``):
one model that takes a domain per sentence, one queue with one worker (calls into a loaded
TensorFlow model are serialised, :mod:`ldr_opennmt.serving.savedmodel_translate`), so a batch may
mix domains; plain labels and ensemble labels go into separate batches.

It needs TensorFlow, so :mod:`ldr_opennmt.serving.backends` imports it only for a SavedModel
(the serving runtime without TensorFlow serves CTranslate2 exports).
"""

import os

import tensorflow as tf

from ldr_opennmt import assets as assets_lib
from ldr_opennmt import domains as domains_lib
from ldr_opennmt import ensembles
from ldr_opennmt.errors import UserError
from ldr_opennmt.serving import batching, labels, savedmodel_translate, tokenization
from ldr_opennmt.serving.backend_kinds import SAVED_MODEL, RequestError


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
        info = labels.read_inference_info(export_dir)
        _, self.declared = assets_lib.read_domains(export_dir)
        takes_domain = "domain" in savedmodel_translate.serving_inputs(export_dir)
        self.ignored, self.ensemble_refusal = labels.label_reasons(
            self.declared, info, takes_domain
        )
        self.source_tokenizer = assets_lib.load_tokenizer(export_dir, "source")
        self.target_tokenizer = assets_lib.load_tokenizer(export_dir, "target")
        self.translator = savedmodel_translate.SignatureRunner(export_dir)
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

    def route(self, domain):
        """What :obj:`domain` translates with: the one model (a label per sentence)."""
        return domain

    def source_limit(self, route):
        return self.maximum_source_length

    def tokenize(self, route, text):
        return tokenization.tokenize(self.source_tokenizer, text)

    def detokenize(self, route, tokens):
        return tokenization.detokenize(self.target_tokenizer, tokens)

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
