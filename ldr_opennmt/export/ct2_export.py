"""CTranslate2 models of a multi-domain Transformer: one folded model per domain.

CTranslate2 has no domain input, so each domain gets its own model directory,
converted by CTranslate2's OpenNMT-tf converter from the plain Transformer that
:mod:`ldr_opennmt.export.folding` builds for that domain::

    OUT/
      manifest.json      which directory is which domain, the checkpoint (name, step,
                         sha256), each model's file hashes, vocabularies, quantization
      medical/           a CTranslate2 model (model.bin, config.json, vocabularies,
                         assets.extra/ with the tokenizers)
      religious/
      software/
      generic/           the generic region alone (LDR) / a zero domain vector (DC)

Each directory is a complete CTranslate2 model: ``ctranslate2.Translator(OUT/medical)``
translates medical text. Directories of a model without domain-specific
parameters (Mixed) are identical. The output is built in a temporary directory
next to ``OUT`` and renamed at the end: a directory named ``OUT`` is always complete.

Every path in the manifest is relative to ``OUT`` (or a basename): the directory can be
copied to a machine with the serving runtime only (:mod:`ldr_opennmt.serving.manifest` reads
it there). Each model carries the tokenizers of the model's configuration
(``source_tokenization``), or else those of the corpus its vocabularies come from
(``ldr-data``'s ``tokenizer.LANG.yml`` and BPE model beside ``vocab.LANG``), so that it
translates raw text; an export without them is said in one line.

The manifest records the language pair (``source_language``, ``target_language``: what
``ldr-serve``'s ``GET /languages`` lists and ``POST /detect`` answers) where the corpus knows
it (:func:`corpus_languages`): the vocabularies of a corpus built by ``ldr-data`` are
``vocab.SRC`` and ``vocab.TGT`` beside its ``corpus.json``.
"""

import filecmp
import glob
import hashlib
import json
import os
import re
import shutil
import sys
import tempfile

import ctranslate2
from ctranslate2.specs.model_spec import ACCEPTED_MODEL_TYPES

from ldr_opennmt import assets as assets_lib
from ldr_opennmt.data import terms
from ldr_opennmt.errors import UserError
from ldr_opennmt.export import folding
from ldr_opennmt.serving.manifest import (  # noqa: F401 (this module's names, kept)
    FORMAT,
    MANIFEST,
    SHA256,
    VERSION,
    directory_sha256,
    file_sha256,
    is_export,
    read_manifest,
)
from ldr_opennmt.utils import atomic_directory

QUANTIZATIONS = ACCEPTED_MODEL_TYPES


def check_quantization(quantization):
    """Checks a CTranslate2 weight type (``None`` keeps the trained float32 weights).

    Raises:
      ValueError: if CTranslate2 does not accept it.
    """
    if quantization is not None and quantization not in QUANTIZATIONS:
        raise ValueError(
            "invalid quantization %r (CTranslate2 accepts: %s)"
            % (quantization, ", ".join(QUANTIZATIONS))
        )


def check_directory_name(domain):
    """Checks that a domain name can be a directory name.

    Raises:
      UserError: if it cannot.
    """
    if domain in (".", "..", MANIFEST) or any(c in domain for c in "/\\\0"):
        raise UserError("domain %r cannot name a CTranslate2 model directory" % domain)


def checkpoint_info(checkpoint_path):
    """What the manifest records of the checkpoint exported: its basename, its training step
    (from the name OpenNMT-tf gives it, ``ckpt-STEP``) and the sha256 of its files.

    Computed before the checkpoint is restored: a training that writes and deletes
    checkpoints meanwhile cannot make the record name another one.

    Returns:
      ``{"name": "ckpt-200", "step": 200, "sha256": ...}``, or ``None`` without a path.

    Raises:
      UserError: if none of the checkpoint's files is there.
    """
    if not checkpoint_path:
        return None
    files = sorted(
        glob.glob(glob.escape(checkpoint_path) + ".index")
        + glob.glob(glob.escape(checkpoint_path) + ".data-*")
    )
    if not files:
        raise UserError("%s: checkpoint not found (no .index file)" % checkpoint_path)
    digest = hashlib.sha256()
    for path in files:
        digest.update(("%s %s\n" % (os.path.basename(path), file_sha256(path))).encode("utf-8"))
    name = os.path.basename(checkpoint_path)
    match = re.search(r"-(\d+)$", name)
    return {
        "name": name,
        "step": int(match.group(1)) if match else None,
        "sha256": digest.hexdigest(),
    }


