"""Small file helpers shared by the corpus builder, the evaluation and the commands.

Every output that a reader could mistake for a complete result is written through
:func:`atomic_output` (or :func:`write_lines_atomic`, :func:`atomic_directory`): it is
built under a fresh name in the destination's directory and renamed over the
destination only when complete. The temporary name is created exclusively
(``tempfile.mkstemp`` / ``mkdtemp``), never a predictable ``PATH.partial`` that a
planted symbolic link could redirect.
"""

import contextlib
import os
import shutil
import tempfile

from ldr_opennmt.errors import not_utf8_error


def read_lines(path):
    """The lines of a UTF-8 text file, without line ends (see :func:`decode_lines`).

    Raises:
      UserError: ``FILE:LINE: not UTF-8 (byte 0xNN at byte K of the line)``.
    """
    with open(path, "rb") as f:
        return decode_lines(f.read(), path)


def decode_lines(data, where):
    """Splits UTF-8 bytes into lines, without line ends.

    Lines end at ``\\n`` only (a ``\\r`` before it is dropped), as OpenNMT-tf's
    ``TextLineDataset`` reads the files it translates: ``str.splitlines`` would also cut
    at U+2028, U+0085 and other Unicode separators, and a sentence holding one would
    shift every later line against its translation.

    Args:
      data: The bytes.
      where: What they come from (a file name, ``<stdin>``), for the error.

    Raises:
      UserError: ``WHERE:LINE: not UTF-8 (byte 0xNN at byte K of the line)``.
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise not_utf8_error(where, data, 1, e) from None
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def write_lines(path, lines):
    """Writes lines to a UTF-8 text file."""
    with open(path, "w", encoding="utf-8") as f:
        for line in lines:
            f.write(line + "\n")


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_output(path):
    """Yields a temporary file path to write; renames it to :obj:`path` on success.

    The temporary file is created exclusively in :obj:`path`'s directory (so the
    rename is atomic and cannot follow a planted link) and removed if the block
    raises: an interrupted write never leaves a file that looks complete, nor a
    stray temporary file. The result gets the permissions of a normally created
    file (``0o666`` minus the umask), not ``mkstemp``'s ``0o600``.

    Example::

        with atomic_output("scores.json") as tmp:
            with open(tmp, "w") as f:
                json.dump(scores, f)
    """
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", dir=directory)
    os.close(fd)
    try:
        yield tmp
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    finally:
        if os.path.lexists(tmp):
            os.remove(tmp)


@contextlib.contextmanager
def atomic_directory(path):
    """Yields a fresh temporary directory; it becomes :obj:`path` on success.

    Same contract as :func:`atomic_output` for a directory (an export): created
    exclusively next to :obj:`path`, removed if the block raises. An existing
    :obj:`path` is replaced only once the new one is complete.
    """
    parent = os.path.dirname(os.path.abspath(path))
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="." + os.path.basename(os.path.abspath(path)) + ".", dir=parent)
    try:
        yield tmp
        os.chmod(tmp, 0o777 & ~_umask())
        if os.path.isdir(path) and not os.path.islink(path):
            old = tempfile.mkdtemp(prefix="." + os.path.basename(path) + ".old.", dir=parent)
            os.rename(path, os.path.join(old, "previous"))
            os.rename(tmp, path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, path)
    finally:
        if os.path.lexists(tmp):
            shutil.rmtree(tmp, ignore_errors=True)


def write_lines_atomic(path, lines):
    """Writes lines to :obj:`path` through :func:`atomic_output`: no half-written
    file ever looks complete."""
    with atomic_output(path) as tmp:
        write_lines(tmp, lines)


def save_figure(figure, path, **kwargs):
    """Saves a matplotlib figure through :func:`atomic_output` (format from the extension)."""
    kwargs.setdefault("format", os.path.splitext(path)[1].lstrip(".") or "png")
    with atomic_output(path) as tmp:
        figure.savefig(tmp, **kwargs)


DEFAULT_CACHE = os.environ.get(
    "LDR_CACHE", os.path.join(os.path.expanduser("~"), ".cache", "ldr-opennmt")
)
