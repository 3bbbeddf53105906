"""The manifest of an ``ldr-export ctranslate2`` directory, read without TensorFlow or
CTranslate2: what the serving runtime needs to open an export made elsewhere.

``OUT/manifest.json`` (written by :mod:`ldr_opennmt.export.ct2_export`) records, with paths
relative to ``OUT``:

* ``format`` (:data:`FORMAT`) and ``version`` (:data:`VERSION`);
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

Every reader of a manifest (``ldr-serve``'s backend, ``ldr-translate``, the Python
``Translator``, ``ldr-export --force``) goes through :func:`read_manifest`, which checks it
before anything in it is used: an invalid one is refused in one line naming the manifest file
and the key, never taken for "not an export" nor used in part.
"""

import hashlib
import json
import os
import re

from ldr_opennmt.errors import UserError

MANIFEST = "manifest.json"
FORMAT = "ldr-opennmt-ctranslate2"
#: The manifest version ``ldr-export ctranslate2`` writes.
VERSION = 2
#: The manifest versions this package reads.
#:
#: Version 1 (``ldr-export`` of 2026-11-22 to 2026-11-27, in no release) recorded absolute
#: vocabulary paths and no sha256 of the model files. It is refused, with a line saying to
#: export again: without the hashes nothing says that a model directory still holds the
#: model exported as its domain (another domain's ``model.bin`` copied in would be served
#: without a word), and reading a hash-less older version would let any manifest skip the
#: check by saying ``"version": 1``. ``ldr-export --force`` still replaces such an export.
READ_VERSIONS = (2,)
#: What an older version lacks, as its refusal says it.
_OLDER_VERSIONS = {1: " (no sha256 of the model files: they cannot be checked)"}
#: The manifest key of the per-model file hashes.
SHA256 = "sha256"
#: The file every model directory has (CTranslate2's weights); its hash is required.
MODEL_FILE = "model.bin"
_CHUNK = 1 << 20
_HEX_SHA256 = re.compile(r"^[0-9a-f]{64}\Z")
_NOT_AN_EXPORT = "not an export of ldr-export ctranslate2"
_EXPORT_AGAIN = "export the model again with this version's ldr-export (--force replaces it)"


def _short(value, limit=200):
    """:obj:`value` as a message shows it: its repr (non-printable characters escaped), cut."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _kind(value):
    """The JSON kind of :obj:`value`, as messages name it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    for types, name in ((int, "an integer"), (float, "a number"), (str, "a string")):
        if isinstance(value, types):
            return name
    return "a list" if isinstance(value, list) else "a mapping"


def _got(value):
    """``got a list`` / ``got a string '...'``: what a message says was found."""
    if isinstance(value, (list, dict)) or value is None:
        return "got %s" % _kind(value)
    return "got %s %s" % (_kind(value), _short(value))


