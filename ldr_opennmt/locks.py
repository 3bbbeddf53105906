"""One training at a time per model directory.

Two trainings on one ``model_dir`` interleave their checkpoints and overwrite each
other's ``model_description.py``, ``domains.json`` and ``finetune.json``: one of them
ends with the other's files beside its own checkpoints. Training takes an exclusive
``fcntl.flock`` on ``model_dir/.ldr-opennmt.lock`` (:func:`model_dir_lock`); a second
training, or a fine-tuning into that directory, is refused in one line that names the
process holding it. The operating system releases the lock when its process ends,
``kill -9`` included, so no stale lock is ever left to clean up (the file itself stays:
removing it would let two processes lock two different files of the same name).

Reading commands (``infer``, ``export``, ``eval``, ``ldr-eval``) take no lock.

Locks are re-entrant within a process (``ldr-main`` takes the lock before it copies
the model definition; ``Runner.train`` and OpenNMT-tf's ``Runner.train`` take it again).
"""

import contextlib
import fcntl
import os
import sys
import threading

from ldr_opennmt.errors import UserError

LOCK_FILE = ".ldr-opennmt.lock"

_HELD = {}  # realpath of model_dir -> [file descriptor, depth]
_MUTEX = threading.Lock()


def _holder(fd):
    """What the lock file says about the process that holds it."""
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        text = os.read(fd, 4096).decode("utf-8", "replace").strip()
    except OSError:
        text = ""
    return " ".join(text.split()) or "a process that wrote nothing yet"


def acquire(model_dir, what="training"):
    """Takes the training lock of :obj:`model_dir` (created if missing).

    Returns:
      The key to give to :func:`release`.

    Raises:
      UserError: if another process holds it, naming that process.
    """
    created = not os.path.exists(model_dir)
    os.makedirs(model_dir, exist_ok=True)
    key = os.path.realpath(model_dir)
    with _MUTEX:
        if key in _HELD:
            _HELD[key][1] += 1
            return key
        path = os.path.join(key, LOCK_FILE)
        try:
            # O_NOFOLLOW: a link planted under the lock's name is not followed.
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
        except OSError as e:
            raise UserError("%s: cannot open the training lock: %s" % (path, e.strerror)) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            os.close(fd)
            raise UserError(
                "%s: another training uses this model_dir (%s): wait for it to end, or %s in "
                "another model_dir" % (model_dir, holder, what)
            ) from None
        os.ftruncate(fd, 0)
        os.lseek(fd, 0, os.SEEK_SET)
        os.write(fd, ("pid %d: %s\n" % (os.getpid(), " ".join(sys.argv))).encode("utf-8"))
        _HELD[key] = [fd, 1, created]
        return key


def release(key, failed=False):
    """Releases a lock taken by :func:`acquire` (the last release unlocks it).

    Args:
      key: What :func:`acquire` returned.
      failed: The locked work failed: a ``model_dir`` that :func:`acquire` created and
        that holds nothing but the lock file is removed again (a refused training
        leaves nothing behind).
    """
    with _MUTEX:
        held = _HELD.get(key)
        if held is None:
            return
        held[1] -= 1
        if held[1] == 0:
            del _HELD[key]
            fd, _, created = held
            if failed and created:
                try:
                    if os.listdir(key) == [LOCK_FILE]:
                        os.remove(os.path.join(key, LOCK_FILE))  # Still locked: no race.
                        os.rmdir(key)
                except OSError:
                    pass  # Left as it is: never worse than not cleaning up.
            os.close(fd)  # Closing the descriptor releases the flock.


@contextlib.contextmanager
def model_dir_lock(model_dir, what="training"):
    """Holds the training lock of :obj:`model_dir` for the duration of the block.

    Raises:
      UserError: if another process holds it.
    """
    key = acquire(model_dir, what=what)
    try:
        yield
    except BaseException:
        release(key, failed=True)
        raise
    release(key)


def is_held(model_dir):
    """Whether this process holds the lock of :obj:`model_dir`."""
    with _MUTEX:
        return os.path.realpath(model_dir) in _HELD
