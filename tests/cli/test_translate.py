"""``ldr-translate``'s checks of its paths, made before any export is opened: an output that
is one of its inputs (issue 43 item 1), for a CTranslate2 directory and a SavedModel alike."""

import json
import os
import shutil
import tempfile

from absl.testing import parameterized

from ldr_opennmt.serving import manifest
from tests.serving.fixtures import run_client

SOURCE = "the cell is here .\nthe lord is here .\n"
LABELS = "medical\nreligious\n"


def _fake_exports(directory):
    """An ``ldr-export ctranslate2`` directory and a SavedModel directory, both never loaded
    (the paths are refused before)."""
    ct2 = os.path.join(directory, "ct2")
    os.makedirs(ct2)
    with open(os.path.join(ct2, manifest.MANIFEST), "w") as f:
        json.dump({"format": manifest.FORMAT, "domains": {"generic": "generic"}}, f)
    saved = os.path.join(directory, "saved")
    os.makedirs(os.path.join(saved, "assets.extra"))
    open(os.path.join(saved, "saved_model.pb"), "w").close()
    open(os.path.join(saved, "assets.extra", "domains.txt"), "w").close()
    return {"ct2": ct2, "saved": saved}


class OutputIsInputTest(parameterized.TestCase):
    def setUp(self):
        super().setUp()
        self.dir = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.dir)
        self.exports = _fake_exports(self.dir)
        self.source = os.path.join(self.dir, "in.en")
        self.labels = os.path.join(self.dir, "in.domain")
        with open(self.source, "w") as f:
            f.write(SOURCE)
        with open(self.labels, "w") as f:
            f.write(LABELS)

    def _check_refused(self, status, stdout, stderr, message):
        self.assertEqual(status, 2, stderr)
        self.assertEqual(stdout, "")
        self.assertEqual(len(stderr.splitlines()), 1, stderr)
        self.assertRegex(stderr, "^ldr-translate: error: " + message)
        with open(self.source) as f:
            self.assertEqual(f.read(), SOURCE)
        with open(self.labels) as f:
            self.assertEqual(f.read(), LABELS)
        self.assertEqual(sorted(os.listdir(self.dir)), ["ct2", "in.domain", "in.en", "saved"])

    @parameterized.parameters("ct2", "saved")
    def test_output_is_the_input(self, kind):
        status, stdout, stderr = run_client(
            "--export", self.exports[kind], "--domain", "generic",
            "--input", self.source, "--output", self.source,
        )  # fmt: skip
        self._check_refused(status, stdout, stderr, r"--output: .*in\.en is also --input")

    @parameterized.parameters("ct2", "saved")
    def test_output_is_the_domain_file(self, kind):
        status, stdout, stderr = run_client(
            "--export", self.exports[kind], "--domain_file", self.labels,
            "--input", self.source, "--output", self.labels,
        )  # fmt: skip
        self._check_refused(status, stdout, stderr, r"--output: .*in\.domain is also --domain_file")

    @parameterized.parameters("ct2", "saved")
    def test_output_is_a_hard_link_to_the_input(self, kind):
        link = os.path.join(self.dir, "link.en")
        os.link(self.source, link)
        self.addCleanup(os.remove, link)
        status, stdout, stderr = run_client(
            "--export", self.exports[kind], "--domain", "generic",
            "--input", self.source, "--output", link,
        )  # fmt: skip
        self.assertEqual(status, 2, stderr)
        self.assertIn("link.en is also --input", stderr)
        with open(self.source) as f:
            self.assertEqual(f.read(), SOURCE)

    def test_output_through_another_path_to_the_input(self):
        other = os.path.join(self.dir, "sub", "..", "in.en")
        os.makedirs(os.path.join(self.dir, "sub"))
        status, _, stderr = run_client(
            "--export", self.exports["ct2"], "--domain", "generic",
            "--input", self.source, "--output", other,
        )  # fmt: skip
        self.assertEqual(status, 2, stderr)
        self.assertIn("is also --input", stderr)

    def test_labels_and_input_both_from_standard_input(self):
        status, _, stderr = run_client(
            "--export", self.exports["ct2"], "--domain_file", "-", stdin=SOURCE
        )
        self.assertEqual(status, 2, stderr)
        self.assertRegex(stderr, r"^ldr-translate: error: --domain_file -: standard input is")

    def test_labels_from_dev_stdin_when_the_input_is_standard_input(self):
        status, _, stderr = run_client(
            "--export", self.exports["ct2"], "--domain_file", "/dev/stdin", stdin=SOURCE
        )
        self.assertEqual(status, 2, stderr)
        self.assertRegex(
            stderr, r"^ldr-translate: error: --domain_file /dev/stdin: standard input is"
        )
