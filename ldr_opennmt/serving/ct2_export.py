"""CTranslate2 models of a multi-domain Transformer: one folded model per domain.

CTranslate2 has no domain input, so each domain gets its own model directory,
converted by CTranslate2's OpenNMT-tf converter from the plain Transformer that
:mod:`ldr_opennmt.serving.folding` builds for that domain::

    OUT/
      manifest.json      which directory is which domain, vocabularies, quantization
      medical/           a CTranslate2 model (model.bin, config.json, vocabularies)
      religious/
      software/
      generic/           the generic region alone (LDR) / a zero domain vector (DC)

Each directory is a complete CTranslate2 model: ``ctranslate2.Translator(OUT/medical)``
translates medical text. Directories of a model without domain-specific
parameters (Mixed) are identical. The output is built in a temporary directory
next to ``OUT`` and renamed at the end: a directory named ``OUT`` is always complete.
"""

import json
import os
import shutil
import tempfile

import ctranslate2
from ctranslate2.specs.model_spec import ACCEPTED_MODEL_TYPES

from ldr_opennmt.errors import UserError
from ldr_opennmt.serving import folding
from ldr_opennmt.utils import atomic_directory

MANIFEST = "manifest.json"
FORMAT = "ldr-opennmt-ctranslate2"
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


def make_manifest(model, domains, quantization, checkpoint_path=None):
    """The manifest of an export (a JSON-serializable dict).

    Args:
      model: The multi-domain model.
      domains: The exported domain names (each is its directory's name).
      quantization: The CTranslate2 weight type, or ``None``.
      checkpoint_path: The checkpoint the weights come from, if known.
    """
    source = folding.source_embedder(model)
    target = model.labels_inputter
    return {
        "format": FORMAT,
        "version": 1,
        "model": type(model).__name__,
        "source_embedder": type(source).__name__,
        "target_embedder": type(target).__name__,
        "checkpoint": checkpoint_path,
        "declared_domains": list(model.domains or []),
        "domain_specific": bool(model.domain_variables()),
        "domains": {domain: domain for domain in domains},
        "source_vocabulary": os.path.abspath(source.vocabulary_file),
        "target_vocabulary": os.path.abspath(target.vocabulary_file),
        "quantization": quantization,
        "ctranslate2_version": ctranslate2.__version__,
    }


def read_manifest(output_dir):
    """Reads the manifest of an export directory."""
    with open(os.path.join(output_dir, MANIFEST), encoding="utf-8") as f:
        return json.load(f)


def is_export(path):
    """Whether :obj:`path` is a directory made by :func:`export`: a real directory
    whose ``manifest.json`` has this module's format (a link is never one)."""
    manifest = os.path.join(path, MANIFEST)
    if os.path.islink(path) or not os.path.isdir(path) or os.path.islink(manifest):
        return False
    try:
        return read_manifest(path).get("format") == FORMAT
    except (OSError, ValueError, AttributeError):
        return False


def check_replaceable(output_dir, force):
    """Checks that an export may be written to :obj:`output_dir`.

    ``--force`` replaces an earlier export of this module only: a directory the
    package did not make (a model directory with its checkpoints, the current
    directory, a link) is never removed.

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


def convert(plain, model_dir, quantization=None):
    """Converts a plain Transformer with CTranslate2's OpenNMT-tf converter.

    Tokenization assets (as OpenNMT-tf's CTranslate2 exporter writes them) go
    to ``model_dir/assets.extra``.

    Args:
      plain: A built ``opennmt.models.Transformer``.
      model_dir: The CTranslate2 model directory to create (must not exist).
      quantization: The CTranslate2 weight type, or ``None``.
    """
    ctranslate2.converters.OpenNMTTFConverter(plain).convert(model_dir, quantization=quantization)
    with tempfile.TemporaryDirectory() as asset_dir:
        assets = plain.export_assets(asset_dir)
        if assets:
            extra = os.path.join(model_dir, "assets.extra")
            os.makedirs(extra)
            for name, path in assets.items():
                shutil.copyfile(path, os.path.join(extra, name))


def export(
    model,
    output_dir,
    domains=None,
    quantization=None,
    checkpoint_path=None,
    force=False,
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
    manifest = make_manifest(model, domains, quantization, checkpoint_path=checkpoint_path)
    with atomic_directory(output_dir) as partial:
        plain = folding.plain_transformer(model)
        for domain in domains:
            folding.assign_domain(plain, model, domain)
            convert(plain, os.path.join(partial, domain), quantization=quantization)
        with open(os.path.join(partial, MANIFEST), "w", encoding="utf-8") as f:
            json.dump(manifest, f, indent=2)
            f.write("\n")
    return manifest