def describe_checkpoint(info, checkpoint_path):
    """The line printed about the checkpoint exported (path and step)."""
    step = info.get("step") if info else None
    return "exporting checkpoint %s (step %s)" % (
        checkpoint_path,
        "unknown" if step is None else step,
    )


#: A language code as a file suffix: ISO 639-1, with a region or script (``pt-BR``,
#: ``zh_Hans``). Longer codes are taken from a ``corpus.json`` only.
_LANGUAGE_SUFFIX = re.compile(r"^[a-z]{2}(?:[-_][A-Za-z0-9]{2,4})?\Z")
#: The file ``ldr-data`` writes beside a corpus's vocabularies.
CORPUS_INFO = "corpus.json"


def _corpus_info(directory):
    """The languages of the ``corpus.json`` in :obj:`directory`, or ``None``."""
    try:
        with open(os.path.join(directory, CORPUS_INFO), encoding="utf-8") as f:
            info = json.load(f)
    except (OSError, ValueError):
        return None
    if not isinstance(info, dict):
        return None
    languages = info.get("source_lang"), info.get("target_lang")
    if not all(isinstance(lang, str) and lang for lang in languages):
        return None
    return languages


def corpus_languages(vocabularies):
    """The language pair of a model's corpus, from its vocabularies' names.

    ``ldr-data`` writes ``vocab.SRC`` and ``vocab.TGT`` beside the corpus's ``corpus.json``
    (``source_lang``, ``target_lang``). The pair is the vocabularies' suffixes (source first:
    a model trained in the other direction on the same corpus gets its own direction) when
    ``corpus.json`` names those two languages, or, without a ``corpus.json``, when both are
    two-letter codes (``vocab.en``, ``vocab.pt-BR``; not ``vocab.src``).

    Args:
      vocabularies: ``{"source": path, "target": path}``.

    Returns:
      ``(source, target)``, or ``(None, None)`` when the corpus does not say.
    """
    paths = [vocabularies.get(side) for side in ("source", "target")]
    suffixes = []
    for path in paths:
        name = os.path.basename(path) if isinstance(path, str) and "://" not in path else ""
        if not name.startswith("vocab.") or name == "vocab.":
            return None, None
        suffixes.append(name[len("vocab.") :])
    if suffixes[0] == suffixes[1]:
        return None, None
    for path in paths:
        recorded = _corpus_info(os.path.dirname(os.path.abspath(path)))
        if recorded is not None:
            if set(recorded) == set(suffixes):
                return tuple(suffixes)
            return None, None  # A corpus of other languages: the names say nothing.
    if all(_LANGUAGE_SUFFIX.match(suffix) for suffix in suffixes):
        return tuple(suffixes)
    return None, None


def make_manifest(model, domains, quantization, checkpoint=None):
    """The manifest of an export (a JSON-serializable dict; paths relative to the export).

    Args:
      model: The multi-domain model.
      domains: The exported domain names (each is its directory's name).
      quantization: The CTranslate2 weight type, or ``None``.
      checkpoint: The checkpoint the weights come from (:func:`checkpoint_info`), if known.
    """
    source = folding.source_embedder(model)
    target = model.labels_inputter
    source_language, target_language = corpus_languages(
        {"source": source.vocabulary_file, "target": target.vocabulary_file}
    )
    return {
        "format": FORMAT,
        "version": VERSION,
        "model": type(model).__name__,
        "source_embedder": type(source).__name__,
        "target_embedder": type(target).__name__,
        "checkpoint": checkpoint,
        "declared_domains": list(model.domains or []),
        "domain_specific": bool(model.domain_variables()),
        "domains": {domain: domain for domain in domains},
        # Basenames: each model directory holds CTranslate2's copy of the vocabularies.
        "source_vocabulary": os.path.basename(source.vocabulary_file),
        "target_vocabulary": os.path.basename(target.vocabulary_file),
        # The language pair, where the corpus says it (ldr-serve's GET /languages).
        "source_language": source_language,
        "target_language": target_language,
        "quantization": quantization,
        "ctranslate2_version": ctranslate2.__version__,
        # Trained on a corpus of ldr-data terms: its source vocabulary has the markers, and
        # ldr-serve applies the glossaries of requests (ldr_opennmt.data.terms).
        "terminology": _has_markers(source.vocabulary_file),
    }


