"""Where TensorFlow Addons has no wheel (Python 3.12 and later), ``import tensorflow_addons``
finds the package's own replacement (:mod:`ldr_opennmt.upstream.addons`).

OpenNMT-tf 2.32 imports ``tensorflow_addons`` in nine modules, and tensorflow-addons (archived
in 2024) has no wheel for Python 3.12, the first Python whose TensorFlow (2.16 and later) it
would have to run on. On the Python 3.12 stack, ``run/setup_env.sh`` writes a ``.pth`` file
into the virtual environment (``python ldr_opennmt/upstream/addons_hook.py --write-pth``)
whose one line runs this file at every start of its Python, before ``onmt-main``, the
package's commands or the tests import anything. It runs the file by its path, as module
``ldr_opennmt_addons_hook``, without importing the package: the package is imported later,
from wherever the process finds it (a clean clone's tests find their own copy).

* it sets ``TF_USE_LEGACY_KERAS=1`` (unless the environment already sets it), so that
  ``tf.keras`` is Keras 2 (the ``tf-keras`` package): OpenNMT-tf uses
  ``tf.keras.optimizers.legacy``, which Keras 3 does not have;
* it puts an importer in :data:`sys.meta_path` that answers ``tensorflow_addons`` (and its
  submodules) with :mod:`ldr_opennmt.upstream.addons`, only when no installed
  ``tensorflow_addons`` is found on the path: it never shadows the real package, and the
  ``.pth`` file is written only into a Python 3.12 environment anyway. It stands first, so that
  ``tensorflow_addons.optimizers`` is the replacement's module itself, not a second copy of it
  loaded from the replacement's folder.

* it keeps ``TF_CPP_MIN_LOG_LEVEL`` meaning what it says: TensorFlow 2.21 prints its start-up
  lines (absl's "All log messages before absl::InitializeLog()", oneDNN's and the CUDA stub's
  ``I`` lines) while it loads, before any setting of the level applies. While ``tensorflow``
  imports, the process's standard error goes to a temporary file; afterwards every line is
  written back but the start-up lines that the level hides (``I`` lines from level 1, ``W``
  lines from level 2; errors always). Written here: TensorFlow has no setting for it.

This module imports nothing but the standard library: it runs at the start of every Python of
that environment (pip included).
"""

import contextlib
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import re
import sys
import tempfile
import warnings

#: The name answered, and the replacement's module of each of its modules that OpenNMT-tf and
#: the package import.
ALIASES = {
    "tensorflow_addons": "ldr_opennmt.upstream.addons",
    "tensorflow_addons.seq2seq": "ldr_opennmt.upstream.addons.seq2seq",
    "tensorflow_addons.optimizers": "ldr_opennmt.upstream.addons.optimizers",
    "tensorflow_addons.optimizers.weight_decay_optimizers": (
        "ldr_opennmt.upstream.addons.optimizers"
    ),
    "tensorflow_addons.rnn": "ldr_opennmt.upstream.addons.missing",
    "tensorflow_addons.text": "ldr_opennmt.upstream.addons.missing",
}


def _installed(name):
    """Whether the path finder of this process finds :obj:`name`."""
    path_finder = importlib.machinery.PathFinder
    for finder in sys.meta_path:
        if isinstance(finder, type) and issubclass(finder, importlib.machinery.PathFinder):
            path_finder = finder
            break
    return path_finder.find_spec(name) is not None


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Answers the names of :data:`ALIASES` with the replacement's modules."""

    # How the importer is recognized whichever copy of this file made it (the .pth file's or
    # the package's).
    ldr_opennmt_addons = True

    def find_spec(self, name, path=None, target=None):
        if name not in ALIASES:
            return None
        if name == "tensorflow_addons":
            if _installed(name):
                return None  # The real package.
        elif not active():
            return None
        return importlib.util.spec_from_loader(name, self, is_package=True)

    def create_module(self, spec):
        return importlib.import_module(ALIASES[spec.name])

    def exec_module(self, module):
        pass  # The replacement's module ran when it was imported.


#: An absl log line (``I1207 22:24:31.000000 123 file.cc:12] ...``): its level letter.
_ABSL_LINE = re.compile(r"^([IWEF])\d{4} ")
#: TensorFlow 2.21's error line on a machine without an NVIDIA driver (shown from level 0).
_NO_DRIVER = "failed call to cuInit"
#: What absl prints once before its first line.
_ABSL_PREAMBLE = "WARNING: All log messages before absl::InitializeLog() is called"


