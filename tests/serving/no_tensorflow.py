"""Running code where TensorFlow and OpenNMT-tf cannot be imported (what the serving runtime,
``.venv-serve``, is), in a fresh interpreter of this environment."""

import os
import subprocess
import sys
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

#: Run first in a subprocess: TensorFlow and OpenNMT-tf cannot be imported.
BLOCKER = textwrap.dedent("""
    import sys

    class _Blocker:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in ("tensorflow", "opennmt", "keras", "tensorflow_addons"):
                raise ModuleNotFoundError("No module named %r (blocked)" % name, name=name)
            return None

    sys.meta_path.insert(0, _Blocker())
    """)


def run_without_tensorflow(code, *args, stdin="", env=None):
    """Runs :obj:`code` after :data:`BLOCKER` in a fresh interpreter: (status, out, err)."""
    result = subprocess.run(
        [sys.executable, "-c", BLOCKER + textwrap.dedent(code), *args],
        input=stdin,
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
        env=env,
    )
    return result.returncode, result.stdout, result.stderr
