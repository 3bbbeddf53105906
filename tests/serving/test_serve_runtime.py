"""The serving runtime (issue 44 item 1): an export made here (Python 3.11, CTranslate2 3.24)
served and translated from ``.venv-serve`` (Python 3.12+, CTranslate2 4, no TensorFlow),
with the translations of CTranslate2 3.24.

``run/setup_serve.sh`` creates ``.venv-serve`` once (about a minute) and reuses it while
``requirements-serve.lock`` and ``setup.py`` are unchanged.
"""

import json
import os
import shutil
import subprocess
import time
import urllib.request

import pytest
import tensorflow as tf

from tests import builds, helpers
from tests.serving import fixtures
from tests.serving.fixtures import run_client

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SENTENCES, LABELS = fixtures.CLIENT_SENTENCES, fixtures.CLIENT_LABELS


def serve_runtime():
    """The ``bin`` folder of ``.venv-serve``, created or reused by ``run/setup_serve.sh``."""
    venv = os.environ.get("LDR_SERVE_VENV", os.path.join(ROOT, ".venv-serve"))
    result = subprocess.run(
        ["bash", "-c", "source run/setup_serve.sh >&2 && command -v ldr-serve"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        env=dict(os.environ, LDR_SERVE_VENV=venv),
    )
    assert result.returncode == 0, result.stderr
    bin_dir = os.path.join(venv, "bin")
    assert result.stdout.strip() == os.path.join(bin_dir, "ldr-serve"), result.stdout
    return bin_dir


@pytest.mark.e2e
class ServeRuntimeTest(helpers.SharedDirTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.bin = serve_runtime()
        cls.export = builds.tiny_ldr_ct2()  # Shared: read only.
        cls.input, cls.labels = fixtures.client_inputs(cls.dir)
        # CTranslate2 3.24, in the training environment.
        argv = ["--export", cls.export, "--domain_file", cls.labels, "--input", cls.input]
        argv += ["--max_decoding_length", str(fixtures.MAX_LENGTH)]
        status, cls.expected, stderr = run_client(*argv)
        assert status == 0, stderr
        cls.argv = argv

    def _run(self, name, *args, stdin=""):
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
        return subprocess.run(
            [os.path.join(self.bin, name), *args],
            input=stdin,
            capture_output=True,
            text=True,
            check=False,
            cwd=self.dir,
            env=env,
        )

    def test_the_runtime_has_no_tensorflow(self):
        code = (
            "import importlib.util, ctranslate2, sys\n"
            "print(sys.version_info >= (3, 12), ctranslate2.__version__.split('.')[0],\n"
            "      [m for m in ('tensorflow', 'opennmt') if importlib.util.find_spec(m)])\n"
        )
        result = self._run("python", "-c", code)
        self.assertEqual(result.stdout, "True 4 []\n", result.stderr)
        # Its commands: the serving ones only (issue 55 item 5: ldr-main, ldr-data... died
        # there with a ModuleNotFoundError traceback, first on PATH).
        commands = sorted(name for name in os.listdir(self.bin) if name.startswith("ldr-"))
        self.assertEqual(commands, ["ldr-serve", "ldr-translate"])

    def test_translate_gives_the_translations_of_ctranslate2_3(self):
        result = self._run("ldr-translate", *self.argv)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(result.stdout, self.expected)

    def test_saved_model_is_said_to_need_the_training_environment(self):
        saved = os.path.join(self.dir, "saved")
        os.makedirs(saved)
        open(os.path.join(saved, "saved_model.pb"), "w").close()
        result = self._run("ldr-translate", "--export", saved, "--domain", "generic", stdin="a\n")
        self.assertEqual(result.returncode, 2, result.stderr)
        self.assertEqual(len(result.stderr.splitlines()), 1, result.stderr)
        self.assertIn("a SavedModel needs the training environment", result.stderr)
        result = self._run("ldr-serve", "--model_dir", saved, "--port", str(fixtures.free_port()))
        self.assertEqual(result.returncode, 2, result.stderr)
        self.assertRegex(
            result.stderr,
            r"^ldr-serve: error: --model_dir: a SavedModel needs the training environment "
            r"\(TensorFlow is not installed here: [^\n]*\n$",
        )
        # So does the domain classifier (was: a ModuleNotFoundError traceback).
        result = self._run(
            "ldr-serve",
            "--model_dir",
            self.export,
            "--classifier",
            saved,
            "--port",
            str(fixtures.free_port()),
        )
        self.assertEqual(result.returncode, 2, result.stderr)
        self.assertRegex(
            result.stderr,
            r"^ldr-serve: error: --classifier: the domain classifier is a SavedModel, which "
            r"needs the training environment \(TensorFlow is not installed here: [^\n]*\n$",
        )

    def test_serve_gives_the_translations_of_ctranslate2_3(self):
        answer = self._serve(self.export, {"sentences": SENTENCES, "domains": LABELS})
        self.assertEqual([t["text"] for t in answer["translations"]], self.expected.splitlines())

    def test_serve_routes_by_the_guard_and_gives_a_confidence(self):
        # The export's guard and confidence, applied without TensorFlow nor scikit-learn.
        export, _ = builds.tiny_ldr_ct2_quality()
        sentences = ["the patient is here.", "click the big file.", "the temple."]
        answer = self._serve(export, {"sentences": sentences})
        translations = answer["translations"]
        self.assertEqual(
            [(t["domain"], t["domain_choice"]) for t in translations],
            [("medical", "guard"), ("software", "guard"), ("religious", "guard")],
        )
        for translation in translations:
            self.assertTrue(0 <= translation["confidence"] <= 1, translation)
            self.assertIsInstance(translation["low_confidence"], bool)

    def test_serve_applies_a_glossary(self):
        # A copy of the export that says its model was trained with terminology.
        export = os.path.join(self.dir, "terminology")
        shutil.copytree(builds.tiny_ldr_ct2_quality()[0], export)
        path = os.path.join(export, "manifest.json")
        with open(path) as f:
            manifest = json.load(f)
        with open(path, "w") as f:
            json.dump(dict(manifest, terminology=True), f)
        answer = self._serve(
            export,
            {
                "sentences": ["the cell is here.", "no term."],
                "domain": "medical",
                "glossary": {"cell": "cellule"},
            },
        )
        self.assertEqual([t["terms"] for t in answer["translations"]], [[["cell", "cellule"]], []])

    def _serve(self, export, body):
        """``ldr-serve`` of .venv-serve on :obj:`export`: its answer to :obj:`body`."""
        port = fixtures.free_port()
        command = [os.path.join(self.bin, "ldr-serve"), "--model_dir", export]
        command += ["--port", str(port), "--log_level", "warning", "--intra_threads", "1"]
        command += ["--max_decoding_length", str(fixtures.MAX_LENGTH)]
        process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=self.dir
        )
        self.addCleanup(process.stdout.close)
        self.addCleanup(process.wait)
        self.addCleanup(process.terminate)
        url = "http://127.0.0.1:%d" % port
        deadline = time.monotonic() + 120
        while True:
            self.assertIsNone(process.poll(), "ldr-serve exited")
            try:
                with urllib.request.urlopen(url + "/health", timeout=10) as response:
                    health = json.loads(response.read())
                break
            except OSError:
                self.assertLess(time.monotonic(), deadline, "ldr-serve did not start")
                time.sleep(0.3)
        self.assertEqual(health["status"], "ok")
        request = urllib.request.Request(
            url + "/translate",
            data=json.dumps(body).encode("utf-8"),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=60) as response:
            return json.loads(response.read())


if __name__ == "__main__":
    tf.test.main()
