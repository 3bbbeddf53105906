"""The files of a ``data`` configuration, checked before anything is written.

Vocabularies (readable, UTF-8, not empty, no repeated token: read as OpenNMT-tf reads
them) and tokenization files or inline JSON configurations, each error one line
naming the ``data`` key; OpenNMT-tf would fail on them deep in model initialization,
with a traceback that names the path but not the key. :func:`data_error` turns an
OpenNMT-tf error about one of these files into such a line. Used by
:class:`ldr_opennmt.training.runner.Runner`.
"""

import json

import tensorflow as tf

from ldr_opennmt.errors import UserError, not_utf8_error
from ldr_opennmt.inputters import constant_label_name


def strings(value):
    """The strings in a configuration value (nested lists and dicts)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (list, tuple)):
        return [s for item in value for s in strings(item)]
    return []


#: The bytes of a vocabulary file read at a time by :func:`_check_vocabulary`.
_VOCABULARY_CHUNK = 1 << 20
#: The longest excerpt of a value (a token, inline JSON) in a message (characters).
_EXCERPT = 40


def _shown(path):
    """:obj:`path` as a message shows it: as it is, or quoted (``%r``) when it is empty
    or holds a character that is not printable (a line break would cut the message)."""
    return path if path and path.isprintable() else repr(path)


def _excerpt(text):
    """:obj:`text` quoted (``%r``) and cut after :data:`_EXCERPT` characters."""
    if len(text) <= _EXCERPT:
        return repr(text)
    return "%r... (%d characters)" % (text[:_EXCERPT], len(text))


def _one_line(error):
    return " ".join(str(error).split()) or type(error).__name__


def _file_status(key, path):
    """``(exists, is a directory)`` of :obj:`path`, as ``tf.io.gfile`` sees it.

    Raises:
      UserError: if ``tf.io.gfile`` cannot look it up (a scheme it does not know, e.g.
        ``s3://`` without its plugin; a path that is not valid Unicode).
    """
    try:
        exists = tf.io.gfile.exists(path)
        return exists, exists and tf.io.gfile.isdir(path)
    except (tf.errors.OpError, UnicodeError, ValueError) as e:
        raise UserError(
            "data: %s: cannot read %s (%s)" % (key, _shown(path), _one_line(e))
        ) from None


def _vocabulary_lines(path, shown):
    """The lines of a vocabulary file as OpenNMT-tf reads them, with their number.

    ``opennmt.data.Vocab.load`` iterates a ``tf.io.gfile.GFile``: lines end at ``"\\n"``
    only (not at ``"\\u2028"`` or a lone ``"\\r"``), every ``"\\r"`` is dropped (TensorFlow's
    line reader skips them), a last line without ``"\\n"`` counts if it is not empty, and
    the whole line is the token (spaces and tabs included: no frequency column). The file
    is read in chunks of whole lines.

    Yields:
      ``(line number, token, raw line)``: the raw line without its ``"\\n"``.

    Raises:
      UserError: ``FILE:LINE: not UTF-8 ...``.
      tf.errors.OpError: if the file cannot be read.
    """
    number = 0
    pieces = []  # Of the line that the chunks read so far end in.
    with tf.io.gfile.GFile(path, "rb") as f:
        while True:
            chunk = f.read(_VOCABULARY_CHUNK)
            end = chunk.rfind(b"\n") + 1
            if chunk and not end:
                pieces.append(chunk)
                continue
            pieces.append(chunk[:end])
            data = b"".join(pieces)
            pieces = [chunk[end:]]
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError as e:
                raise not_utf8_error(shown, data, number + 1, e) from None
            lines = text.split("\n")
            last = lines.pop()  # After the last "\n": the end of the file or "".
            if last.replace("\r", ""):
                lines.append(last)
            for line in lines:
                number += 1
                yield number, line.replace("\r", "") if "\r" in line else line, line
            if not chunk:
                return


def _check_vocabulary(key, path):
    """Checks the contents of a vocabulary file (see :func:`_vocabulary_lines`), in one
    pass: OpenNMT-tf would fail on them with an error that does not name the file, or
    build a lookup table that disagrees with its own count of the tokens.

    Raises:
      UserError: ``FILE:LINE: not UTF-8 ...``, ``FILE:LINE: empty line ...``,
        ``FILE:LINE: token 'a' repeats line N``, ``data: KEY: empty vocabulary file:
        PATH`` or ``data: KEY: cannot read PATH (...)``.
    """
    shown = _shown(path)
    first_lines = {}
    number = 0
    try:
        for number, token, line in _vocabulary_lines(path, shown):
            # The lookup table drops one "\r" before "\n" and refuses an empty key.
            if not line or line == "\r":
                raise UserError(
                    "%s:%d: empty line (a vocabulary has one token per line)" % (shown, number)
                )
            first = first_lines.setdefault(token, number)
            if first != number:
                # OpenNMT-tf skips it with a warning, but its lookup table reads as many
                # lines as there are distinct tokens: it fails, or drops the last tokens.
                raise UserError(
                    "%s:%d: token %s repeats line %d" % (shown, number, _excerpt(token), first)
                )
    except tf.errors.OpError as e:
        raise UserError("data: %s: cannot read %s (%s)" % (key, shown, _one_line(e))) from None
    if not number:
        raise UserError("data: %s: empty vocabulary file: %s" % (key, shown))


def _check_tokenization(key, value):
    """Checks a ``*_tokenization`` entry as ``opennmt.tokenizers.make_tokenizer`` reads
    it: empty (no tokenization), a file, or an inline JSON object.

    Raises:
      UserError: on a directory, a value that is neither a file nor a JSON object, or a
        path ``tf.io.gfile`` cannot look up.
    """
    if not value:
        return
    exists, is_dir = _file_status(key, value)
    if is_dir:
        raise UserError("data: %s: a directory, not a tokenization file: %s" % (key, _shown(value)))
    if exists:
        return
    try:
        config = json.loads(value)
    except ValueError:
        raise UserError("data: %s: file not found: %s" % (key, _shown(value))) from None
    except RecursionError:
        raise UserError(
            "data: %s: neither a file nor an inline JSON configuration (nested too deeply): %s"
            % (key, _excerpt(value))
        ) from None
    if not isinstance(config, dict):
        raise UserError(
            "data: %s: neither a file nor an inline JSON object (got a %s): %s"
            % (key, type(config).__name__, _excerpt(value))
        )


def check_data_files(data):
    """Checks the vocabulary and tokenization files of a ``data`` configuration.

    OpenNMT-tf would fail on them deep in model initialization, with a traceback that
    names the path but not the configuration key, or an error that names neither (an
    empty vocabulary, one that is not UTF-8 or repeats a token). Every ``*_vocabulary``
    file is read once, as OpenNMT-tf reads it (see :func:`_vocabulary_lines`).

    Raises:
      UserError: ``data: KEY: file not found: PATH``, a key that is not a string, a
        path ``tf.io.gfile`` cannot look up, a tokenization that is neither a file nor
        an inline JSON object, or a vocabulary's contents (see
        :func:`_check_vocabulary`). A path that a line break or another unprintable
        character would cut is quoted (``%r``).
    """
    for key in data:
        if not isinstance(key, str):
            raise UserError("data: %r: a key that is not a string (%s)" % (key, type(key).__name__))
    for key, value in sorted(data.items()):
        if not isinstance(value, str):
            continue
        if key.endswith("_vocabulary"):
            exists, is_dir = _file_status(key, value)
            if not exists:
                raise UserError("data: %s: file not found: %s" % (key, _shown(value)))
            if is_dir:
                raise UserError(
                    "data: %s: a directory, not a vocabulary file: %s" % (key, _shown(value))
                )
            _check_vocabulary(key, value)
        elif key.endswith("_tokenization"):
            _check_tokenization(key, value)


def data_error(data, error):
    """A :class:`UserError` naming the ``data`` key whose file :obj:`error` is about, or
    ``None`` if its message names none of them."""
    message = _one_line(error)
    for key, value in sorted(data.items(), key=lambda item: str(item[0])):
        for path in strings(value):
            if len(path) > 1 and path in message:
                return UserError("data: %s: %s" % (key, message))
    return None


def file_paths(value):
    """The file paths of a data file entry (nested lists), without ``domain:NAME``."""
    return [path for path in strings(value) if constant_label_name(path) is None]
