"""The one reader of export manifests (issue 56 item 3, "Exports trusted too far"): a manifest
without hashes, a model directory outside the export, an invalid manifest and an unknown
version are each refused in one line naming the manifest file and the key.

:data:`CASES` are the broken exports, made from a real export (:func:`broken_copy`);
``test_backends.py`` (``ldr-serve``'s start, ``ldr-export --force``) and
``test_ct2_client.py`` (``ldr-translate``, ``Translator``) refuse each of them with the
exports their fixtures build. The tests here read small hand-made exports (no model).
"""

import collections
import json
import os
import re
import shutil
import tempfile
import unittest

from ldr_opennmt.errors import UserError
from ldr_opennmt.serving import manifest as manifest_lib

#: A broken export: :obj:`mutate` breaks a copy of an export; :obj:`message` (a regex)
#: follows ``EXPORT/manifest.json: `` in the refusal; :obj:`replaceable`: whether
#: ``ldr-export --force`` still replaces it (a manifest ldr-export wrote, of any version).
Case = collections.namedtuple("Case", "name mutate message replaceable")

EXPORT_AGAIN = r"export the model again with this version's ldr-export \(--force replaces it\)"
VERSION_1 = (
    r"key 'version' is 1, made by an older ldr-export \(no sha256 of the model files: they "
    r"cannot be checked\); this package reads version 2: " + EXPORT_AGAIN
)


def _read(export):
    with open(os.path.join(export, manifest_lib.MANIFEST), encoding="utf-8") as f:
        return json.load(f)


