"""One way to decide whether an earlier result can be reused: its stamp.

A *stamp* is a JSON-able dict of everything a result depends on (:func:`make_stamp`): the
SHA-256 of the checkpoint's files, the ``.index`` and every ``.data-*`` shard
(:func:`checkpoint_digest`: a model retrained at the same path differs, its path alone is
not a stamp), the configuration (the merged dict itself, or its :func:`config_digest`),
the SHA-256 of the input files (:func:`files_digest`) and the options (decoding, budget,
sizes). It is written next to the result as a *stamp file* (:func:`write`, atomically)::

    {"format": 1, "inputs": {...the stamp...}, ...the record...}

The *record* holds what is known about the result but not compared: the files written, the
time it took, whether the run that wrote it finished (``complete``). A result is reused
while the stamp file records the same stamp (:func:`matches`) and every result file is
there (:func:`reusable`); otherwise it is redone, and :attr:`Decision.reason` says why in
one line (what differs: ``config.train.max_step: 60 -> 100; checkpoint differs``).

Who writes a stamp file before the result (so that a result killed half-way is never
trusted) writes it again with ``complete=True`` after. Nothing else is ever removed or
replaced on a stamp's word: the caller decides what it owns.

Standard library only (the drivers of ``run/`` and the corpus builder read it without
TensorFlow); a checkpoint on another file system is read through the ``open_file`` and
``glob`` arguments (``tf.io.gfile.GFile``, ``tf.io.gfile.glob``).
"""

import collections
import glob as glob_lib
import hashlib
import json
import os
import re
import tempfile

from ldr_opennmt.errors import UserError

#: The format of a stamp file (:func:`write`): a JSON object with ``format``, ``inputs``
#: (the stamp) and the record. A file without ``format`` (the evaluation's first stamps)
#: reads as format 1.
FORMAT = 1
#: The key of the stamp in a stamp file.
INPUTS = "inputs"
#: The record key saying whether the run that wrote the file finished (absent: it did).
COMPLETE = "complete"

_BLOCK = 1 << 20
_SHARD = re.compile(r"\.data-(\d+)-of-(\d+)$")
#: Values longer than this are not quoted in a difference (digests, long lists).
_SHOWN = 40


def canonical(value):
    """:obj:`value` as it reads back from JSON (tuples become lists, keys strings).

    Raises:
      TypeError: if :obj:`value` is not JSON-able.
      ValueError: if it holds a NaN or an infinity (never equal to itself read back).
    """
    return json.loads(json.dumps(value, allow_nan=False))


