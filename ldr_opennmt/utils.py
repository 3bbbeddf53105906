"""Small file helpers shared by the corpus builder, the evaluation and the commands.

Every output that a reader could mistake for a complete result is written through
:func:`atomic_output` (or :func:`write_lines_atomic`, :func:`atomic_directory`): it is
built under a fresh name in the destination's directory and renamed over the
destination only when complete. The temporary name is created exclusively
(``tempfile.mkstemp`` / ``mkdtemp``), never a predictable ``PATH.partial`` that a
planted symbolic link could redirect; a symbolic link at the destination is replaced,
never written through.

A tool that owns a whole output tree (``ldr-data --out``) also refuses a symbolic link
among the directories of that tree: it creates them with :func:`make_directories`
(each created exclusively, or checked to be a real directory), and passes the tree's
root to :func:`atomic_output` (``root=``), which checks them again (:func:`check_no_links`)
before creating its temporary file there. Otherwise a planted ``OUT/raw -> /elsewhere``
would make every file "inside" the tree land outside it.
"""

import contextlib
import errno
import importlib
import os
import shutil
import stat
import sys
import tempfile
import types

from ldr_opennmt.errors import UserError, not_utf8_error


class LazyModule(types.ModuleType):
    """A module imported on its first attribute access.

    Lets a module that uses TensorFlow in a few functions only (the domain labels, the
    ensemble labels) be imported where TensorFlow is not installed: the serving runtime
    (``.venv-serve``) reads labels in Python and never calls those functions.
    """

    def __getattr__(self, attribute):
        return getattr(importlib.import_module(self.__name__), attribute)


def lazy_module(name):
    """:obj:`name` as a :class:`LazyModule` (the module itself if already imported)."""
    return sys.modules.get(name) or LazyModule(name)


def read_lines(path):
    """The lines of a UTF-8 text file, without line ends (see :func:`decode_lines`).

    Raises:
      UserError: ``FILE:LINE: not UTF-8 (byte 0xNN at byte K of the line)``.
    """
    with open(path, "rb") as f:
        return decode_lines(f.read(), path)


#: U+FEFF, the byte order mark some editors write at the start of a UTF-8 file. Left in
#: place it would be part of line 1's first word, and line 1 translated differently.
BOM = "\ufeff"


def note_bom(where):
    """Says on stderr that :obj:`where` starts with a byte order mark that is removed
    (every reader of user text strips it)."""
    sys.stderr.write(
        "note: %s starts with a UTF-8 byte order mark (U+FEFF): removed from line 1\n" % where
    )


