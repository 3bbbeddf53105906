"""The one user-error type and the one way a command reports it.

Everything the user can get wrong (a label file, a configuration key, a corpus,
a command-line value, an export directory) raises :class:`UserError` with a
message of one line that names the file, line and value. Commands print it as
``<prog>: error: <message>`` and exit with status 2, without a traceback:

* the package's own commands through :func:`run_main`;
* stock ``onmt-main`` through the exception hook that
  :func:`ldr_opennmt.hooks.install_error_hook` installs (:func:`ldr_opennmt.hooks.install`,
  which model definitions call; ``onmt-main`` has no error handling of its own to extend).
"""

import errno
import os
import re
import sys

#: The prefix of errors printed under stock ``onmt-main``.
PACKAGE_PROG = "ldr-opennmt"

#: Exit status of a command stopped by a user error (argparse's convention).
EXIT_STATUS = 2


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
      What :obj:`main_fn` returns (an exit status), or :data:`EXIT_STATUS`.
    """
    try:
        return main_fn(*args, **kwargs)
    except UserError as e:
        report(prog, e)
        return EXIT_STATUS
    except Exception as e:  # pylint: disable=broad-except
        message = disk_full_message(e)
        if message is None:
            raise
        report(prog, message)
        return DISK_FULL_STATUS


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
