"""``run/setup_env.sh`` picks Python 3.12, else 3.11, says which stack in its first line, or
says in one line how to get one (issue 55 item 6; issue 78 item 1)."""

import os
import shutil
import stat
import subprocess
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SETUP = os.path.join(ROOT, "run", "setup_env.sh")

# A stand-in interpreter: answers the script's version checks and --version as Python VERSION
# would; "-m venv DIR" makes a venv whose python fails (nothing is installed).
FAKE_PYTHON = """#!/bin/sh
case "$1" in
  --version) echo "Python {version}" ;;
  -c) case "$2" in
        *"not in ((3, 11), (3, 12))"*) case "{version}" in 3.11.*|3.12.*) exit 0 ;; esac ;;
        *"!= (3, 12)"*) case "{version}" in 3.12.*) exit 0 ;; esac ;;
        *"!= (3, 11)"*) case "{version}" in 3.11.*) exit 0 ;; esac ;;
      esac
      exit 1 ;;
  -m) mkdir -p "$3/bin" && printf '#!/bin/sh\\nexit 1\\n' > "$3/bin/python" &&
      chmod +x "$3/bin/python" ;;
esac
"""


def _executable(path, text):
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)


class SetupEnvTest(unittest.TestCase):
    def setUp(self):
        import tempfile

        self.dir = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.dir, ignore_errors=True)
        self.bin = os.path.join(self.dir, "bin")
        os.makedirs(self.bin)
        # Only what the script needs before it installs: no Python 3.11, uv or pyenv.
        for tool in ("dirname",):
            os.symlink(subprocess.check_output(["which", tool], text=True).strip(),
                       os.path.join(self.bin, tool))  # fmt: skip
        _executable(os.path.join(self.bin, "python3"), FAKE_PYTHON.format(version="3.12.3"))
        self.venv = os.path.join(self.dir, "venv")

    def _run(self, **env):
        environment = {"PATH": self.bin, "HOME": self.dir, "LDR_VENV": self.venv}
        environment.update(env)
        return subprocess.run(
            ["/bin/bash", SETUP], env=environment, capture_output=True, text=True, timeout=60
        )

    def test_neither_3_12_nor_3_11_is_one_line_saying_how_to_get_one(self):
        _executable(os.path.join(self.bin, "python3"), FAKE_PYTHON.format(version="3.13.1"))
        result = self._run()
        self.assertEqual(result.returncode, 1, result.stderr)
        self.assertEqual(
            result.stderr,
            "[setup] training needs Python 3.12 or 3.11 (TensorFlow has no wheel of the versions"
            " used here for Python 3.13.1): install one (uv python install 3.12; pyenv install"
            " 3.12; or python3.12 from your distribution) and run again, or give"
            " PYTHON=/path/to/python3.12\n",
        )
        self.assertFalse(os.path.exists(self.venv))

    def test_a_python_given_that_is_neither_is_named(self):
        python = os.path.join(self.bin, "python3")
        _executable(python, FAKE_PYTHON.format(version="3.10.4"))
        result = self._run(PYTHON=python)
        self.assertEqual(result.returncode, 1, result.stderr)
        self.assertEqual(
            result.stderr,
            "[setup] PYTHON=%s is not Python 3.11 or 3.12 (Python 3.10.4): training needs one of"
            " them (TensorFlow 2.21 or 2.13); give PYTHON=/path/to/python3.12\n" % python,
        )
        self.assertFalse(os.path.exists(self.venv))

    def test_python_3_12_is_preferred_and_its_stack_named(self):
        _executable(os.path.join(self.bin, "python3.11"), FAKE_PYTHON.format(version="3.11.9"))
        _executable(os.path.join(self.bin, "python3.12"), FAKE_PYTHON.format(version="3.12.3"))
        result = self._run()
        self.assertEqual(
            result.stdout.splitlines()[0],
            "[setup] creating %s with python3.12 (Python 3.12.3): TensorFlow 2.21 with tf-keras;"
            " TensorFlow Addons replaced by the package's own" % self.venv,
        )
        # The stand-in venv's python fails: the script says so and stops (nothing installed).
        self.assertEqual(result.returncode, 1)
        self.assertIn("[setup] installation failed", result.stderr)

    def test_uv_python_3_11_is_used_when_python3_is_another_version(self):
        _executable(os.path.join(self.bin, "python3"), FAKE_PYTHON.format(version="3.13.1"))
        uv_python = os.path.join(self.dir, "uv-python", "python3.11")
        os.makedirs(os.path.dirname(uv_python))
        _executable(uv_python, FAKE_PYTHON.format(version="3.11.9"))
        _executable(
            os.path.join(self.bin, "uv"),
            '#!/bin/sh\n[ "$1 $2 $3" = "python find 3.11" ] && echo %s\n' % uv_python,
        )
        result = self._run()
        self.assertEqual(
            result.stdout.splitlines()[0],
            "[setup] creating %s with %s (Python 3.11.9): TensorFlow 2.13.1 with TensorFlow"
            " Addons 0.21" % (self.venv, uv_python),
        )
        self.assertEqual(result.returncode, 1)
        self.assertIn("[setup] installation failed", result.stderr)


if __name__ == "__main__":
    unittest.main()
