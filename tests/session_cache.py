"""Tiny models and exports built once per test session and shared by every test file and
every pytest-xdist worker.

A test file that needs, say, a tiny LDR exported to CTranslate2 asks :func:`directory` for it
by a key naming what builds it; the first asker builds it (under a file lock, so that the
other worker waits instead of building it again) and every later one, in this process or
another, gets the same directory. The cache lives under pytest's base temporary directory of
the session (the parent of each worker's own), so a new session builds afresh and pytest
removes old sessions' folders as it removes its other temporary folders.

What is shared is read-only by convention: a test that changes an export (replaces a file,
deletes a domain) copies it first (``shutil.copytree``).
"""

import fcntl
import os
import shutil
import tempfile

_ROOT = []


def set_root(path):
    """Sets the folder of this session's cache (``tests/conftest.py`` does, from pytest's
    temporary directory factory)."""
    os.makedirs(path, exist_ok=True)
    _ROOT[:] = [path]


def root():
    """The folder of this session's cache (a temporary folder of this process when the tests
    run outside pytest, e.g. by ``python -m unittest``)."""
    if not _ROOT:
        set_root(tempfile.mkdtemp(prefix="ldr-test-cache-"))
    return _ROOT[0]


def directory(key, build):
    """The directory :obj:`build` fills, built once per session.

    Args:
      key: A name for what :obj:`build` makes, unique to its recipe (e.g.
        ``"ct2-ldr_transformer-seed5"``): a folder name.
      build: ``build(path)``, which fills the existing empty folder ``path``. It must write
        everything it makes under ``path``: absolute paths inside the result stay valid.

    Returns:
      The path of the filled folder. A build that raised leaves nothing marked done: the
      next asker builds again (and fails the same way, in its own test).
    """
    path = os.path.join(root(), key)
    with open(path + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not os.path.exists(path + ".done"):
            shutil.rmtree(path, ignore_errors=True)
            os.makedirs(path)
            build(path)
            with open(path + ".done", "w"):
                pass
    return path
