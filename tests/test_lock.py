"""requirements.lock (Python 3.11) and requirements-py312.lock (Python 3.12, with opennmt-tf in
requirements-py312-nodeps.lock): the exact, hash-pinned sets of distributions run/setup_env.sh
installs, checked for the stack this Python runs."""

import ast
import importlib.metadata
import os
import re
import sys
import sysconfig

import tensorflow as tf
from packaging.markers import Marker

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PY312 = sys.version_info[:2] >= (3, 12)
LOCK = os.path.join(ROOT, "requirements-py312.lock" if PY312 else "requirements.lock")
#: What Python 3.12 installs without dependencies (opennmt-tf: its metadata asks for
#: tensorflow-addons, which has no wheel there).
NODEPS_LOCK = os.path.join(ROOT, "requirements-py312-nodeps.lock")


def normalize(name):
    """A distribution name as PEP 503 compares them."""
    return re.sub(r"[-_.]+", "-", name).lower()


def parse_lock(path):
    """``{name: (version, [sha256, ...])}`` of a pip-compile lock file.

    Raises:
      AssertionError: on an entry that is not pinned with ``==``.
    """
    with open(path, encoding="utf-8") as f:
        text = f.read().replace("\\\n", " ")  # Join continued lines.
    entries = {}
    for line in text.splitlines():
        line = line.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        requirement, *options = line.split()
        match = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^;\s]+)$", requirement)
        if match is None:
            raise AssertionError("%s: not pinned with ==: %s" % (path, line))
        hashes = [o[len("--hash=sha256:") :] for o in options if o.startswith("--hash=sha256:")]
        entries[normalize(match.group(1))] = (match.group(2), hashes)
    return entries


def installed_distributions():
    """``{name: version}`` of the distributions of this environment's site-packages
    (not of other ``sys.path`` entries, such as the repository's own ``*.egg-info``)."""
    paths = sorted({sysconfig.get_paths()[key] for key in ("purelib", "platlib")})
    return {
        normalize(dist.metadata["Name"]): dist.version
        for dist in importlib.metadata.distributions(path=paths)
    }


def setup_pins():
    """``{name: version}`` of setup.py's install_requires and extras (all pinned) that apply to
    this Python (their environment markers)."""
    with open(os.path.join(ROOT, "setup.py"), encoding="utf-8") as f:
        tree = ast.parse(f.read())
    call = next(
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "setup"
    )
    keywords = {
        k.arg: ast.literal_eval(k.value)
        for k in call.keywords
        if k.arg
        in (
            "install_requires",
            "extras_require",
        )
    }
    requirements = list(keywords["install_requires"])
    for extra in keywords.get("extras_require", {}).values():
        requirements += extra
    pins = {}
    for requirement in requirements:
        requirement, _, marker = requirement.partition(";")
        if marker and not Marker(marker).evaluate():
            continue
        name, sep, version = requirement.strip().partition("==")
        assert sep, "setup.py: %s is not pinned with ==" % requirement
        pins[normalize(name)] = version
    return pins


def locked():
    """Everything run/setup_env.sh installs on this stack: ``{name: (version, hashes)}``."""
    entries = parse_lock(LOCK)
    if PY312:
        entries.update(parse_lock(NODEPS_LOCK))
    return entries


class LockTest(tf.test.TestCase):
    def test_every_entry_is_pinned_with_hashes(self):
        entries = parse_lock(LOCK)
        self.assertGreater(len(entries), 50)
        for name, (version, hashes) in entries.items():
            self.assertTrue(hashes, "%s==%s has no --hash" % (name, version))
            for digest in hashes:
                self.assertRegex(digest, r"^[0-9a-f]{64}$", name)
        # pip itself is locked: setup_env.sh upgrades it to this version, hash-checked.
        self.assertIn("pip", entries)

    def test_the_locked_versions_are_installed(self):
        # Every locked distribution is installed at its locked version (pip and setuptools
        # included: pip-compile --allow-unsafe locks them, so a fresh .venv gets the
        # validated ones). Distributions outside the lock are allowed: a developer's own
        # tools in .venv are not the lock's business, and a dependency missing from the
        # lock fails the installation itself (pip --require-hashes refuses it).
        installed = installed_distributions()
        wrong = {
            name: (version, installed.get(name, "not installed"))
            for name, (version, _) in locked().items()
            if installed.get(name) != version
        }
        self.assertEqual(
            wrong,
            {},
            "{name: (locked, installed)}: reinstall with `source run/setup_env.sh`, or run"
            " `bash run/lock.sh` after changing setup.py",
        )

    def test_setup_pins_match_the_lock(self):
        locked = parse_lock(LOCK)
        for name, version in setup_pins().items():
            self.assertIn(name, locked, "setup.py requires %s: run bash run/lock.sh" % name)
            self.assertEqual(locked[name][0], version, "%s: setup.py and the lock differ" % name)
        for name in ("pytest", "pytest-xdist", "parameterized", "hypothesis"):
            self.assertIn(name, locked)

    def test_setup_env_installs_from_the_lock(self):
        with open(os.path.join(ROOT, "run", "setup_env.sh"), encoding="utf-8") as f:
            script = f.read()
        self.assertIn('--require-hashes -r "$ROOT/$_ldr_lock"', script)
        self.assertIn("_ldr_lock=requirements-py312.lock", script)
        self.assertIn(
            '--require-hashes --no-deps -r "$ROOT/requirements-py312-nodeps.lock"', script
        )
        self.assertRegex(script, r"--no-deps --no-build-isolation -e \"\$ROOT\"")
        self.assertNotIn("--upgrade", script)
        # Reinstalls when the lock changes, not only setup.py.
        self.assertIn('"$ROOT/$_ldr_lock" -nt "$STAMP"', script)


if __name__ == "__main__":
    tf.test.main()