def _has_markers(vocabulary_file):
    """Whether a vocabulary has every terminology marker (:data:`~ldr_opennmt.data.terms.
    MARKERS`)."""
    try:
        with open(vocabulary_file, encoding="utf-8") as f:
            tokens = {line.rstrip("\n").split("\t")[0] for line in f}
    except (OSError, UnicodeDecodeError, TypeError):
        return False
    return all(marker in tokens for marker in terms.MARKERS)


def check_replaceable(output_dir, force):
    """Checks that an export may be written to :obj:`output_dir`.

    ``--force`` replaces an earlier export of this module only: a directory the
    package did not make (a model directory with its checkpoints, the current
    directory, a link, a directory whose ``manifest.json`` is not one ldr-export wrote:
    :func:`~ldr_opennmt.serving.manifest.read_manifest` with ``replacing=True``) is never
    removed.

    Raises:
      UserError: if :obj:`output_dir` exists and may not be replaced.
    """
    if os.path.islink(output_dir):
        raise UserError("%s: a symbolic link: export to a real directory" % output_dir)
    if not os.path.exists(output_dir):
        return
    if not force:
        raise UserError("%s already exists (use --force to replace it)" % output_dir)
    if not is_export(output_dir):
        raise UserError(
            "%s: --force replaces only an earlier export of ldr-export ctranslate2 (with its "
            "%s), and this directory is not one: choose another --output_dir"
            % (output_dir, MANIFEST)
        )
    try:
        # Any version, with or without hashes: an older or newer export is what the readers'
        # refusals tell the user to replace.
        read_manifest(output_dir, replacing=True)
    except UserError as e:
        raise UserError(
            "%s: --force replaces only an earlier export of ldr-export ctranslate2, and this "
            "directory's %s is not one it wrote (%s): choose another --output_dir"
            % (output_dir, MANIFEST, e)
        ) from None


def convert(plain, model_dir, quantization=None, vocabularies=None):
    """Converts a plain Transformer with CTranslate2's OpenNMT-tf converter.

    Tokenization assets (as OpenNMT-tf's CTranslate2 exporter writes them) go
    to ``model_dir/assets.extra``: the model's own, or else the corpus tokenizer of its
    vocabularies (:func:`ldr_opennmt.assets.corpus_tokenizer`).

    Args:
      plain: A built ``opennmt.models.Transformer``.
      model_dir: The CTranslate2 model directory to create (must not exist).
      quantization: The CTranslate2 weight type, or ``None``.
      vocabularies: ``{side: vocabulary file}`` whose corpus tokenizers are used for the
        sides the model has no tokenizer of (default: the plain model's vocabularies).

    Returns:
      ``{side: where its tokenizer comes from}``: ``"configuration"``, ``"corpus"`` or
      ``None`` (no tokenizer).
    """
    ctranslate2.converters.OpenNMTTFConverter(plain).convert(model_dir, quantization=quantization)
    if vocabularies is None:
        vocabularies = {
            "source": plain.features_inputter.vocabulary_file,
            "target": plain.labels_inputter.vocabulary_file,
        }
    sources = {}
    with tempfile.TemporaryDirectory() as asset_dir:
        assets = plain.export_assets(asset_dir)
        for side in ("source", "target"):
            config = assets_lib.TOKENIZER_CONFIGS[side]
            if config in assets:
                sources[side] = "configuration"
                continue
            corpus_assets = assets_lib.corpus_tokenizer_assets(
                vocabularies.get(side), side, asset_dir
            )
            for name, path in corpus_assets.items():
                if name in assets and not filecmp.cmp(assets[name], path, shallow=False):
                    raise UserError(
                        "%s: the corpus tokenizer file %s differs from the %s of the other "
                        "side: rename one" % (path, name, name)
                    )
            assets.update(corpus_assets)
            sources[side] = "corpus" if corpus_assets else None
        if assets:
            extra = os.path.join(model_dir, "assets.extra")
            os.makedirs(extra)
            for name, path in assets.items():
                shutil.copyfile(path, os.path.join(extra, name))
    return sources


