"""``ldr-serve``'s CTranslate2 backend: every load checks the model's files against the
manifest (issue 43 item 8), also a lazy reload, and ``/health`` says when a model can no
longer load; a manifest without hashes, with a model directory outside the export, invalid
or of an unknown version is refused at start in one line (issue 56 item 3), and
``ldr-export --force`` replaces an export of any version only."""

import contextlib
import io
import os
import re
import shutil
import types

import tensorflow as tf

from ldr_opennmt.cli import serve as serve_cli
from ldr_opennmt.errors import UserError
from ldr_opennmt.export import ct2_export
from ldr_opennmt.serving import backends
from tests import builds, helpers
from tests.serving import fixtures, test_manifest

CHANGED = (
    r"^domain 'medical': medical/model\.bin: content differs from manifest\.json \(sha256 "
    r"[0-9a-f]{12}\.\.\., recorded [0-9a-f]{12}\.\.\.\): the model directory was changed after "
    r"export; export the model again$"
)


def _options(model_dir, **overrides):
    options = dict(
        model_dir=model_dir,
        device="cpu",
        compute_type="default",
        inter_threads=1,
        intra_threads=1,
        lazy=True,
        max_loaded_models=None,
        max_batch_size=8,
        max_wait_ms=0,
        max_decoding_length=fixtures.MAX_LENGTH,
        max_beam_size=4,
    )
    options.update(overrides)
    return types.SimpleNamespace(**options)


