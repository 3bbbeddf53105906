"""The one user-error type and the one way a command reports it.

Everything the user can get wrong (a label file, a configuration key, a corpus,
a command-line value, an export directory) raises :class:`UserError` with a
message of one line that names the file, line and value. Commands print it as
``<prog>: error: <message>`` and exit with status 2, without a traceback:

* the package's own commands through :func:`run_main`;
* stock ``onmt-main`` through the exception hook that
  :func:`ldr_opennmt.upstream.patches.install_error_hook` installs
  (:func:`ldr_opennmt.upstream.install`, which model definitions call; ``onmt-main`` has no
  error handling of its own to extend).

Every failure of a command exits non-zero, whatever it is: a user error 2, a full disk 1, Ctrl-C
130 (``PROG: interrupted``, no traceback), anything else Python's 1 with its traceback. A
command's ``main`` returns what :func:`run_main` returns (or raises it:
:func:`exit_on_failure`), and the console script's wrapper (``sys.exit(main())``) makes it the
exit status: no ``main`` filters the status (``tests/cli/test_exit_status.py`` runs every
console script's ``main`` so).
"""

import errno
import os
import re
import sys

#: The prefix of errors printed under stock ``onmt-main``.
PACKAGE_PROG = "ldr-opennmt"

#: Exit status of a command stopped by a user error (argparse's convention).
EXIT_STATUS = 2

#: Exit status of a command stopped by Ctrl-C (128 + SIGINT), as the shells give.
INTERRUPTED_STATUS = 130


class UserError(ValueError):
    """A one-line error about the user's input; printed without a traceback."""


def report(prog, error):
    """Prints :obj:`error` as one ``prog: error: ...`` line on standard error."""
    sys.stderr.write("%s: error: %s\n" % (prog, error))
    sys.stderr.flush()


def run_main(prog, main_fn, *args, **kwargs):
    """Runs a command's main function; a :class:`UserError` becomes one line and exit 2.

    Args:
      prog: The command name printed before the message.
      main_fn: The function to run.
      *args: Its positional arguments.
      **kwargs: Its keyword arguments.

    Returns:
      What :obj:`main_fn` returns (an exit status), :data:`EXIT_STATUS` after a user
      error, :data:`DISK_FULL_STATUS` after a full disk, :data:`INTERRUPTED_STATUS` after
      Ctrl-C (one line ``PROG: interrupted``: every output is written under a temporary
      name and renamed when complete, a training resumes from its last checkpoint).
    """
    try:
        return main_fn(*args, **kwargs)
    except UserError as e:
        report(prog, e)
        return EXIT_STATUS
    except KeyboardInterrupt:
        sys.stderr.write("%s: interrupted\n" % prog)
        sys.stderr.flush()
        return INTERRUPTED_STATUS
    except Exception as e:  # pylint: disable=broad-except
        message = disk_full_message(e)
        if message is None:
            raise
        report(prog, message)
        return DISK_FULL_STATUS


def exit_on_failure(status):
    """Raises ``SystemExit(status)`` for a non-zero :obj:`status`, else returns 0.

    For the commands whose ``main`` is also called as a bare ``main()`` from scripts (the
    serving runtime's ``ldr-translate`` and ``ldr-serve``): their failures exit non-zero
    whether or not the caller passes the returned value to ``sys.exit``. (Before, they raised
    on status 2 only, so a full disk, status 1, exited 0.)
    """
    if status:
        raise SystemExit(status)
    return 0


#: Exit status of a command stopped by a full disk (not the user's input: not 2).
DISK_FULL_STATUS = 1

_DISK_FULL = {errno.ENOSPC, errno.EDQUOT}


def disk_full_message(error):
    """One line for an error that a full disk (or quota) raised, else ``None``.

    Python raises ``OSError`` (``ENOSPC``, ``EDQUOT``); TensorFlow's file system raises its
    own errors (a checkpoint or summary written by its C++ code) whose message says it. The
    package's outputs are written under temporary names and renamed when complete, so the
    line can say that nothing was left looking complete.
    """
    if isinstance(error, OSError) and error.errno in _DISK_FULL:
        where = " (writing %s)" % error.filename if error.filename else ""
        reason = os.strerror(error.errno)
    elif type(error).__module__.startswith("tensorflow") and (
        "No space left on device" in str(error) or "Disk quota exceeded" in str(error)
    ):
        # "{{function_node __wrapped__SaveV2_...}} PATH; No space left on device [Op:SaveV2]"
        first = str(error).strip().splitlines()[0]
        where, reason = "", re.sub(r"^\{\{function_node [^}]*\}\}\s*|\s*\[Op:\w+\]$", "", first)
    else:
        return None
    return (
        "%s%s: free some space and run the command again (no half-written output was left "
        "under its final name; a training resumes from its last complete checkpoint)"
        % (reason, where)
    )


def not_utf8_error(path, data, first_line, error):
    """The :class:`UserError` for a ``UnicodeDecodeError`` raised on whole lines.

    Args:
      path: The file (or ``ARCHIVE:MEMBER``).
      data: The bytes that failed to decode: one or more whole lines.
      first_line: The number of the first line of :obj:`data`.
      error: The ``UnicodeDecodeError``.

    Returns:
      A ``FILE:LINE: not UTF-8 (byte 0xNN at byte K of the line)`` error.
    """
    line = first_line + data.count(b"\n", 0, error.start)
    line_start = data.rfind(b"\n", 0, error.start) + 1
    return UserError(
        "%s:%d: not UTF-8 (byte 0x%02x at byte %d of the line)"
        % (path, line, data[error.start], error.start - line_start + 1)
    )