def export(
    model,
    output_dir,
    domains=None,
    quantization=None,
    checkpoint_path=None,
    force=False,
    checkpoint=None,
    prog="ldr-export",
    quality=None,
):
    """Exports one folded CTranslate2 model per domain, and a manifest.

    Args:
      model: A built multi-domain Transformer with its trained weights.
      output_dir: The export directory (``output_dir/<domain>/`` per domain).
      domains: The domain names to export (declared names or ``generic``); by
        default every declared domain, then ``generic``.
      quantization: A CTranslate2 weight type (``int8``, ``int16``, ``float16``,
        ...), or ``None`` for the trained float32 weights.
      checkpoint_path: The checkpoint the weights come from, for the manifest.
      force: Replace :obj:`output_dir` if it is an earlier export.
      checkpoint: :func:`checkpoint_info` of :obj:`checkpoint_path` if already computed
        (before restoring it).
      prog: How the note about missing tokenizers is prefixed.
      quality: A callable ``(directory, manifest) -> manifest entry`` that writes what the
        export learns from its corpus into the export's directory, its models there
        (:func:`ldr_opennmt.export.quality.write_quality`), or ``None``.

    Returns:
      The manifest (also written to ``output_dir/manifest.json``).

    Raises:
      UserError: on an unknown domain, a model that cannot be folded (RNN), an
        existing :obj:`output_dir` without :obj:`force`, or one that is not an earlier
        export (see :func:`check_replaceable`).
      ValueError: on an invalid quantization.
    """
    check_quantization(quantization)
    folding.check_foldable(model)
    domains = folding.export_domains(model) if not domains else list(domains)
    for domain in domains:
        folding.domain_id(model, domain)
        check_directory_name(domain)
    duplicates = sorted({d for d in domains if domains.count(d) > 1})
    if duplicates:
        raise UserError("domain %r is given twice" % duplicates[0])
    output_dir = os.path.abspath(output_dir)
    check_replaceable(output_dir, force)
    if checkpoint is None and checkpoint_path:
        checkpoint = checkpoint_info(checkpoint_path)
    manifest = make_manifest(model, domains, quantization, checkpoint=checkpoint)
    vocabularies = {
        "source": folding.source_embedder(model).vocabulary_file,
        "target": model.labels_inputter.vocabulary_file,
    }
    with atomic_directory(output_dir) as partial:
        plain = folding.plain_transformer(model)
        hashes = {}
        for domain in domains:
            folding.assign_domain(plain, model, domain)
            tokenizers = convert(
                plain, os.path.join(partial, domain), quantization, vocabularies=vocabularies
            )
            hashes[domain] = directory_sha256(os.path.join(partial, domain))
        manifest["tokenizers"] = tokenizers
        manifest[SHA256] = hashes
        if quality is not None:
            manifest["quality"] = quality(partial, manifest)
        with open(os.path.join(partial, MANIFEST), "w", encoding="utf-8") as f:
            json.dump(manifest, f, indent=2)
            f.write("\n")
    note = assets_lib.tokenizer_note(
        [side for side in ("source", "target") if tokenizers[side] is None], vocabularies
    )
    if note:
        print("%s: note: %s" % (prog, note), file=sys.stderr)
    return manifest
