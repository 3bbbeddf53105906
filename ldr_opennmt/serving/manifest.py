"""The manifest of an ``ldr-export ctranslate2`` directory, read without TensorFlow or
CTranslate2: what the serving runtime needs to open an export made elsewhere.

``OUT/manifest.json`` (written by :mod:`ldr_opennmt.serving.ct2_export`) records, with paths
relative to ``OUT``:

* ``format`` (:data:`FORMAT`) and ``version``;
* ``domains``: ``{domain: model directory}``, and ``declared_domains``, ``domain_specific``;
* ``sha256``: ``{domain: {file: sha256}}``, the content of every file of each model directory
  (``model.bin``, the vocabularies, the tokenizer assets): a model is checked against it each
  time it is loaded (:func:`verify_model`), so a directory replaced on disk is refused rather
  than served as the domain it no longer is;
* ``checkpoint``: ``{"name": "ckpt-200", "step": 200, "sha256": ...}`` (the checkpoint
  exported, by basename, and the sha256 of its files);
* ``tokenizers``: where the tokenizers come from, or why there are none;
* ``source_vocabulary``, ``target_vocabulary``: the vocabularies' basenames (each model
  directory holds CTranslate2's own copy).
"""

import hashlib
import json
import os

from ldr_opennmt.errors import UserError

MANIFEST = "manifest.json"
FORMAT = "ldr-opennmt-ctranslate2"
#: The manifest key of the per-model file hashes.
SHA256 = "sha256"
_CHUNK = 1 << 20


def read_manifest(output_dir):
    """Reads the manifest of an export directory."""
    with open(os.path.join(output_dir, MANIFEST), encoding="utf-8") as f:
        return json.load(f)


def is_export(path):
    """Whether :obj:`path` is a directory made by ``ldr-export ctranslate2``: a real
    directory whose ``manifest.json`` has :data:`FORMAT` (a link is never one)."""
    manifest = os.path.join(path, MANIFEST)
    if os.path.islink(path) or not os.path.isdir(path) or os.path.islink(manifest):
        return False
    try:
        return read_manifest(path).get("format") == FORMAT
    except (OSError, ValueError, AttributeError):
        return False


def file_sha256(path):
    """The sha256 of a file's content, as hexadecimal."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def directory_sha256(model_dir):
    """``{relative path: sha256}`` of every file under :obj:`model_dir` (sorted, ``/``
    separators)."""
    hashes = {}
    for directory, subdirectories, files in os.walk(model_dir):
        subdirectories.sort()
        for name in sorted(files):
            path = os.path.join(directory, name)
            hashes[os.path.relpath(path, model_dir).replace(os.sep, "/")] = file_sha256(path)
    return hashes


def verify_model(export_dir, manifest, domain):
    """Checks a domain's model directory against the hashes of the manifest.

    An export made before the manifest recorded hashes is not checked.

    Args:
      export_dir: The export directory.
      manifest: Its manifest.
      domain: The domain whose model is about to be loaded.

    Raises:
      UserError: ``domain 'medical': medical/model.bin: content differs from manifest.json
        (...)`` when a file is missing or changed.
    """
    expected = (manifest.get(SHA256) or {}).get(domain)
    if not expected:
        return
    model_dir = os.path.join(export_dir, str(manifest["domains"][domain]))
    for name, sha256 in expected.items():
        relative = "%s/%s" % (manifest["domains"][domain], name)
        path = os.path.join(model_dir, name)
        try:
            actual = file_sha256(path)
        except OSError as e:
            raise UserError(
                "domain %r: %s: cannot read it (%s): the export is incomplete; export the "
                "model again" % (domain, relative, e.strerror or e)
            ) from None
        if actual != sha256:
            raise UserError(
                "domain %r: %s: content differs from %s (sha256 %s..., recorded %s...): the "
                "model directory was changed after export; export the model again"
                % (domain, relative, MANIFEST, actual[:12], sha256[:12])
            )