def _write(export, manifest):
    with open(os.path.join(export, manifest_lib.MANIFEST), "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=2)


def _edit(change):
    """A mutation that calls ``change(manifest, export)`` on the manifest, then writes it."""

    def mutate(export):
        manifest = _read(export)
        change(manifest, export)
        _write(export, manifest)

    return mutate


def _text(change):
    """A mutation that replaces the manifest's bytes with ``change(bytes)``."""

    def mutate(export):
        path = os.path.join(export, manifest_lib.MANIFEST)
        with open(path, "rb") as f:
            data = f.read()
        with open(path, "wb") as f:
            f.write(change(data))

    return mutate


def _copy_law_into_medical(export):
    """The hostile user's copy: the religious model's weights in ``medical/``."""
    shutil.copyfile(
        os.path.join(export, "religious", "model.bin"), os.path.join(export, "medical", "model.bin")
    )


def _outside(export):
    """A copy of the medical model outside the export (``../outside/medical``): the same
    files, so that only the path, not the hashes, can refuse it."""
    outside = os.path.join(os.path.dirname(export), "outside", "medical")
    shutil.copytree(os.path.join(export, "medical"), outside)
    return outside


def _without_hashes(manifest, export):
    _copy_law_into_medical(export)
    del manifest[manifest_lib.SHA256]


def _without_medical_hashes(manifest, export):
    _copy_law_into_medical(export)
    del manifest[manifest_lib.SHA256]["medical"]


def _set(key, value):
    def change(manifest, _):
        manifest[key] = value

    return change


def _set_domain(value):
    def change(manifest, export):
        manifest["domains"]["medical"] = value(export) if callable(value) else value

    return change


def _linked_outside(export):
    outside = _outside(export)
    shutil.rmtree(os.path.join(export, "medical"))
    os.symlink(outside, os.path.join(export, "medical"))


def _version_1(manifest, _):
    manifest["version"] = 1
    del manifest[manifest_lib.SHA256]


CASES = {
    # A version-2 manifest without its hashes was loaded unchecked.
    "hashes": [
        Case(
            "law_copied_into_medical_and_hashes_removed",
            _edit(_without_hashes),
            r"key 'sha256' is missing: the manifest records no sha256 of the model files, so "
            r"they cannot be checked; " + EXPORT_AGAIN,
            True,
        ),
        Case(
            "no_hashes_of_a_domain",
            _edit(_without_medical_hashes),
            r"key 'sha256' has no entry for domain 'medical': its model files cannot be "
            r"checked; " + EXPORT_AGAIN,
            True,
        ),
        Case(
            "no_hash_of_model_bin",
            _edit(lambda m, _: m[manifest_lib.SHA256]["medical"].pop("model.bin")),
            r"key 'sha256', domain 'medical': no sha256 of model\.bin: the model cannot be "
            r"checked; " + EXPORT_AGAIN,
            True,
        ),
    ],
    # Domain paths were followed outside the export.
    "outside": [
        Case(
            "parent_path",
            _edit(_set_domain(lambda export: os.path.relpath(_outside(export), export))),
            r"key 'domains': domain 'medical' is '\.\./outside/medical', a path that resolves "
            r"outside the export \(to /.*/outside/medical\): a model directory must be inside "
            r"the export",
            True,
        ),
        Case(
            "absolute_path",
            _edit(_set_domain(_outside)),
            r"key 'domains': domain 'medical' is '/.*/outside/medical', an absolute path: a "
            r"model directory must be inside the export",
            True,
        ),
        Case(
            "directory_linked_outside",
            _linked_outside,
            r"key 'domains': domain 'medical' is 'medical', a path that resolves outside the "
            r"export \(to /.*/outside/medical\): a model directory must be inside the export",
            True,
        ),
        Case(
            "the_export_itself",
            _edit(_set_domain(".")),
            r"key 'domains': domain 'medical' is '\.', the export directory itself: a model "
            r"directory must be inside the export",
            True,
        ),
    ],
    # An invalid manifest was "not an export".
    "invalid": [
        Case(
            "bad_json",
            _text(lambda data: data.replace(b'"version": 2,', b'"version": 2,,', 1)),
            r"invalid JSON at line 3, column 16 \(Expecting property name enclosed in double "
            r"quotes\)",
            False,
        ),
        Case(
            "not_utf8",
            _text(lambda data: b'{"format": "\xff"}'),
            r"not UTF-8 text \(byte 12\): not a manifest written by ldr-export",
            False,
        ),
        Case(
            "not_an_object",
            _text(lambda data: b"[]"),
            r"expected a JSON object \(a mapping of keys\), got a list",
            False,
        ),
        Case(
            "another_format",
            _edit(_set("format", "other-tool")),
            r"key 'format' must be 'ldr-opennmt-ctranslate2', got a string 'other-tool': not "
            r"an export of ldr-export ctranslate2",
            False,
        ),
        Case(
            "domains_not_a_mapping",
            _edit(lambda m, _: m.update(domains=list(m["domains"]))),
            r"key 'domains' must be a non-empty mapping of domain to model directory, got a list",
            True,
        ),
        Case(
            "directory_not_a_string",
            _edit(_set_domain(3)),
            r"key 'domains': domain 'medical' must name its model directory \(a path\), got an "
            r"integer 3",
            True,
        ),
        Case(
            "hash_not_hexadecimal",
            _edit(lambda m, _: m[manifest_lib.SHA256]["medical"].update({"model.bin": "abc"})),
            r"key 'sha256', domain 'medical', file 'model\.bin': must be a sha256 \(64 "
            r"hexadecimal digits\), got a string 'abc'",
            True,
        ),
        Case(
            "declared_domains_not_a_list",
            _edit(_set("declared_domains", "medical")),
            r"key 'declared_domains' must be a list of domain names \(or null\), got a string "
            r"'medical'",
            True,
        ),
    ],
    # "version": 99 was accepted.
    "version": [
        Case(
            "newer_version",
            _edit(_set("version", 99)),
            r"key 'version' is 99, made by a newer ldr-export; this package reads version 2: "
            + EXPORT_AGAIN
            + ", or use the ldr-opennmt that made it",
            True,
        ),
        Case(
            "version_1",  # As ldr-export wrote it before 2026-11-27: no hashes.
            _edit(_version_1),
            VERSION_1,
            True,
        ),
        Case(
            "version_1_with_hashes",  # Not a way around the hashes either.
            _edit(_set("version", 1)),
            VERSION_1,
            True,
        ),
        Case(
            "version_not_an_integer",
            _edit(_set("version", "2")),
            r"key 'version' must be a positive integer, got a string '2'",
            False,
        ),
        Case(
            "no_version",
            _edit(lambda m, _: m.pop("version")),
            r"key 'version' must be a positive integer, but it is missing",
            False,
        ),
    ],
}


def broken_copy(export, directory, case):
    """A copy of :obj:`export` at ``directory/ct2``, broken by :obj:`case`; its path."""
    copy = os.path.join(directory, "ct2")
    shutil.copytree(export, copy, symlinks=True)
    case.mutate(copy)
    return copy


def refusal(copy, case):
    """The regex of :obj:`case`'s whole message for the broken export :obj:`copy`."""
    return "%s: %s" % (re.escape(os.path.join(copy, manifest_lib.MANIFEST)), case.message)


def _small_export(directory):
    """A hand-made export (no model): ``medical/`` and ``generic/`` with a few bytes each."""
    export = os.path.join(directory, "ct2")
    for domain in ("medical", "generic"):
        os.makedirs(os.path.join(export, domain, "assets.extra"))
        for name in ("model.bin", "assets.extra/bpe.en"):
            with open(os.path.join(export, domain, name), "w") as f:
                f.write("%s %s\n" % (domain, name))
    _write(
        export,
        {
            "format": manifest_lib.FORMAT,
            "version": manifest_lib.VERSION,
            "domains": {"medical": "medical", "generic": "generic"},
            "sha256": {
                d: manifest_lib.directory_sha256(os.path.join(export, d))
                for d in ("medical", "generic")
            },
        },
    )
    return export


class ManifestReaderTest(unittest.TestCase):
    """What the real exports of the other tests do not reach: the reader's own limits."""

    def setUp(self):
        super().setUp()
        self.dir = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.dir)
        self.export = _small_export(self.dir)
        self.where = os.path.join(self.export, manifest_lib.MANIFEST)

    def _refused(self, regex):
        with self.assertRaises(UserError) as context:
            manifest_lib.read_manifest(self.export)
        message = str(context.exception)
        self.assertEqual(len(message.splitlines()), 1, message)
        self.assertRegex(message, "^%s: %s\\Z" % (re.escape(self.where), regex))
        return message

    def test_a_valid_manifest_is_returned_as_written(self):
        manifest = manifest_lib.read_manifest(self.export)
        self.assertEqual(manifest, _read(self.export))
        manifest_lib.verify_model(self.export, manifest, "medical")
        # Extra hashes (a domain left out of "domains") are allowed; a nested path inside.
        manifest["domains"] = {"medical": "generic/../medical"}
        _write(self.export, manifest)
        manifest = manifest_lib.read_manifest(self.export)
        manifest_lib.verify_model(self.export, manifest, "medical")

    def test_paths_and_strings_that_cannot_be_files(self):
        manifest = _read(self.export)
        manifest["domains"]["medical"] = "\ud800"  # Written as the escape \ud800.
        _write(self.export, manifest)
        self._refused(r"key 'domains': a lone surrogate .*: not a manifest written by ldr-export")
        manifest["domains"]["medical"] = "medical"
        manifest["sha256"]["medical"]["../../outside"] = "0" * 64
        _write(self.export, manifest)
        self._refused(
            r"key 'sha256', domain 'medical': file '\.\./\.\./outside' is not a path inside the "
            r"model directory"
        )
        with open(self.where, "w") as f:
            f.write("[" * 100000 + "]" * 100000)
        self._refused(r"invalid JSON \(nested too deeply\)")

    def test_a_linked_manifest_is_refused(self):
        os.rename(self.where, os.path.join(self.dir, "elsewhere.json"))
        os.symlink(os.path.join(self.dir, "elsewhere.json"), self.where)
        self._refused(r"a symbolic link: an export's manifest is a file of its own \(.*\)")

    def test_a_directory_linked_outside_after_the_manifest_was_read(self):
        manifest = manifest_lib.read_manifest(self.export)
        os.rename(os.path.join(self.export, "medical"), os.path.join(self.dir, "medical"))
        os.symlink(os.path.join(self.dir, "medical"), os.path.join(self.export, "medical"))
        # The same files: the hashes agree, the path does not.
        with self.assertRaisesRegex(
            UserError,
            r"^domain 'medical': 'medical' now resolves outside the export \(a link\?\): a "
            r"model directory must be inside the export\Z",
        ):
            manifest_lib.verify_model(self.export, manifest, "medical")

    def test_is_export_is_any_directory_with_a_manifest(self):
        self.assertTrue(manifest_lib.is_export(self.export))
        with open(self.where, "w") as f:
            f.write("not json")
        self.assertTrue(manifest_lib.is_export(self.export))  # read_manifest says why not.
        os.remove(self.where)
        self.assertFalse(manifest_lib.is_export(self.export))
        self.assertFalse(manifest_lib.is_export(os.path.join(self.export, "missing")))


if __name__ == "__main__":
    unittest.main()