def decode_lines(data, where):
    """Splits UTF-8 bytes into lines, without line ends.

    A leading byte order mark is removed, with a note (:func:`note_bom`). Lines end at
    ``\\n`` only, and every ``\\r`` is dropped (not only one before the ``\\n``), as
    ``tf.data.TextLineDataset`` reads the files OpenNMT-tf translates:
    ``str.splitlines`` would also cut at U+2028, U+0085 and other Unicode separators, and
    a sentence holding one would shift every later line against its translation.

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
    if text.startswith(BOM):
        note_bom(where)
        text = text[len(BOM) :]
    lines = [line.replace("\r", "") for line in text.split("\n")]
    if lines[-1] == "":  # No line after the last "\n" (or only "\r" there).
        lines.pop()
    return lines


def same_file(path_a, path_b):
    """Whether two paths name the same file: the same resolved path, or (both existing) the
    same device and inode (a hard link, a bind mount, ``/dev/fd/N`` of an open file).

    Writing to one would replace the other: a command that writes a file it also reads
    refuses such an output (:func:`check_output_not_input`).
    """
    if os.path.realpath(path_a) == os.path.realpath(path_b):
        return True
    try:
        stat_a, stat_b = os.stat(path_a), os.stat(path_b)
    except (OSError, ValueError):
        return False
    return (stat_a.st_dev, stat_a.st_ino) == (stat_b.st_dev, stat_b.st_ino)


def check_output_not_input(output, inputs, option="--output"):
    """Refuses an output path that is one of the command's inputs, before anything is read.

    Args:
      output: The output path (``None``: standard output, never an input).
      inputs: ``(option, path)`` of each input (a ``None`` path is skipped).
      option: How the output is named in the message.

    Raises:
      UserError: ``--output: in.en is also --input: it would be overwritten by ...``.
    """
    if output is None:
        return
    try:
        if not stat.S_ISREG(os.stat(output).st_mode):
            return  # A terminal, a pipe (/dev/stdout): writing it replaces no file.
    except OSError:
        pass  # Not there yet: only its resolved path can match an input's.
    for name, path in inputs:
        if path is not None and same_file(output, path):
            raise UserError(
                "%s: %s is also %s (%s): writing it would destroy that input; write the "
                "output to another file" % (option, output, name, path)
            )


def write_lines(path, lines):
    """Writes lines to a UTF-8 text file."""
    with open(path, "w", encoding="utf-8") as f:
        for line in lines:
            f.write(line + "\n")


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _components(path, root):
    """The directories from :obj:`root` (excluded) down to :obj:`path` (included)."""
    root = os.path.abspath(root)
    path = os.path.abspath(path)
    relative = os.path.relpath(path, root)
    if relative == ".":
        return []
    if relative == ".." or relative.startswith(".." + os.sep) or os.path.isabs(relative):
        raise UserError("%s: not inside the output directory %s" % (path, root))
    parts = relative.split(os.sep)
    return [os.path.join(root, *parts[: i + 1]) for i in range(len(parts))]


def _check_root(root):
    try:
        mode = os.lstat(root).st_mode
    except FileNotFoundError:
        raise UserError("%s: no such directory" % root) from None
    if stat.S_ISLNK(mode):
        raise UserError(
            "%s: a symbolic link, not a directory (resolve it before writing into it)" % root
        )
    if not stat.S_ISDIR(mode):
        raise UserError("%s: not a directory" % root)


def _link_error(path, root):
    return UserError(
        "%s: a symbolic link inside the output directory %s: refused (nothing is written"
        " through a link; remove it, or choose another output directory)" % (path, root)
    )


def check_no_links(path, root):
    """Refuses a symbolic link among the directories of an output tree.

    Every existing component from :obj:`root` (excluded; it must be a real directory,
    see :func:`resolve_output_root`) down to :obj:`path` (included) must be a real
    directory; components that do not exist yet are fine (nothing to follow).

    Raises:
      UserError: ``PATH: a symbolic link inside the output directory ROOT: refused
        (...)``, or ``PATH: not a directory``.
    """
    _check_root(root)
    for component in _components(path, root):
        try:
            mode = os.lstat(component).st_mode
        except FileNotFoundError:
            return
        if stat.S_ISLNK(mode):
            raise _link_error(component, root)
        if not stat.S_ISDIR(mode):
            raise UserError("%s: not a directory" % component)


def make_directories(path, root):
    """Creates :obj:`path` and its missing parents below :obj:`root`, never through a link.

    Each missing directory is created with ``os.mkdir`` (which never follows a link at
    its name); each existing one is checked to be a real directory, not a symbolic link.
    Returns :obj:`path`.

    Raises:
      UserError: as :func:`check_no_links`.
    """
    _check_root(root)
    for component in _components(path, root):
        try:
            os.mkdir(component)
            continue
        except FileExistsError:
            pass
        mode = os.lstat(component).st_mode
        if stat.S_ISLNK(mode):
            raise _link_error(component, root)
        if not stat.S_ISDIR(mode):
            raise UserError("%s: not a directory" % component)
    return path


def resolve_output_root(path, what="output directory", log=None):
    """The real path of an output directory given by the user, resolved once, up front.

    A symbolic link given as the output directory itself (``--out data -> /disk/data``)
    is the user's choice: it is resolved once, with a message, and everything is then
    written under its target, which must be a directory. A missing directory is fine
    (the caller creates it); a file is refused.

    Args:
      path: The directory as given.
      what: What it is, for the messages (``"--out"``).
      log: Optional logging function for the message about a resolved link.

    Raises:
      UserError: ``PATH: WHAT is a symbolic link to TARGET, which is not a directory``,
        or ``PATH: WHAT is not a directory``.
    """
    path = os.path.abspath(path)
    if os.path.islink(path):
        target = os.path.realpath(path)
        if not os.path.isdir(target):
            raise UserError(
                "%s: %s is a symbolic link to %s, which is not a directory" % (path, what, target)
            )
        if log is not None:
            log("%s (%s) is a symbolic link: writing into %s" % (path, what, target))
        return target
    if os.path.lexists(path) and not os.path.isdir(path):
        raise UserError("%s: %s is not a directory" % (path, what))
    return path


def written_in_place(path):
    """Whether :obj:`path` is a stream or a device (``/dev/stdout``): an output written in
    place, never through a temporary file renamed over it."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not stat.S_ISREG(mode)