class CTranslate2BackendTest(helpers.SharedDirTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.export = builds.tiny_ldr_ct2()  # Shared: read only (copied where changed).

    def _backend(self, name, **overrides):
        export = os.path.join(self.dir, name)
        shutil.copytree(self.export, export)
        backend = backends.CTranslate2Backend(_options(export, **overrides))
        self.addCleanup(backend.close)
        return backend, export

    def _translate(self, backend, domain):
        tokens = backend.tokenize(domain, "the cell is here.")
        return backend._run(domain, (1, 1), [tokens])  # pylint: disable=protected-access

    def test_model_replaced_on_disk(self):
        backend, export = self._backend("replaced", max_loaded_models=1)
        health = backend.health()
        self.assertNotIn("status", health)  # The server's "ok" stands.
        self.assertNotIn("unloadable_models", health)
        self._translate(backend, "medical")
        self._translate(backend, "religious")  # medical unloaded (one model at a time).
        self.assertEqual(backend.health()["models"]["loaded_models"], ["religious"])
        shutil.copyfile(
            os.path.join(export, "religious", "model.bin"),
            os.path.join(export, "medical", "model.bin"),
        )
        health = backend.health()
        self.assertEqual(health["status"], "degraded")
        self.assertEqual(list(health["unloadable_models"]), ["medical"])
        self.assertRegex(health["unloadable_models"]["medical"], CHANGED)
        # The lazy reload is refused: religious's weights never answer as medical.
        with self.assertRaisesRegex(UserError, CHANGED):
            self._translate(backend, "medical")
        self.assertEqual(len(self._translate(backend, "generic")), 1)
        # Put back, the model loads again and /health is ok.
        shutil.copyfile(
            os.path.join(self.export, "medical", "model.bin"),
            os.path.join(export, "medical", "model.bin"),
        )
        self.assertNotIn("status", backend.health())
        self.assertEqual(len(self._translate(backend, "medical")), 1)

    def test_changed_model_refused_at_start(self):
        export = os.path.join(self.dir, "at_start")
        shutil.copytree(self.export, export)
        with open(os.path.join(export, "medical", "model.bin"), "ab") as f:
            f.write(b"\0")
        with self.assertRaisesRegex(UserError, r"^domain 'medical': medical/model\.bin"):
            backends.CTranslate2Backend(_options(export, lazy=False))

    def test_export_without_tokenizers_is_said_at_start(self):
        # Issue 44 item 2: requests would be split on spaces, answers joined by spaces.
        export = os.path.join(self.dir, "bare")
        shutil.copytree(self.export, export)
        for domain in os.listdir(export):
            shutil.rmtree(os.path.join(export, domain, "assets.extra"), ignore_errors=True)
        stderr = io.StringIO()
        with contextlib.redirect_stderr(stderr):
            backend = backends.CTranslate2Backend(_options(export))
        backend.close()
        self.assertEqual(
            stderr.getvalue(),
            "ldr-serve: warning: %s: the export has no tokenizer (exported from a corpus without "
            "one): sentences are split on spaces and translations are tokens joined by spaces\n"
            % export,
        )

    def test_missing_file_is_unloadable(self):
        backend, export = self._backend("missing")
        os.remove(os.path.join(export, "software", "assets.extra", "source_tokenizer_config.yml"))
        self.assertRegex(
            backend.health()["unloadable_models"]["software"],
            r"^domain 'software': software/assets\.extra/source_tokenizer_config\.yml: cannot "
            r"read it",
        )

    def _refused_at_start(self, group):
        """Each broken export of the group is refused by the backend's load and by
        ``ldr-serve`` (in one line, exit 2, before serving)."""
        for case in test_manifest.CASES[group]:
            with self.subTest(case.name):
                export = test_manifest.broken_copy(
                    self.export, os.path.join(self.dir, group, case.name), case
                )
                message = test_manifest.refusal(export, case)
                with self.assertRaisesRegex(UserError, "^%s\\Z" % message):
                    backends.load(_options(export, lazy=False))
                status, stderr = helpers.run_cli(
                    serve_cli.main, ["--model_dir", export, "--port", "0"]
                )
                self.assertEqual(status, 2, stderr)
                self.assertRegex(stderr, "^ldr-serve: error: %s\n\\Z" % message)

    def test_manifest_without_hashes_is_refused(self):
        # law's model.bin in med/, the hashes removed: no longer served as medical unchecked.
        self._refused_at_start("hashes")

    def test_model_directory_outside_the_export_is_refused(self):
        self._refused_at_start("outside")

    def test_invalid_manifest_says_what_is_wrong(self):
        self._refused_at_start("invalid")

    def test_unknown_manifest_version_is_refused(self):
        self._refused_at_start("version")

    def test_model_directory_linked_outside_after_start(self):
        backend, export = self._backend("linked_later")
        outside = os.path.join(self.dir, "linked_later_outside", "medical")
        shutil.copytree(os.path.join(export, "medical"), outside)
        shutil.rmtree(os.path.join(export, "medical"))
        os.symlink(outside, os.path.join(export, "medical"))
        # The same files (the hashes agree): the lazy load is refused for the path.
        refused = (
            r"^domain 'medical': 'medical' now resolves outside the export \(a link\?\): a "
            r"model directory must be inside the export$"
        )
        health = backend.health()
        self.assertEqual(health["status"], "degraded")
        self.assertRegex(health["unloadable_models"]["medical"], refused)
        with self.assertRaisesRegex(UserError, refused):
            self._translate(backend, "medical")
        self.assertEqual(len(self._translate(backend, "religious")), 1)

    def test_force_replaces_an_export_of_any_version_only(self):
        # What the refusals above tell the user to do: export again with --force.
        for group, cases in test_manifest.CASES.items():
            for case in cases:
                with self.subTest(case.name):
                    export = test_manifest.broken_copy(
                        self.export, os.path.join(self.dir, "force", group, case.name), case
                    )
                    if case.replaceable:
                        ct2_export.check_replaceable(export, force=True)
                        continue
                    with self.assertRaisesRegex(
                        UserError,
                        "^%s: --force replaces only an earlier export of ldr-export ctranslate2, "
                        "and this directory's manifest\\.json is not one it wrote \\(%s\\): "
                        "choose another --output_dir\\Z"
                        % (re.escape(export), test_manifest.refusal(export, case)),
                    ):
                        ct2_export.check_replaceable(export, force=True)


if __name__ == "__main__":
    tf.test.main()