def canonical_json(value):
    """The canonical JSON text of :obj:`value`: sorted keys, no spaces."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def config_digest(config):
    """The SHA-256 (hex) of a configuration: of the canonical JSON of the merged dict, so
    that the order of its keys does not count."""
    return hashlib.sha256(canonical_json(canonical(config)).encode("utf-8")).hexdigest()


def lines_digest(lines):
    """The SHA-256 (hex) of text lines, each ended by a newline (a file's lines as read
    back digest as that file does)."""
    digest = hashlib.sha256()
    for line in lines:
        digest.update(line.encode("utf-8") + b"\n")
    return digest.hexdigest()


def _update(digest, path, open_file):
    try:
        with open_file(path, "rb") as f:
            for block in iter(lambda: f.read(_BLOCK), b""):
                digest.update(block)
    except FileNotFoundError:
        raise UserError("%s: not found (a file the result depends on)" % path) from None


def file_digest(path, open_file=open):
    """The SHA-256 (hex) of a file's bytes.

    Args:
      path: The file.
      open_file: How to open it (``open``, or ``tf.io.gfile.GFile`` for a remote path).

    Raises:
      UserError: if the file does not exist.
    """
    digest = hashlib.sha256()
    _update(digest, path, open_file)
    return digest.hexdigest()


def files_digest(paths, open_file=open):
    """The SHA-256 (hex) of several files' bytes, in order: any byte of any file, the
    order of the files or a file moved from one to the next changes it (each file's digest
    is hashed, not their concatenation). The names do not count: a file copied elsewhere
    digests the same.

    Raises:
      UserError: naming the first file that does not exist.
    """
    digest = hashlib.sha256()
    for path in paths:
        digest.update(bytes.fromhex(file_digest(path, open_file)))
    return digest.hexdigest()


def checkpoint_files(prefix, glob=glob_lib.glob):
    """The files of a TensorFlow checkpoint: ``PREFIX.index`` and every
    ``PREFIX.data-NNNNN-of-MMMMM`` shard, in order.

    Raises:
      UserError: if the prefix has no shard, or some of its ``-of-MMMMM`` are missing.
    """
    found = {}
    for path in glob(glob_lib.escape(prefix) + ".data-*"):
        match = _SHARD.search(path)
        if match and path[: match.start()] == prefix:
            found[int(match.group(1))] = (int(match.group(2)), path)
    counts = {count for count, _ in found.values()}
    if not found or len(counts) != 1 or sorted(found) != list(range(counts.pop())):
        raise UserError(
            "%s: not a complete checkpoint (shards found: %s)"
            % (prefix, ", ".join(os.path.basename(p) for _, p in sorted(found.values())) or "none")
        )
    return [prefix + ".index"] + [found[i][1] for i in sorted(found)]


def checkpoint_digest(prefix, open_file=open, glob=glob_lib.glob):
    """The SHA-256 (hex) of a checkpoint's files: its ``.index`` and every ``.data-*``
    shard (a model retrained at the same path, even to the same step, differs).

    Args:
      prefix: The checkpoint prefix (``run/model/ckpt-4500``).
      open_file: How to open a file (``tf.io.gfile.GFile`` for a remote checkpoint).
      glob: How to list the shards (``tf.io.gfile.glob``).

    Raises:
      UserError: if the checkpoint has no ``.index`` or is missing a shard.
    """
    digest = hashlib.sha256()
    for path in checkpoint_files(prefix, glob):
        # The suffix counts: one shard more or less is another checkpoint.
        digest.update(path[len(prefix) :].encode("utf-8") + b"\0")
        digest.update(bytes.fromhex(file_digest(path, open_file)))
    return digest.hexdigest()


def make_stamp(**parts):
    """A stamp: the JSON-able :obj:`parts` as they read back from a stamp file.

    Example::

        stamp = stamps.make_stamp(
            checkpoint=stamps.checkpoint_digest(prefix),
            config=config,  # or stamps.config_digest(config)
            inputs=stamps.files_digest([source, labels]),
            options={"beam_width": 4, "sentences": 200},
        )

    Raises:
      TypeError: if a part is not JSON-able.
      ValueError: if a part holds a NaN or an infinity.
    """
    return canonical(parts)


def dumps(stamp, **record):
    """The text of a stamp file: ``format``, ``inputs`` (:obj:`stamp`) and :obj:`record`
    (e.g. ``complete=False``, ``files=[...]``, ``seconds=12.5``)."""
    reserved = {"format", INPUTS} & set(record)
    if reserved:
        raise ValueError("reserved keys in a stamp record: %s" % sorted(reserved))
    content = dict(record, format=FORMAT)
    content[INPUTS] = stamp
    return json.dumps(canonical(content), indent=2, sort_keys=True) + "\n"


def write(path, stamp, **record):
    """Writes a stamp file atomically: built under an exclusive temporary name in
    :obj:`path`'s directory, renamed over :obj:`path` when complete (a link there is
    replaced, never written through). See :func:`dumps` for the content."""
    text = dumps(stamp, **record)
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        if os.path.lexists(tmp):
            os.remove(tmp)
        raise
    return path


def read(path):
    """The content of a stamp file (a dict: ``inputs`` and the record), ``None`` when there
    is none, ``{}`` when it cannot be read or is not a stamp file."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return None
    except OSError:
        return {}
    try:
        content = json.loads(data.decode("utf-8"))
    except ValueError:  # UnicodeDecodeError is one.
        return {}
    if not isinstance(content, dict) or content.get("format", FORMAT) != FORMAT:
        return {}
    return content


def _shown(value):
    text = json.dumps(value, sort_keys=True, ensure_ascii=False)
    return text if len(text) <= _SHOWN else None


