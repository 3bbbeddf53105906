"""``ldr-serve``'s CTranslate2 backend: every load checks the model's files against the
manifest (issue 43 item 8), also a lazy reload, and ``/health`` says when a model can no
longer load."""

import contextlib
import io
import os
import shutil
import types

import tensorflow as tf

from ldr_opennmt.errors import UserError
from ldr_opennmt.serving import backends
from tests import helpers
from tests.serving import fixtures

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
        model, _ = fixtures.tiny_model(cls.dir)
        cls.export = fixtures.ct2_directory(model, cls.dir)

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


if __name__ == "__main__":
    tf.test.main()
