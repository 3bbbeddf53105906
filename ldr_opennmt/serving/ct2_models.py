"""The CTranslate2 models of an ``ldr-export ctranslate2`` directory, as translators use them.

The one way ``ldr-serve`` (:mod:`ldr_opennmt.serving.backends`), ``ldr-translate``
(:mod:`ldr_opennmt.serving.ct2_client`) and :class:`ldr_opennmt.serving.translator.Translator`
open an export: :class:`Export` (the directory read and checked, :func:`open_export`; what its
labels mean, :func:`label_reasons`; its models, :meth:`Export.models`), then
each domain's model with its tokenizers (:class:`DomainModel`, loaded at once or on first
use, its files checked against the manifest's sha256 at every load) and a cap on the models
loaded at once (:class:`LoadedModels`, least recently used first out).

No TensorFlow: this module runs in the serving runtime (``.venv-serve``, CTranslate2 4).
"""

import collections
import functools
import os
import threading

import ctranslate2

from ldr_opennmt import assets as assets_lib
from ldr_opennmt import domains as domains_lib
from ldr_opennmt.errors import UserError
from ldr_opennmt.serving import labels
from ldr_opennmt.serving import manifest as manifest_lib
from ldr_opennmt.serving import quality as quality_lib
from ldr_opennmt.serving import tokenization

#: Why a CTranslate2 directory translates no ensemble label.
ENSEMBLE_REFUSAL = (
    "a CTranslate2 export holds one model per domain and mixes no domain views (translate "
    "ensembles with the SavedModel of ldr-main export)"
)
#: Default decoding options, the same for ``ldr-serve`` and ``ldr-translate``.
MAX_DECODING_LENGTH = 256
BEAM_SIZE = 1


def open_export(model_dir, where="--model_dir"):
    """Reads an ``ldr-export ctranslate2`` directory, its manifest checked by
    :func:`ldr_opennmt.serving.manifest.read_manifest`.

    Args:
      model_dir: The directory.
      where: How messages name it.

    Returns:
      ``(manifest, {domain: model directory})``, in the manifest's order.

    Raises:
      UserError: if it is not such a directory, its manifest is invalid, of a version this
        package does not read, without hashes or with a model directory outside the export,
        or a domain's model directory has no model.
    """
    if not os.path.isdir(model_dir):
        raise UserError("%s: %s: directory not found" % (where, model_dir))
    if not manifest_lib.is_export(model_dir):
        raise UserError(
            "%s: %s: not an export of ldr-export ctranslate2 (no %s of format %s)"
            % (where, model_dir, manifest_lib.MANIFEST, manifest_lib.FORMAT)
        )
    manifest = manifest_lib.read_manifest(model_dir)
    paths = collections.OrderedDict()
    for domain in manifest["domains"]:
        path = manifest_lib.model_directory(model_dir, manifest, domain)
        if not os.path.isfile(os.path.join(path, "model.bin")):
            raise UserError(
                "%s: no CTranslate2 model (model.bin) for domain %r of %s"
                % (path, domain, manifest_lib.MANIFEST)
            )
        paths[domain] = path
    return manifest, paths


class Export:
    """An ``ldr-export ctranslate2`` directory, opened (:func:`open_export`).

    Attributes:
      dir: The directory.
      manifest: Its manifest.
      paths: ``{domain: model directory}``, in the manifest's order.
      declared: The domains the model declares (:func:`declared_domains`).
      ignored: Why its labels are ignored, or ``None`` (:func:`label_reasons`).
      ensemble_refusal: Why it translates no ensemble label.
    """

    def __init__(self, export_dir, where="--model_dir"):
        self.dir = export_dir
        self.manifest, self.paths = open_export(export_dir, where=where)
        self.declared = declared_domains(self.manifest)
        self.ignored, self.ensemble_refusal = label_reasons(self.manifest)
        #: ``(guard, confidence, summary)`` of its ``quality.json``
        #: (:func:`ldr_opennmt.serving.quality.read_quality`), read and checked once.
        self.quality = quality_lib.read_quality(export_dir, self.manifest)

    def calibration(self, domain):
        """The calibrated confidence of :obj:`domain`'s model
        (:class:`~ldr_opennmt.serving.confidence.DomainConfidence`), or ``None``."""
        confidence = self.quality[1]
        return None if confidence is None else confidence.domains.get(domain)

    def models(self, domains=None, tokenized=False, tokenizer_required=True, **options):
        """``{domain: DomainModel}`` of :obj:`domains` (default: every exported one), each
        checked against the manifest's sha256 at load (:func:`checks`).

        Args:
          domains: The domains to open, exported ones.
          tokenized: Text is already tokenized: no tokenizer is used.
          tokenizer_required: For raw text, every model must have its source tokenizer
            (``ldr-serve`` splits on spaces instead, with a warning).
          **options: :class:`DomainModel`'s (``device``, ``inter_threads``, ``load``, ...).

        Raises:
          UserError: for raw text and a model without a source tokenizer.
        """
        verified = checks(self.dir, self.manifest)
        models = {
            domain: DomainModel(
                domain, self.paths[domain], tokenized=tokenized, check=verified[domain], **options
            )
            for domain in (self.paths if domains is None else domains)
        }
        if tokenizer_required and not tokenized:
            for domain, model in models.items():
                if model.source_tokenizer is None:
                    raise tokenization.missing_source_tokenizer(model.path, "the %s model" % domain)
        return models