def cannot_write(directory):
    """Why a file cannot be created in :obj:`directory` (``"Permission denied"``), or ``None``.

    Tried the way outputs are written (a temporary file, removed at once), not asked with
    ``os.access()``: root passes ``os.access()`` on a read-only directory, and a read-only
    file system or an ACL shows only when trying.
    """
    try:
        fd, probe = tempfile.mkstemp(prefix=".ldr-write-probe.", dir=directory)
    except OSError as e:
        return e.strerror or str(e)
    os.close(fd)
    os.remove(probe)
    return None


def check_writable(path, what, directory=True):
    """Refuses, before any work, an output that could not be written: a directory that cannot
    be written, or created where it is missing, or a file (:obj:`directory` false) whose
    directory is missing or cannot be written (:func:`cannot_write`: in the directory, or in
    the nearest folder above it that exists, where the missing ones would be created).

    Args:
      path: The output directory, or file.
      what: What it is, for the message (``"--output_dir"``, ``"model_dir"``).
      directory: Whether :obj:`path` is a directory (else a file, written in its directory).

    Raises:
      UserError: ``WHAT PATH: cannot write in DIR (Permission denied): ...``, ``WHAT PATH:
        DIR is not a directory``, or for a file ``PATH: directory DIR not found``.
    """
    if not directory and written_in_place(path):
        return
    # A file is written where a link to it leads (a file given as /dev/stdout, redirected).
    folder = os.path.abspath(path if directory else os.path.dirname(os.path.realpath(path)))
    if not directory and not os.path.isdir(folder):
        raise UserError("%s: directory %s not found" % (path, folder))
    existing = folder
    while not os.path.lexists(existing) and os.path.dirname(existing) != existing:
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        raise UserError("%s %s: %s is not a directory" % (what, path, existing))
    reason = cannot_write(existing)
    if reason is not None:
        raise UserError(
            "%s %s: cannot write in %s (%s): choose a folder you can write to"
            % (what, path, existing, reason)
        )


