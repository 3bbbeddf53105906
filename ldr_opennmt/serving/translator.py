"""Translate plain text from Python with an export directory, in three lines::

    from ldr_opennmt.serving.translator import Translator

    translator = Translator("export/ct2")
    translator.translate(["The cell is here."], domain="medical")  # ['La cellule est ici.']

The export is a directory of ``ldr-export ctranslate2`` (one CTranslate2 model per domain:
no TensorFlow needed, so this runs in the serving runtime ``.venv-serve``), or a SavedModel
of ``ldr-main export`` (in the training environment). Text goes through the export's own
tokenizers (``assets.extra/``) both ways, and each sentence to its domain's model: the same
code as ``ldr-serve`` (:class:`~ldr_opennmt.serving.ct2_models.DomainModel`: tokenization,
CTranslate2 call, detokenization, the manifest's sha256 check at load) and ``ldr-translate``
(the same batching by length, :func:`~ldr_opennmt.serving.textio.translate`).
"""

from ldr_opennmt import domains as domains_lib
from ldr_opennmt.errors import UserError
from ldr_opennmt.serving import ct2_models, labels
from ldr_opennmt.serving import manifest as manifest_lib
from ldr_opennmt.serving import textio, tokenization


class Translator:
    """Translates plain text with an export directory.

    Args:
      export_dir: An ``ldr-export ctranslate2`` directory, or a SavedModel export.
      device: CTranslate2's device (``cpu``, ``cuda``, ``auto``).
      compute_type: CTranslate2's compute type (``default``, ``int8``, ``float16``, ...).
      beam_size: The beam (default 1: greedy, as ``ldr-serve`` and ``ldr-translate``).
        A SavedModel decodes with its exported beam.
      max_decoding_length: Most target tokens per translation.
      inter_threads: CTranslate2 batches run at once per model.
      intra_threads: CTranslate2 threads per batch (0: its default).
      max_loaded_models: Most CTranslate2 models loaded at once (``None``: no cap); models
        are loaded on first use.
      tokenized: Text is already tokenized (tokens separated by spaces) and so are the
        translations: no tokenizer is used.

    Raises:
      UserError: if the directory is not an export, or has no source tokenizer for raw text.
    """

    def __init__(
        self,
        export_dir,
        device="cpu",
        compute_type="default",
        beam_size=ct2_models.BEAM_SIZE,
        max_decoding_length=ct2_models.MAX_DECODING_LENGTH,
        inter_threads=1,
        intra_threads=0,
        max_loaded_models=None,
        tokenized=False,
    ):
        self.export_dir = export_dir
        self.beam_size = beam_size
        self.max_decoding_length = max_decoding_length
        self._saved_model = None
        if not manifest_lib.is_export(export_dir):
            self._open_saved_model(export_dir, tokenized)
            return
        export = ct2_models.Export(export_dir, where=export_dir)
        self.declared, self.ignored = export.declared, export.ignored
        self.models = export.models(
            tokenized=tokenized,
            device=device,
            inter_threads=inter_threads,
            intra_threads=intra_threads,
            load=False,
            compute_type=compute_type,
        )
        self.loaded = ct2_models.LoadedModels(self.models, max_loaded_models)

    def _open_saved_model(self, export_dir, tokenized):
        try:
            from ldr_opennmt.serving import (  # pylint: disable=import-outside-toplevel
                savedmodel_translate,
            )
        except ImportError as e:
            raise UserError(
                "%s: not an ldr-export ctranslate2 directory, and a SavedModel needs the "
                "training environment (TensorFlow is not installed here: %s)" % (export_dir, e)
            ) from None
        from ldr_opennmt import assets as assets_lib  # pylint: disable=import-outside-toplevel

        savedmodel_translate._check_export(export_dir)  # pylint: disable=protected-access
        info = labels.read_inference_info(export_dir)
        _, self.declared = assets_lib.read_domains(export_dir)
        self.ignored, _ = labels.label_reasons(
            self.declared, info, "domain" in savedmodel_translate.serving_inputs(export_dir)
        )
        self._tokenizers = tokenization.load_tokenizers(export_dir, tokenized)
        self._saved_model = savedmodel_translate.SignatureRunner(export_dir)
        self.models = None

    @property
    def domains(self):
        """The labels this export translates with (``generic`` included)."""
        if self.models is not None:
            return list(self.models)
        return list(self.declared or []) + [domains_lib.GENERIC]

    def _route(self, label, where):
        if self.ignored is not None:
            return domains_lib.GENERIC
        domains_lib.label_id(label, self.declared, where)
        if self.models is not None and label not in self.models:
            raise UserError(
                "%s: domain %r has no model in %s (exported: %s)"
                % (where, label, self.export_dir, ", ".join(self.models))
            )
        return label

    def translate(self, texts, domain=domains_lib.GENERIC, domains=None, batch_size=32):
        """Translates sentences of plain text.

        Args:
          texts: The sentences (strings); an empty or blank one is translated as ``""``.
          domain: The domain of every sentence (a declared name or ``generic``).
          domains: One domain per sentence instead of :obj:`domain`.
          batch_size: Sentences per CTranslate2 call (sorted by length).

        Returns:
          The translations, as strings, in order.

        Raises:
          UserError: on an unknown domain (naming it), or a model that cannot be loaded
            (its files changed since the export).
        """
        if isinstance(texts, (str, bytes)) or isinstance(domains, str):
            raise TypeError("texts must be a list of strings, domains a list of labels")
        texts = list(texts)
        if domains is None:
            routes = [self._route(domain, "domain")] * len(texts)
        else:
            if len(domains) != len(texts):
                raise UserError("domains: %d labels for %d sentences" % (len(domains), len(texts)))
            routes = [self._route(d, "domains[%d]" % i) for i, d in enumerate(domains)]
        if self._saved_model is not None:
            return self._translate_saved_model(texts, routes, batch_size)
        outputs = [""] * len(texts)
        for name in dict.fromkeys(routes):
            indices = [i for i, r in enumerate(routes) if r == name and texts[i].strip()]
            if not indices:
                continue
            model = self.loaded.acquire(name)
            try:
                results = textio.translate(
                    lambda tokens, _, model=model: [
                        hypotheses[0]
                        for hypotheses, _ in model.translate(
                            tokens,
                            beam_size=self.beam_size,
                            max_decoding_length=self.max_decoding_length,
                        )
                    ],
                    [model.tokenize(texts[i]) for i in indices],
                    [name] * len(indices),
                    batch_size,
                )
            finally:
                self.loaded.release(name)
            for i, tokens in zip(indices, results):
                outputs[i] = model.detokenize(tokens)
        return outputs

    def _translate_saved_model(self, texts, routes, batch_size):
        source, target = self._tokenizers
        sentences = [tokenization.tokenize(source, t) if t.strip() else [] for t in texts]
        results = textio.translate(self._saved_model, sentences, routes, batch_size)
        return [tokenization.detokenize(target, tokens) if tokens else "" for tokens in results]