def checks(model_dir, manifest):
    """``{domain: check}``: each checks that domain's model files against the manifest's
    sha256 (:func:`ldr_opennmt.serving.manifest.verify_model`), for :class:`DomainModel`."""
    return {
        domain: functools.partial(manifest_lib.verify_model, model_dir, manifest, domain)
        for domain in manifest["domains"]
    }


def declared_domains(manifest):
    """The domains the exported model declares (``None``: it declares none)."""
    return list(manifest.get("declared_domains") or []) or None


def label_reasons(manifest):
    """``(ignored, ensemble_refusal)`` of a CTranslate2 directory, as
    :func:`ldr_opennmt.serving.labels.label_reasons` gives them for a SavedModel: labels
    are ignored when the model has no domain-specific parameters (every directory is the
    same model); ensembles are always refused (:data:`ENSEMBLE_REFUSAL`)."""
    ignored = None
    if manifest.get("domain_specific") is False:
        ignored = (
            "%s has no domain-specific parameters (%s: domain_specific false): every domain "
            "label gives the same translation" % (manifest.get("model"), manifest_lib.MANIFEST)
        )
    return ignored, ENSEMBLE_REFUSAL


class DomainModel:
    """One domain's CTranslate2 model and tokenizers.

    The tokenizers are loaded at once (their assets are checked); the CTranslate2 model at
    once, or with ``load=False`` on first use (:meth:`load`), and it may be unloaded
    (:meth:`unload`) to free its memory. Each load first runs :obj:`check` (the manifest's
    sha256 of the model's files, :func:`checks`): a model directory replaced on disk is
    refused, never served as this domain. :meth:`status` says whether the model could be
    loaded now.
    """

    def __init__(
        self,
        name,
        path,
        device="cpu",
        inter_threads=1,
        intra_threads=1,
        load=True,
        tokenized=False,
        check=None,
        compute_type="default",
    ):
        self.name = name
        self.path = path
        self.device = device
        self.inter_threads = inter_threads
        self.intra_threads = intra_threads
        self.compute_type = compute_type
        self.check = check
        self.source_tokenizer = None if tokenized else assets_lib.load_tokenizer(path, "source")
        self.target_tokenizer = None if tokenized else assets_lib.load_tokenizer(path, "target")
        # An export of the package's own SavedModel assets may say how many source tokens
        # the model takes (CTranslate2 exports have none today: then the caller's limit).
        self.maximum_source_length = labels.read_inference_info(path).get(
            labels.MAXIMUM_SOURCE_LENGTH
        )
        self.translator = None
        self.loads = 0
        self.error = None  # Why the last check or load failed.
        self._checked = None  # The files' stat signature when last checked.
        self._lock = threading.Lock()
        if load:
            self.load()

    @property
    def loaded(self):
        return self.translator is not None

    def load(self):
        """Loads the CTranslate2 model if it is not loaded.

        Raises:
          UserError: if CTranslate2 cannot load it.
        """
        with self._lock:
            if self.translator is not None:
                return
            try:
                self._verify()
                try:
                    self.translator = ctranslate2.Translator(
                        self.path,
                        device=self.device,
                        inter_threads=self.inter_threads,
                        intra_threads=self.intra_threads,
                        compute_type=self.compute_type,
                    )
                except (RuntimeError, ValueError, OSError) as e:
                    raise UserError(
                        "%s: cannot load the CTranslate2 model (%s)" % (self.path, _one_line(e))
                    ) from None
            except UserError as e:
                self.error = str(e)
                raise
            self.error = None
            self.loads += 1

    def _signature(self):
        """The stat (size, mtime, inode) of the model's files: a cheap test of a change."""
        signature = []
        for directory, _, files in os.walk(self.path):
            for name in sorted(files):
                try:
                    info = os.stat(os.path.join(directory, name))
                except OSError:
                    continue
                signature.append((name, info.st_size, info.st_mtime_ns, info.st_ino))
        return tuple(sorted(signature))

    def _verify(self):
        signature = self._signature()
        if self.check is not None:
            self.check()
        self._checked = signature

    def status(self):
        """``None`` if the model can be loaded now, else why not (one line). The files are
        hashed again only when their size, time or inode changed since the last check."""
        with self._lock:
            if self._checked is None or self._signature() != self._checked:
                try:
                    self._verify()
                    self.error = None
                except UserError as e:
                    self.error = str(e)
                    self._checked = None
            return self.error

    def unload(self):
        """Frees the CTranslate2 model (loaded again by :meth:`load`)."""
        with self._lock:
            self.translator = None

    def tokenize(self, text):
        return tokenization.tokenize(self.source_tokenizer, text)

    def detokenize(self, tokens):
        return tokenization.detokenize(self.target_tokenizer, tokens)

    def translate(self, tokens, beam_size=BEAM_SIZE, num_hypotheses=1, max_decoding_length=None):
        """Translates token lists (the model must be loaded).

        Returns:
          One ``(hypotheses, scores)`` per sentence: token lists, best first, and their
          CTranslate2 scores.
        """
        results = self.translator.translate_batch(
            tokens,
            beam_size=beam_size,
            num_hypotheses=num_hypotheses,
            max_decoding_length=max_decoding_length or MAX_DECODING_LENGTH,
            max_input_length=0,  # Never cut: the callers check or cut the lengths.
            return_scores=True,
        )
        return [
            (list(result.hypotheses), [float(score) for score in result.scores])
            for result in results
        ]