@contextlib.contextmanager
def atomic_output(path, root=None):
    """Yields a temporary file path to write; renames it to :obj:`path` on success.

    The temporary file is created exclusively in :obj:`path`'s directory (so the
    rename is atomic and cannot follow a planted link) and removed if the block
    raises: an interrupted write never leaves a file that looks complete, nor a
    stray temporary file. A symbolic link at :obj:`path` is replaced, never written
    through. The result gets the permissions of a normally created file (``0o666``
    minus the umask), not ``mkstemp``'s ``0o600``.

    Args:
      path: The destination file.
      root: Optional root of the output tree :obj:`path` belongs to: the directories
        from it down to :obj:`path`'s are checked first (:func:`check_no_links`), so
        that a planted directory link cannot redirect the write.

    Raises:
      UserError: as :func:`check_no_links` (with :obj:`root`), or if :obj:`path` is a
        directory.

    Example::

        with atomic_output("scores.json") as tmp:
            with open(tmp, "w") as f:
                json.dump(scores, f)
    """
    directory = os.path.dirname(os.path.abspath(path))
    if root is not None:
        check_no_links(directory, root)
        if os.path.isdir(path) and not os.path.islink(path):
            raise UserError("%s: a directory where a file is written" % path)
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", dir=directory)
    os.close(fd)
    renamed = False
    try:
        try:
            yield tmp
        except OSError as e:
            if e.errno in (errno.ENOSPC, errno.EDQUOT) and not e.filename:
                # A write() that fails names no file: the one-line message of a full disk
                # (ldr_opennmt.errors.disk_full_message) names the output being written.
                raise OSError(e.errno, e.strerror, path) from e
            raise
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
        renamed = True
    finally:
        # Only the file created above: once renamed, its temporary name is free again
        # and whatever appears there is not ours.
        if not renamed and os.path.lexists(tmp):
            os.remove(tmp)


def remove_output_file(path, root):
    """Removes a file of an output tree that the tool itself wrote there (a stale output).

    Only a name inside :obj:`root`, whose directories are real (:func:`check_no_links`),
    is removed; a symbolic link there is removed as a name (never followed); a directory
    is refused. Nothing happens when :obj:`path` does not exist.

    Raises:
      UserError: as :func:`check_no_links`, or ``PATH: a directory, not a file ...``.
    """
    check_no_links(os.path.dirname(os.path.abspath(path)), root)
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if stat.S_ISDIR(mode):
        raise UserError("%s: a directory where a file was written: not removed" % path)
    os.remove(path)


def open_for_append(path):
    """Opens a log file for appending (line-buffered), never through a symbolic link.

    Raises:
      UserError: ``PATH: a symbolic link: not appended to (...)``.
    """
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o666)
    except OSError:
        if os.path.islink(path):
            raise UserError(
                "%s: a symbolic link: not appended to (logs are never written through a link;"
                " remove it)" % path
            ) from None
        raise
    return os.fdopen(fd, "a", buffering=1, encoding="utf-8")


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
    renamed = False
    try:
        yield tmp
        os.chmod(tmp, 0o777 & ~_umask())
        if os.path.isdir(path) and not os.path.islink(path):
            old = tempfile.mkdtemp(prefix="." + os.path.basename(path) + ".old.", dir=parent)
            os.rename(path, os.path.join(old, "previous"))
            os.rename(tmp, path)
            renamed = True
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, path)
            renamed = True
    finally:
        # Only the directory created above, never what appears at its name once renamed.
        if not renamed and os.path.lexists(tmp):
            shutil.rmtree(tmp, ignore_errors=True)


def write_lines_atomic(path, lines, root=None):
    """Writes lines to :obj:`path` through :func:`atomic_output` (:obj:`root`: see
    there): no half-written file ever looks complete."""
    with atomic_output(path, root=root) as tmp:
        write_lines(tmp, lines)


def write_text_atomic(path, text, root=None):
    """Writes UTF-8 text to :obj:`path` through :func:`atomic_output` (:obj:`root`: see
    there)."""
    with atomic_output(path, root=root) as tmp:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)


def copy_file_atomic(source, path, root=None):
    """Copies :obj:`source` to :obj:`path` through :func:`atomic_output` (:obj:`root`:
    see there): a link at :obj:`path` is replaced, never written through."""
    with atomic_output(path, root=root) as tmp:
        shutil.copyfile(source, tmp)


def save_figure(figure, path, **kwargs):
    """Saves a matplotlib figure through :func:`atomic_output` (format from the extension)."""
    kwargs.setdefault("format", os.path.splitext(path)[1].lstrip(".") or "png")
    with atomic_output(path) as tmp:
        figure.savefig(tmp, **kwargs)


DEFAULT_CACHE = os.environ.get(
    "LDR_CACHE", os.path.join(os.path.expanduser("~"), ".cache", "ldr-opennmt")
)