def _has_surrogate(value):
    """Whether a JSON value holds a lone surrogate (a ``\\ud800`` escape) in a string or
    key: no path nor label can be one. Iterative: a value nested as deep as JSON allows."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if any("\ud800" <= c <= "\udfff" for c in item):
                return True
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
    return False


def _is_integer(value):
    return isinstance(value, int) and not isinstance(value, bool)


def is_export(path):
    """Whether :obj:`path` is to be read as a directory made by ``ldr-export ctranslate2``:
    a directory with a ``manifest.json``, whatever its content (:func:`read_manifest` then
    says what is wrong with it, instead of calling it no export)."""
    return os.path.isdir(path) and os.path.lexists(os.path.join(path, MANIFEST))


def _load(where):
    """The JSON value of the manifest file :obj:`where`.

    Raises:
      UserError: if it is a link, not a file, unreadable, not UTF-8 or not JSON.
    """
    if os.path.islink(where):
        raise UserError(
            "%s: a symbolic link: an export's manifest is a file of its own (%s)"
            % (where, _EXPORT_AGAIN)
        )
    if not os.path.isfile(where):
        raise UserError("%s: not a file: %s" % (where, _NOT_AN_EXPORT))
    try:
        with open(where, "rb") as f:
            data = f.read()
    except OSError as e:
        raise UserError("%s: cannot read it (%s)" % (where, e.strerror or e)) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise UserError(
            "%s: not UTF-8 text (byte %d): not a manifest written by ldr-export" % (where, e.start)
        ) from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise UserError(
            "%s: invalid JSON at line %d, column %d (%s)" % (where, e.lineno, e.colno, e.msg)
        ) from None
    except RecursionError:
        raise UserError("%s: invalid JSON (nested too deeply)" % where) from None


def _resolve_inside(export_dir, relative):
    """The real path of :obj:`relative` under :obj:`export_dir` (links followed), or
    ``None`` when it is absolute or resolves to the export itself or outside it."""
    if os.path.isabs(relative):
        return None
    root = os.path.realpath(export_dir)
    path = os.path.realpath(os.path.join(root, relative))
    if path == root or os.path.commonpath([root, path]) != root:
        return None
    return path


def _check_domains(export_dir, where, manifest):
    """``domains``: a non-empty mapping whose model directories are relative paths that
    resolve (links followed) inside the export."""
    domains = manifest.get("domains")
    if not isinstance(domains, dict) or not domains:
        raise UserError(
            "%s: key 'domains' must be a non-empty mapping of domain to model directory, %s"
            % (where, _got(domains) if "domains" in manifest else "but it is missing")
        )
    for domain, directory in domains.items():
        if not domain:
            raise UserError("%s: key 'domains': an empty domain name" % where)
        if not isinstance(directory, str) or not directory or "\0" in directory:
            raise UserError(
                "%s: key 'domains': domain %s must name its model directory (a path), %s"
                % (where, _short(domain), _got(directory))
            )
        if _resolve_inside(export_dir, directory) is None:
            if os.path.isabs(directory):
                reason = "an absolute path"
            else:
                resolved = os.path.realpath(os.path.join(export_dir, directory))
                reason = (
                    "the export directory itself"
                    if resolved == os.path.realpath(export_dir)
                    else "a path that resolves outside the export (to %s)" % resolved
                )
            raise UserError(
                "%s: key 'domains': domain %s is %s, %s: a model directory must be inside the "
                "export" % (where, _short(domain), _short(directory), reason)
            )


def _check_hashes(where, manifest):
    """``sha256``: for each domain of ``domains``, a mapping of relative file names (with
    ``model.bin``) to sha256s; the entries of other domains are checked too, but not
    required."""
    if SHA256 not in manifest:
        raise UserError(
            "%s: key '%s' is missing: the manifest records no sha256 of the model files, so "
            "they cannot be checked; %s" % (where, SHA256, _EXPORT_AGAIN)
        )
    hashes = manifest[SHA256]
    if not isinstance(hashes, dict):
        raise UserError(
            "%s: key '%s' must be a mapping of domain to {file: sha256}, %s"
            % (where, SHA256, _got(hashes))
        )
    for domain in manifest["domains"]:
        if domain not in hashes:
            raise UserError(
                "%s: key '%s' has no entry for domain %s: its model files cannot be checked; %s"
                % (where, SHA256, _short(domain), _EXPORT_AGAIN)
            )
    for domain, files in hashes.items():
        if not isinstance(files, dict) or not files:
            raise UserError(
                "%s: key '%s', domain %s: must be a non-empty mapping of file to sha256, %s"
                % (where, SHA256, _short(domain), _got(files))
            )
        for name, digest in files.items():
            parts = name.replace("\\", "/").split("/")
            if not name or "\0" in name or os.path.isabs(name) or ".." in parts:
                raise UserError(
                    "%s: key '%s', domain %s: file %s is not a path inside the model directory"
                    % (where, SHA256, _short(domain), _short(name))
                )
            if not isinstance(digest, str) or not _HEX_SHA256.match(digest):
                raise UserError(
                    "%s: key '%s', domain %s, file %s: must be a sha256 (64 hexadecimal "
                    "digits), %s" % (where, SHA256, _short(domain), _short(name), _got(digest))
                )
        if domain in manifest["domains"] and MODEL_FILE not in files:
            raise UserError(
                "%s: key '%s', domain %s: no sha256 of %s: the model cannot be checked; %s"
                % (where, SHA256, _short(domain), MODEL_FILE, _EXPORT_AGAIN)
            )


def _check_other_keys(where, manifest):
    """The types of the other keys the readers use."""
    declared = manifest.get("declared_domains")
    if declared is not None and (
        not isinstance(declared, list) or not all(isinstance(d, str) and d for d in declared)
    ):
        raise UserError(
            "%s: key 'declared_domains' must be a list of domain names (or null), %s"
            % (where, _got(declared) if not isinstance(declared, list) else "got another list")
        )
    for key, kinds, what in (
        ("domain_specific", (bool,), "a boolean"),
        ("terminology", (bool,), "a boolean"),
        ("model", (str,), "a string"),
        ("source_language", (str, type(None)), "a string (or null)"),
        ("target_language", (str, type(None)), "a string (or null)"),
    ):
        if key in manifest and not isinstance(manifest[key], kinds):
            raise UserError("%s: key '%s' must be %s, %s" % (where, key, what, _got(manifest[key])))


def read_manifest(export_dir, replacing=False):
    """Reads and checks the manifest of an export directory: the one reader of manifests.

    Checked, in this order: the file (a regular file, UTF-8 JSON, an object); ``format``;
    ``version`` (one of :data:`READ_VERSIONS`); ``domains`` (each model directory a relative
    path that resolves, links followed, inside the export); ``sha256`` (an entry of
    64-hexadecimal-digit hashes for each domain, ``model.bin``'s included); the types of
    ``declared_domains``, ``domain_specific``, ``model`` and the languages.

    Args:
      export_dir: The export directory.
      replacing: Check only that the manifest is one ``ldr-export ctranslate2`` wrote (its
        format, an integer version), whatever its version and content: what
        ``ldr-export --force`` needs before it replaces the directory (an older or newer
        export is what it is told to replace).

    Returns:
      The manifest, as written.

    Raises:
      UserError: one line naming the manifest file and the key, e.g.
        ``ct2/manifest.json: key 'version' is 99, made by a newer ldr-export; ...``.
    """
    where = os.path.join(export_dir, MANIFEST)
    manifest = _load(where)
    if not isinstance(manifest, dict):
        raise UserError(
            "%s: expected a JSON object (a mapping of keys), %s" % (where, _got(manifest))
        )
    if manifest.get("format") != FORMAT:
        raise UserError(
            "%s: key 'format' must be %r, %s: %s"
            % (
                where,
                FORMAT,
                _got(manifest["format"]) if "format" in manifest else "but it is missing",
                _NOT_AN_EXPORT,
            )
        )
    version = manifest.get("version")
    if not _is_integer(version) or version < 1:
        raise UserError(
            "%s: key 'version' must be a positive integer, %s"
            % (where, _got(version) if "version" in manifest else "but it is missing")
        )
    if replacing:
        return manifest
    if version not in READ_VERSIONS:
        if version < min(READ_VERSIONS):
            made_by = "an older ldr-export%s" % _OLDER_VERSIONS.get(version, "")
            what = _EXPORT_AGAIN
        else:
            made_by = "a newer ldr-export"
            what = _EXPORT_AGAIN + ", or use the ldr-opennmt that made it"
        raise UserError(
            "%s: key 'version' is %d, made by %s; this package reads version %s: %s"
            % (where, version, made_by, ", ".join(str(v) for v in READ_VERSIONS), what)
        )
    for key, value in manifest.items():
        if _has_surrogate(key) or _has_surrogate(value):
            raise UserError(
                "%s: key %s: a lone surrogate (a \\ud800-\\udfff escape) in a string: not a "
                "manifest written by ldr-export" % (where, _short(key))
            )
    _check_domains(export_dir, where, manifest)
    _check_hashes(where, manifest)
    _check_other_keys(where, manifest)
    return manifest


def model_directory(export_dir, manifest, domain):
    """The model directory of :obj:`domain` (a path under :obj:`export_dir`), checked again
    to resolve inside the export (a link made since the manifest was read).

    Raises:
      UserError: if it resolves outside the export.
    """
    directory = manifest["domains"][domain]
    if _resolve_inside(export_dir, directory) is None:
        raise UserError(
            "domain %s: %s now resolves outside the export (a link?): a model directory must "
            "be inside the export" % (_short(domain), _short(directory))
        )
    return os.path.join(export_dir, directory)


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
    """Checks a domain's model directory against the hashes of the manifest (a manifest
    :func:`read_manifest` returned), and that it still resolves inside the export.

    Args:
      export_dir: The export directory.
      manifest: Its manifest.
      domain: The domain whose model is about to be loaded.

    Raises:
      UserError: ``domain 'medical': medical/model.bin: content differs from manifest.json
        (...)`` when a file is missing or changed; when the manifest records no hashes of
        the domain, or its directory resolves outside the export.
    """
    expected = (manifest.get(SHA256) or {}).get(domain)
    if not expected:  # Never from read_manifest: refused there.
        raise UserError(
            "domain %s: %s records no sha256 of its model files: %s"
            % (_short(domain), MANIFEST, _EXPORT_AGAIN)
        )
    model_dir = model_directory(export_dir, manifest, domain)
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