def _hidden(line, level):
    """Whether TF_CPP_MIN_LOG_LEVEL :obj:`level` hides this start-up line."""
    if line.startswith(_ABSL_PREAMBLE) or (_ABSL_LINE.match(line) and _NO_DRIVER in line):
        return level >= 1
    match = _ABSL_LINE.match(line)
    return (
        match is not None and "IW".find(match.group(1)) >= 0 and level > "IW".find(match.group(1))
    )


@contextlib.contextmanager
def _start_up_lines_filtered():
    try:
        level = int(os.environ.get("TF_CPP_MIN_LOG_LEVEL", "0") or 0)
    except ValueError:
        level = 0
    if level < 1:
        yield
        return
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as capture:
        os.dup2(capture.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            capture.seek(0)
            for line in capture.read().decode("utf-8", "replace").splitlines(True):
                if not _hidden(line, level):
                    sys.stderr.write(line)
            sys.stderr.flush()


class _QuietTensorFlow(importlib.abc.MetaPathFinder):
    """Runs the import of ``tensorflow`` inside :func:`_start_up_lines_filtered`."""

    ldr_opennmt_quiet = True

    def find_spec(self, name, path=None, target=None):
        if name != "tensorflow":
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return None
        exec_module = spec.loader.exec_module

        def quiet_exec_module(module):
            with _start_up_lines_filtered():
                exec_module(module)
                # The devices are found now, inside the filter: on a machine without an
                # NVIDIA driver TensorFlow 2.21 logs its failed cuInit as an error (2.13 gave
                # an I line), which the package's own GPU check says better when GPUs are
                # asked for (ldr_opennmt/upstream/patches.py).
                module.config.list_physical_devices("GPU")

        spec.loader.exec_module = quiet_exec_module  # This module's loader only.
        return spec


def install():
    """Sets the Keras 2 switch and puts the importer first, once per process."""
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
    # OpenNMT-tf 2.32 warns at import that it supports TensorFlow < 2.14: on this stack it is
    # run on 2.21 on purpose, its results compared with 2.13's (docs/installation.md).
    warnings.filterwarnings("ignore", message="OpenNMT-tf supports TensorFlow versions")
    if not _finders():
        sys.meta_path.insert(0, _Alias())
    if not any(getattr(finder, "ldr_opennmt_quiet", False) for finder in sys.meta_path):
        sys.meta_path.insert(0, _QuietTensorFlow())


def _finders():
    return [finder for finder in sys.meta_path if getattr(finder, "ldr_opennmt_addons", False)]


def active():
    """Whether ``tensorflow_addons`` is (or would be) the package's replacement here."""
    module = sys.modules.get("tensorflow_addons")
    if module is not None:
        return module.__name__ == ALIASES["tensorflow_addons"]
    finders = _finders()
    return bool(finders) and finders[0].find_spec("tensorflow_addons") is not None


#: What the ``.pth`` file's line runs: this file, by its path, and the importer installed (a
#: file gone since, with its checkout, costs nothing).
PTH_CODE = (
    "try:\n"
    " import importlib.util as u\n"
    " s = u.spec_from_file_location('ldr_opennmt_addons_hook', %r)\n"
    " m = u.module_from_spec(s)\n"
    " s.loader.exec_module(m)\n"
    " m.install()\n"
    "except OSError:\n"
    " pass\n"
)

#: The ``.pth`` file's name in the environment's site-packages.
PTH_NAME = "ldr-opennmt-addons.pth"


def write_pth(site_packages):
    """Writes :data:`PTH_NAME` into :obj:`site_packages`, naming this file; returns its path."""
    path = os.path.join(site_packages, PTH_NAME)
    with open(path, "w", encoding="utf-8") as pth:
        # A .pth line is run when it starts with "import"; one line, so the code is exec'd.
        pth.write("import sys; exec(%r)\n" % (PTH_CODE % os.path.abspath(__file__)))
    return path


if __name__ == "__main__":
    if sys.argv[1:] != ["--write-pth"]:
        sys.exit("usage: python %s --write-pth" % sys.argv[0])
    import sysconfig

    print(write_pth(sysconfig.get_paths()["purelib"]))
