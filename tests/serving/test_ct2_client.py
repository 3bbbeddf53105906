"""``ldr-translate`` on a CTranslate2 directory: its inputs (label streams, a byte order mark),
Ctrl-C, a model changed on disk, manifests it refuses (issue 56 item 3), the Python
:class:`Translator`, and the whole path with TensorFlow and OpenNMT-tf made unimportable (the
serving runtime)."""

import json
import os
import shutil
from unittest import mock

import tensorflow as tf

from ldr_opennmt.errors import UserError
from ldr_opennmt.serving import ct2_models
from ldr_opennmt.serving.translator import Translator
from tests import builds, helpers
from tests.serving import fixtures, test_manifest
from tests.serving.fixtures import run_client
from tests.serving.no_tensorflow import run_without_tensorflow

SENTENCES, LABELS = fixtures.CLIENT_SENTENCES, fixtures.CLIENT_LABELS


class CTranslate2ClientTest(helpers.SharedDirTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.export = builds.tiny_ldr_ct2()  # Shared: read only (copied where changed).
        cls.input, cls.labels = fixtures.client_inputs(cls.dir)
        status, cls.expected, stderr = run_client(
            "--export", cls.export, "--domain_file", cls.labels, "--input", cls.input
        )
        assert status == 0, stderr
        assert len(cls.expected.splitlines()) == len(SENTENCES)

    def _work_dir(self, name):
        path = os.path.join(self.dir, name)
        os.makedirs(path)
        return path

    def test_a_glossary_needs_a_model_trained_with_terminology(self):
        glossary = os.path.join(self.dir, "glossary.tsv")
        with open(glossary, "w") as f:
            f.write("cell\tcellule\n")
        args = ["--domain_file", self.labels, "--input", self.input, "--glossary", glossary]
        status, _, stderr = run_client("--export", self.export, *args)
        self.assertEqual(status, 2)
        self.assertEqual(
            stderr.strip().splitlines()[-1],
            "ldr-translate: error: --glossary: %s: this model was not trained to apply "
            "terminology (train it on a corpus of ldr-data terms, then export it again)"
            % self.export,
        )
        # An export that says it was: the lines with a term are annotated, the others not.
        export = os.path.join(self._work_dir("terminology"), "ct2")
        shutil.copytree(self.export, export)
        path = os.path.join(export, "manifest.json")
        with open(path) as f:
            manifest = json.load(f)
        with open(path, "w") as f:
            json.dump(dict(manifest, terminology=True), f)
        status, stdout, stderr = run_client("--export", export, *args)
        self.assertEqual(status, 0, stderr)
        lines, expected = stdout.splitlines(), self.expected.splitlines()
        self.assertEqual(len(lines), len(SENTENCES))
        self.assertEqual(
            [line for line, sentence in zip(lines, SENTENCES) if "cell" not in sentence],
            [line for line, sentence in zip(expected, SENTENCES) if "cell" not in sentence],
        )
        with open(glossary, "w") as f:
            f.write("cell cellule\n")
        status, _, stderr = run_client("--export", export, *args)
        self.assertEqual(status, 2)
        self.assertIn("%s:1: expected SOURCE<tab>TARGET" % glossary, stderr)

    def test_domain_file_from_standard_input(self):
        status, stdout, stderr = run_client(
            "--export", self.export, "--domain_file", "-", "--input", self.input,
            stdin="".join(label + "\n" for label in LABELS),
        )  # fmt: skip
        self.assertEqual(status, 0, stderr)
        self.assertEqual(stdout, self.expected)

    def test_domain_file_from_a_pipe(self):
        # What /dev/stdin and <(...) name: a stream, read once (issue 43 item 15).
        read_end, write_end = os.pipe()
        with os.fdopen(write_end, "w") as writer:
            writer.write("".join(label + "\n" for label in LABELS))
        try:
            status, stdout, stderr = run_client(
                "--export", self.export, "--domain_file", "/dev/fd/%d" % read_end,
                "--input", self.input,
            )  # fmt: skip
        finally:
            os.close(read_end)
        self.assertEqual(status, 0, stderr)
        self.assertEqual(stdout, self.expected)

    def test_label_errors_name_the_stream(self):
        status, _, stderr = run_client(
            "--export", self.export, "--domain_file", "-", "--input", self.input,
            stdin="medical\n\n",
        )  # fmt: skip
        self.assertEqual(status, 2)
        self.assertEqual(stderr, "ldr-translate: error: <stdin>:2: empty domain label\n")

    def test_byte_order_mark_is_removed_with_a_note(self):
        # Issue 43 item 9: the mark would stay in the first token and change line 1.
        path = os.path.join(self._work_dir("bom"), "in.en")
        with open(path, "w", encoding="utf-8-sig") as f:
            f.write("".join(s + "\n" for s in SENTENCES))
        status, stdout, stderr = run_client(
            "--export", self.export, "--domain_file", self.labels, "--input", path
        )
        self.assertEqual(status, 0, stderr)
        self.assertEqual(stdout, self.expected)
        self.assertEqual(
            stderr.splitlines()[0],
            "ldr-translate: note: %s: removed the UTF-8 byte order mark at its start (not part "
            "of line 1)" % path,
        )

    def test_interrupted_leaves_no_output(self):
        directory = self._work_dir("interrupted")
        output = os.path.join(directory, "out.fr")
        with mock.patch.object(ct2_models.DomainModel, "translate", side_effect=KeyboardInterrupt):
            status, stdout, stderr = run_client(
                "--export", self.export, "--domain_file", self.labels,
                "--input", self.input, "--output", output,
            )  # fmt: skip
        self.assertEqual(status, 130)
        self.assertEqual(stderr, "ldr-translate: interrupted\n")
        self.assertEqual(stdout, "")
        self.assertEqual(os.listdir(directory), [])

    def test_model_changed_on_disk_is_refused(self):
        # Issue 43 item 8: another domain's weights must not answer as this domain.
        export = os.path.join(self._work_dir("changed"), "ct2")
        shutil.copytree(self.export, export)
        shutil.copyfile(
            os.path.join(export, "religious", "model.bin"),
            os.path.join(export, "medical", "model.bin"),
        )
        status, stdout, stderr = run_client(
            "--export", export, "--domain", "medical", stdin="the cell is here.\n"
        )
        self.assertEqual(status, 2, stderr)
        self.assertEqual(stdout, "")
        self.assertRegex(
            stderr,
            r"^ldr-translate: error: domain 'medical': medical/model\.bin: content differs from "
            r"manifest\.json \(sha256 [0-9a-f]{12}\.\.\., recorded [0-9a-f]{12}\.\.\.\): the "
            r"model directory was changed after export; export the model again\n$",
        )
        # The other domains still translate.
        status, _, stderr = run_client("--export", export, "--domain", "religious", stdin="a\n")
        self.assertEqual(status, 0, stderr)

    def _refused(self, group):
        """Each broken export of the group is refused by ldr-translate (one line, exit 2,
        nothing written) and by the Python Translator."""
        for case in test_manifest.CASES[group]:
            with self.subTest(case.name):
                directory = os.path.join(self.dir, group, case.name)
                export = test_manifest.broken_copy(self.export, directory, case)
                message = test_manifest.refusal(export, case)
                output = os.path.join(directory, "out.fr")
                status, stdout, stderr = run_client(
                    "--export", export, "--domain", "medical", "--output", output,
                    stdin="the cell is here.\n",
                )  # fmt: skip
                self.assertEqual(status, 2, stderr)
                self.assertRegex(stderr, "^ldr-translate: error: %s\n\\Z" % message)
                self.assertEqual(stdout, "")
                self.assertFalse(os.path.exists(output))
                with self.assertRaisesRegex(UserError, "^%s\\Z" % message):
                    Translator(export)

    def test_manifest_without_hashes_is_refused(self):
        self._refused("hashes")

    def test_model_directory_outside_the_export_is_refused(self):
        self._refused("outside")

    def test_invalid_manifest_says_what_is_wrong(self):
        self._refused("invalid")

    def test_unknown_manifest_version_is_refused(self):
        self._refused("version")

    def test_translator_gives_the_client_output(self):
        # Issue 44 item 5: plain text in, plain text out, the same as ldr-translate.
        translator = Translator(self.export)
        self.assertEqual(translator.domains, ["medical", "religious", "software", "generic"])
        self.assertEqual(
            translator.translate(SENTENCES, domains=LABELS), self.expected.splitlines()
        )
        self.assertEqual(
            translator.translate([SENTENCES[0], ""], domain="medical"),
            [self.expected.splitlines()[0], ""],
        )
        with self.assertRaisesRegex(UserError, r"^domain: unknown domain label 'legal'"):
            translator.translate(SENTENCES, domain="legal")
        with self.assertRaisesRegex(UserError, r"^domains\[1\]: unknown domain label 'x'"):
            translator.translate(SENTENCES[:2], domains=["medical", "x"])
        with self.assertRaises(TypeError):
            translator.translate("one sentence")

    def test_serving_modules_without_tensorflow(self):
        # Issue 44 item 1: the serving runtime has no TensorFlow nor OpenNMT-tf.
        code = """
        import sys
        import ldr_opennmt
        from ldr_opennmt.serving import backends, ct2_client, ct2_models, server, translator
        from ldr_opennmt.cli import serve, translate
        assert not ldr_opennmt.TRAINING_STACK
        print(translator.Translator(sys.argv[1]).translate(["the cell is here."], "medical")[0])
        sys.stdout.flush()
        sys.argv[1:2] = []
        try:
            translate.main(sys.argv[1:])
        finally:
            blocked = [m for m in sys.modules if m.split(".")[0] in ("tensorflow", "opennmt")]
            assert not blocked, blocked
        """
        status, stdout, stderr = run_without_tensorflow(
            code, self.export, "--export", self.export, "--domain_file", self.labels,
            "--input", self.input,
        )  # fmt: skip
        self.assertEqual(status, 0, stderr)
        self.assertEqual(stdout, self.expected.splitlines()[0] + "\n" + self.expected)
        # A SavedModel needs the training environment: said in one line.
        saved = self._work_dir("saved")
        open(os.path.join(saved, "saved_model.pb"), "w").close()
        status, stdout, stderr = run_without_tensorflow(
            "from ldr_opennmt.cli import translate\ntranslate.main()\n",
            "--export", saved, "--domain", "generic", stdin="a\n",
        )  # fmt: skip
        self.assertEqual(status, 2, stderr)
        self.assertEqual(len(stderr.splitlines()), 1, stderr)
        self.assertRegex(
            stderr,
            r"^ldr-translate: error: --export: .*saved: not an ldr-export ctranslate2 "
            r"directory, and a SavedModel needs the training environment \(TensorFlow is not "
            r"installed here",
        )

    def test_manifest_paths_are_relative(self):
        with open(os.path.join(self.export, "manifest.json")) as f:
            text = f.read()
        self.assertNotIn(os.path.dirname(self.export), text)  # Where it was built.
        manifest = json.loads(text)
        self.assertEqual(manifest["checkpoint"]["name"], "ckpt-1")
        self.assertEqual(
            manifest["tokenizers"], {"source": "configuration", "target": "configuration"}
        )


if __name__ == "__main__":
    tf.test.main()
