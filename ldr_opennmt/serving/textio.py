"""The files ``ldr-translate`` reads and writes, without TensorFlow.

* Inputs (:func:`read_text_lines`): a file, standard input (no ``--input``, or ``-``), or a
  stream named by a path (``/dev/stdin``, ``<(...)``'s ``/dev/fd/63``), read once. A UTF-8
  byte order mark at the start is removed with a note on standard error (it would otherwise
  stay in the first token and change the first line's translation). Lines end at ``\\n``
  only (:func:`ldr_opennmt.utils.decode_lines`).
* Outputs (:func:`check_paths`, :func:`check_output`, :func:`write_output`): an output that
  is one of the inputs is refused before anything is read; the output's directory is tried
  before any work; the file is written under a temporary name and renamed at the end (a
  failed or interrupted run leaves none).
"""

import codecs
import os
import sys

from ldr_opennmt.errors import UserError
from ldr_opennmt.utils import (
    cannot_write,
    check_output_not_input,
    decode_lines,
    same_file,
    write_lines_atomic,
    written_in_place,
)

STDIN = "<stdin>"
#: The path that names standard input.
STDIN_PATH = "-"
PROG = "ldr-translate"
WARNING = PROG + ": warning: "
NOTE = PROG + ": note: "


def is_stdin(path):
    """Whether :obj:`path` means standard input (no path, or ``-``)."""
    return path is None or path == STDIN_PATH


def _read_bytes(path, what):
    if is_stdin(path):
        return sys.stdin.buffer.read()
    # A stream (a pipe, /dev/stdin, <(...)) is no regular file: only a missing path or a
    # directory is refused, and the stream is read once.
    if not os.path.exists(path):
        raise UserError("%s: %s not found" % (path, what))
    if os.path.isdir(path):
        raise UserError("%s: a directory, not a %s" % (path, what))
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise UserError("%s: cannot read the %s (%s)" % (path, what, e.strerror or e)) from None


def read_text_lines(path, what="input file"):
    """The lines of a UTF-8 file, standard input (``None`` or ``-``) or a stream, read once.

    Args:
      path: The file, or ``None``/``-`` for standard input.
      what: What it is, for messages (``input file``, ``domain label file``).

    Returns:
      The lines, without line ends; a byte order mark at the start removed (with a note).

    Raises:
      UserError: if it does not exist, is a directory, or is not UTF-8 (``FILE:LINE``).
    """
    where = STDIN if is_stdin(path) else path
    data = _read_bytes(path, what)
    if data.startswith(codecs.BOM_UTF8):
        data = data[len(codecs.BOM_UTF8) :]
        print(
            NOTE
            + "%s: removed the UTF-8 byte order mark at its start (not part of line 1)" % where,
            file=sys.stderr,
        )
    return decode_lines(data, where)


def check_paths(args):
    """Refuses what ``ldr-translate`` cannot do with its paths, before reading anything:
    an ``--output`` that is the ``--input`` or the ``--domain_file``, and labels read from
    standard input (``-``, ``/dev/stdin``) when the input is read from it too.

    Raises:
      UserError: naming the options and paths.
    """
    domain_file = getattr(args, "domain_file", None)
    if (
        domain_file is not None
        and is_stdin(args.input)
        and (is_stdin(domain_file) or same_file(domain_file, "/dev/stdin"))
    ):
        raise UserError(
            "--domain_file %s: standard input is also the input (no --input): give the "
            "input or the labels as a file" % domain_file
        )
    inputs = [("--domain_file", domain_file)]
    if not is_stdin(args.input):
        inputs.insert(0, ("--input", args.input))
    check_output_not_input(args.output, [(name, p) for name, p in inputs if not is_stdin(p)])


def check_output(path):
    """Refuses an output file that could not be written, before any work.

    Raises:
      UserError: if its directory is missing or not writable, or it is a directory.
    """
    if path is None:
        return
    if os.path.isdir(path):
        raise UserError("--output: %s is a directory" % path)
    if written_in_place(path):  # A stream or a device (/dev/stdout): never renamed over.
        return
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise UserError("--output: directory %s not found" % directory)
    reason = cannot_write(directory)
    if reason is not None:
        raise UserError("--output: cannot write to directory %s (%s)" % (directory, reason))


def write_output(path, lines):
    """Writes to standard output, or to a temporary file next to :obj:`path` renamed at the
    end (a stream such as ``/dev/stdout`` is written directly)."""
    data = "".join(line + "\n" for line in lines).encode("utf-8")
    if path is None:
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
        return
    if written_in_place(path):
        with open(path, "wb") as f:
            f.write(data)
        return
    write_lines_atomic(path, lines)


def check_empty_lines(lines, input_name, keep_empty):
    """Refuses an empty input line unless :obj:`keep_empty`.

    Raises:
      UserError: ``in.en:2: empty input line (...)``.
    """
    for line_number, line in enumerate(lines, start=1):
        if not line.strip() and not keep_empty:
            raise UserError(
                "%s:%d: empty input line (pass --keep_empty to write an empty translation)"
                % (input_name, line_number)
            )


def truncate_sentences(sentences, limit):
    """Cuts token lists to :obj:`limit` tokens.

    Returns:
      ``(sentences, long)``: the cut token lists and the indices of the lines that were
      longer (no limit, ``None``: unchanged, none).
    """
    if limit is None:
        return sentences, []
    long = [i for i, tokens in enumerate(sentences) if len(tokens) > limit]
    return [tokens[:limit] for tokens in sentences], long


def long_lines_warning(count, total, limit, limit_source, first, first_length):
    """The warning line about the input lines longer than the source length limit.

    Args:
      count: The number of long lines.
      total: The number of input lines.
      limit: The limit, in tokens.
      limit_source: Where the limit comes from (``--max_source_length``...).
      first: The first long line, as ``FILE:LINE``.
      first_length: Its number of tokens.
    """
    return WARNING + (
        "%d of %d input lines have more than %d tokens (%s), the first at %s (%d tokens): "
        "only their first %d tokens are translated"
        % (count, total, limit, limit_source, first, first_length, limit)
    )


def translate(translator, sentences, labels, batch_size, progress=None):
    """Translates token lists in batches of similar lengths, in input order.

    Args:
      translator: A callable ``(token lists, labels) -> token lists``.
      sentences: The token list of each sentence (empty lists are skipped and
        translated as empty lists).
      labels: The domain label of each sentence.
      batch_size: The number of sentences per batch.
      progress: An optional ``tqdm`` progress bar, advanced by sentence.

    Returns:
      The translated token list of each sentence.
    """
    results = [[] for _ in sentences]
    order = sorted((i for i, s in enumerate(sentences) if s), key=lambda i: len(sentences[i]))
    for start in range(0, len(order), batch_size):
        batch = order[start : start + batch_size]
        outputs = translator([sentences[i] for i in batch], [labels[i] for i in batch])
        for i, output in zip(batch, outputs):
            results[i] = output
        if progress is not None:
            progress.update(len(batch))
    return results