class LoadedModels:
    """Loads :class:`DomainModel` objects on use, at most :obj:`limit` at once.

    :meth:`use` loads a domain's model if needed; when :obj:`limit` models are loaded, the
    least recently used one that no thread is using is unloaded first (a thread waits while
    every loaded model is in use). ``limit=None``: no cap.
    """

    def __init__(self, models, limit=None):
        self.models = models
        self.limit = limit
        self.slots = collections.OrderedDict()  # Loaded (or loading) models, LRU first.
        self.in_use = collections.Counter()
        self.evictions = 0
        self.condition = threading.Condition()
        for name, model in models.items():
            if model.loaded:
                self.slots[name] = True

    def acquire(self, name):
        """The loaded model of :obj:`name`, held until :meth:`release`."""
        model = self.models[name]
        with self.condition:
            while name not in self.slots:
                if self.limit is None or len(self.slots) < self.limit:
                    self.slots[name] = True
                    break
                victim = next((n for n in self.slots if not self.in_use[n]), None)
                if victim is not None:
                    # Unloaded under the lock: nobody holds it, so nobody is loading it.
                    del self.slots[victim]
                    self.models[victim].unload()
                    self.evictions += 1
                    self.slots[name] = True
                    break
                self.condition.wait()
            self.slots.move_to_end(name)
            self.in_use[name] += 1
        try:
            model.load()
        except BaseException:
            with self.condition:  # Its slot goes to the next model.
                self.in_use[name] -= 1
                if not self.in_use[name] and not model.loaded:
                    self.slots.pop(name, None)
                self.condition.notify_all()
            raise
        return model

    def release(self, name):
        with self.condition:
            self.in_use[name] -= 1
            self.condition.notify_all()

    def adopt(self, name):
        """Counts :obj:`name`'s model, loaded by its caller, among the loaded ones (past the
        cap, the next :meth:`acquire` unloads the least recently used)."""
        with self.condition:
            if self.models[name].loaded:
                self.slots[name] = True
                self.slots.move_to_end(name)

    def forget(self, name):
        """Unloads :obj:`name`'s model and forgets it, once no thread uses it."""
        with self.condition:
            while self.in_use[name]:
                self.condition.wait()
            self.slots.pop(name, None)
            model = self.models.pop(name, None)
            self.in_use.pop(name, None)
            self.condition.notify_all()
        if model is not None:
            model.unload()

    def stats(self):
        with self.condition:
            return {
                "loaded_models": [n for n in self.slots if self.models[n].loaded],
                "max_loaded_models": self.limit,
                "loads": sum(model.loads for model in self.models.values()),
                "unloads": self.evictions,
            }

    def unloadable(self):
        """``{name: why}`` of the models that could not be loaded now
        (:meth:`DomainModel.status`)."""
        found = {}
        for name, model in self.models.items():
            status = getattr(model, "status", None)  # Test doubles may have none.
            error = status() if status is not None else None
            if error is not None:
                found[name] = error
        return found


def _one_line(error):
    lines = [line for line in str(error).splitlines() if line.strip()]
    return lines[-1] if lines else type(error).__name__


def generic_required(model_dir, models):
    """Raises :class:`UserError` if :obj:`models` has no ``generic`` model."""
    if domains_lib.GENERIC not in models:
        raise UserError(
            "--model_dir: %s has no %s model: sentences without a domain need one "
            "(export it with ldr-export ctranslate2 --domains ... generic)"
            % (model_dir, domains_lib.GENERIC)
        )