def differences(old, new, prefix=""):
    """The parts of two stamps that differ: ``[(dotted key, old, new)]``, dicts compared
    key by key (a key on one side only has :data:`MISSING` on the other), anything else
    whole."""
    if isinstance(old, dict) and isinstance(new, dict):
        found = []
        for key in sorted(set(old) | set(new), key=str):
            name = "%s.%s" % (prefix, key) if prefix else str(key)
            found += differences(old.get(key, MISSING), new.get(key, MISSING), name)
        return found
    return [] if old == new else [(prefix or "stamp", old, new)]


class _Missing:
    def __repr__(self):
        return "MISSING"


#: The value of a key a stamp does not have, in :func:`differences`.
MISSING = _Missing()


def describe(old, new, limit=4):
    """What differs between two stamps, in one line (``None`` if nothing does).

    Short values are quoted (``options.test_size: 500 -> 4``); a digest, a long list or a
    dict is named only (``checkpoint differs``); a part on one side only is ``added`` or
    ``removed``. At most :obj:`limit` parts are named, then how many more differ.
    """
    found = differences(old, new)
    if not found:
        return None
    parts = []
    for name, before, after in found[:limit]:
        if before is MISSING:
            parts.append("%s added" % name)
        elif after is MISSING:
            parts.append("%s removed" % name)
        elif _shown(before) is not None and _shown(after) is not None:
            parts.append("%s: %s -> %s" % (name, _shown(before), _shown(after)))
        else:
            parts.append("%s differ%s" % (name, "" if name.endswith("s") else "s"))
    if len(found) > limit:
        parts.append("%d more" % (len(found) - limit))
    return "; ".join(parts)


class Decision(collections.namedtuple("Decision", ["reuse", "reason", "record", "stale"])):
    """Whether to reuse a result (true as a bool when it is reused) and why, in one line.

    Attributes:
      reuse: Whether the earlier result is reused.
      reason: Why (``same stamp``) or why not (``no stamp``, what differs, what is missing).
      record: The stamp file's content (``None``: no stamp file; ``{}``: unreadable).
      stale: Whether a stamp file is there but records other inputs (or cannot be read):
        the results it covers are outdated, the caller's to remove before redoing them.
        ``False`` when there is no stamp file (nothing there is known to be the caller's),
        and when the stamp is the same but a result is missing or unfinished (an
        interrupted run may resume from what it left).
    """

    __slots__ = ()

    def __bool__(self):
        return bool(self.reuse)


def matches(path, stamp):
    """Whether the stamp file :obj:`path` records :obj:`stamp`.

    Returns:
      A :class:`Decision`; its reason is ``no stamp (PATH)``, ``PATH: not a stamp file``,
      ``PATH records no inputs``, what differs (:func:`describe`) or ``same stamp``.
    """
    record = read(path)
    if record is None:
        return Decision(False, "no stamp (%s)" % path, None, False)
    if not record:
        return Decision(False, "%s: not a stamp file" % path, record, True)
    previous = record.get(INPUTS)
    if not isinstance(previous, dict):
        return Decision(False, "%s records no inputs (an older format)" % path, record, True)
    stamp = canonical(stamp)
    if previous != stamp:
        return Decision(False, describe(previous, stamp), record, True)
    return Decision(True, "same stamp", record, False)


def reusable(result_paths, stamp_path, stamp):
    """Whether the results :obj:`result_paths` can be reused: the stamp file
    :obj:`stamp_path` records :obj:`stamp`, the run that wrote it finished, and every
    result is there.

    Returns:
      A :class:`Decision`: as :func:`matches`, or ``the run that wrote them did not
      finish``, or ``missing: PATH, ...``.
    """
    decision = matches(stamp_path, stamp)
    if not decision:
        return decision
    if decision.record.get(COMPLETE) is False:
        return Decision(False, "the run that wrote them did not finish", decision.record, False)
    missing = [path for path in result_paths if not os.path.exists(path)]
    if missing:
        return Decision(False, "missing: %s" % ", ".join(missing), decision.record, False)
    return decision
