"""Where a corpus build writes: never over its inputs, and beside the former corpus.

A build (:func:`ldr_opennmt.data.corpus.build`) writes every file into a staging directory
of its own inside the output directory (:func:`staging`, locked while it runs), then moves
them into place: a build that fails leaves the former corpus whole, and the staging
directory of a killed build is removed by the next (:func:`remove_abandoned_staging`). An
input inside the output directory is refused before anything is read
(:func:`check_inputs_outside`).
"""

import contextlib
import fcntl
import os
import shutil
import tempfile

from ldr_opennmt.errors import UserError

#: The prefix of a build's staging directory inside the output directory.
STAGING_PREFIX = ".build."
#: The lock file inside a staging directory (held while its build runs).
STAGING_LOCK = ".lock"


def check_inputs_outside(paths, out):
    """Refuses an input file that lies in the output directory a build writes.

    A build writes and, when rebuilding, replaces or removes files under ``out``: an input
    there (``--out C --corpus med=C/raw/train.med.en,...``) would be overwritten by what
    the build makes of it. Compared by resolved path (links followed) and by device and
    inode (a hard link to a file of ``out``).

    Args:
      paths: ``(where, path)`` of each local input (where: the option that gave it).
      out: The output directory, as given.

    Raises:
      UserError: ``PATH (WHERE): inside the output directory OUT: ...``.
    """
    root = os.path.realpath(out)
    inodes = {}
    if os.path.isdir(root):
        for directory, _, names in os.walk(root):
            for name in names:
                path = os.path.join(directory, name)
                try:
                    info = os.lstat(path)
                except OSError:
                    continue
                inodes[(info.st_dev, info.st_ino)] = path
    for where, path in paths:
        real = os.path.realpath(path)
        inside = real == root or real.startswith(root.rstrip(os.sep) + os.sep)
        linked = None
        try:
            info = os.stat(path)
            linked = inodes.get((info.st_dev, info.st_ino))
        except OSError:
            pass
        if inside or linked:
            raise UserError(
                "%s (%s): %s the output directory %s: the build would overwrite it; copy the"
                " input out of %s, or give another --out"
                % (
                    path,
                    where,
                    "inside" if inside else "a hard link to %s in" % linked,
                    out,
                    out,
                )
            )


@contextlib.contextmanager
def staging(root):
    """A staging directory of this build inside :obj:`root` (created exclusively, locked
    while the build runs); removed with what is left in it when the block ends, whether it
    failed or not (after :func:`_publish`, nothing is left)."""
    stage = tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=root)
    fd = os.open(os.path.join(stage, STAGING_LOCK), os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield stage
    finally:
        try:
            shutil.rmtree(stage, ignore_errors=True)  # Made by mkdtemp above: ours.
        finally:
            os.close(fd)


def remove_abandoned_staging(root, log):
    """Removes the staging directories of builds that were killed (their lock is free:
    the OS released it with the process); one still locked belongs to a running build,
    which is then refused."""
    for name in sorted(os.listdir(root)):
        path = os.path.join(root, name)
        if not name.startswith(STAGING_PREFIX) or os.path.islink(path) or not os.path.isdir(path):
            continue
        try:
            fd = os.open(os.path.join(path, STAGING_LOCK), os.O_RDWR | os.O_NOFOLLOW)
        except OSError:
            continue  # Not a staging directory of ours (no lock file): left alone.
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise UserError(
                    "%s: another ldr-data build is writing into this directory (%s): wait"
                    " for it to end" % (root, path)
                ) from None
            log("[data] removing %s (left by a build that was stopped)" % path)
            shutil.rmtree(path, ignore_errors=True)
        finally:
            os.close(fd)
