"""A corpus of the user's own per-domain text files (``ldr-data build files``).

Each domain is a pair of plain-text files aligned line by line (``med.en`` and ``med.fr``:
line *i* of one translates line *i* of the other), such as OPUS' Moses files or any
sentence-aligned export::

    ldr-data build files --out data/mine \\
        --corpus medical=med.en,med.fr --corpus law=law.en,law.fr

The languages are the files' extensions (``.en``, ``.fr``), the same for every domain, or
``--source-lang`` and ``--target-lang``. The pairs then go through the same build as the
other corpora (:func:`ldr_opennmt.data.corpus.build`): the cleaning filters and their audit
table, the train/dev/test split by a hash of the source, BPE, vocabularies, label files, and
the ``DONE`` stamp, which records the sha256 of each file's content (not its path), so that
a rebuild from the same text is reused and one from edited files is rebuilt.

Every file is read whole and checked before anything is written under ``--out``: a regular
file (a directory or a FIFO is refused, saying which), outside ``--out`` (a build from its own
``raw/`` files would overwrite them), UTF-8 line by line (``FILE:LINE: not UTF-8``), lines of
at most 1 MB (the bound of OPUS members too), the same number of lines on both sides
(``med.en has 10 lines but med.fr has 9``). A domain named ``generic`` (reserved: it selects
no domain) is refused here, not by the training that would use the corpus. Lines are split on
``\\n`` only (a ``\\r`` before it is dropped), whitespace is normalised, and a UTF-8 byte
order mark at the start of a file is removed with a note. A progress bar (tqdm, on a
terminal) counts the bytes read.
"""

import collections
import itertools
import os
import re
import stat

from ldr_opennmt.data import corpus, sources
from ldr_opennmt.errors import UserError, not_utf8_error
from ldr_opennmt.names import check_path_name
from ldr_opennmt.utils import BOM, note_bom

_SPACES = re.compile(r"\s+")
_BOM_BYTES = BOM.encode("utf-8")


def parse_corpus(item, option="--corpus"):
    """``DOMAIN=SOURCE,TARGET`` as ``(domain, source file, target file)``.

    Raises:
      UserError: ``--corpus expects DOMAIN=SOURCE_FILE,TARGET_FILE, got 'x'``, or on a domain
        name that cannot be part of a file name.
    """
    domain, sep, files = item.partition("=")
    paths = files.split(",") if sep else []
    if not domain or len(paths) != 2 or not all(paths):
        raise UserError("%s expects DOMAIN=SOURCE_FILE,TARGET_FILE, got %r" % (option, item))
    corpus.check_domain_name(domain, "%s %s" % (option, item))
    return domain, paths[0], paths[1]


def check_input_file(path, where):
    """Refuses an input that is not a readable regular file, saying what it is.

    Each file is read twice (hashed for the build's stamp, then read): a FIFO or a
    device cannot be, and a directory is no text.

    Raises:
      UserError: ``PATH: no such file (WHERE)``, ``PATH: a directory, not a text file
        (WHERE)``, ``PATH: a FIFO, not a regular file (WHERE): ...``.
    """
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise UserError("%s: no such file (%s)" % (path, where)) from None
    except OSError as e:
        raise UserError("%s: cannot read (%s) (%s)" % (path, e.strerror or e, where)) from None
    if stat.S_ISDIR(mode):
        raise UserError("%s: a directory, not a text file (%s)" % (path, where))
    if not stat.S_ISREG(mode):
        kind = "a FIFO" if stat.S_ISFIFO(mode) else "not a regular file"
        raise UserError(
            "%s: %s, not a regular file (%s): ldr-data reads each file twice (its sha256 for"
            " the build's stamp, then its lines); save the text to a file first"
            % (path, kind, where)
        )


def _extension(path):
    name = os.path.basename(path)
    return name.rsplit(".", 1)[1] if "." in name.strip(".") else None


def languages(corpora, source_lang=None, target_lang=None):
    """The source and target languages of :obj:`corpora`: the given ones, or else the
    extensions of the files (``med.en`` -> ``en``), which must be the same for every domain.

    Args:
      corpora: ``{domain: (source file, target file)}``.
      source_lang: The source language, or ``None`` to read it from the extensions.
      target_lang: The target language, or ``None`` likewise.

    Raises:
      UserError: naming the files when the extensions differ between domains, are missing
        or are the same on both sides.
    """
    found = []
    for side, given in ((0, source_lang), (1, target_lang)):
        if given is not None:
            found.append(given)
            continue
        extensions = {_extension(files[side]) for files in corpora.values()}
        option = "--source-lang" if side == 0 else "--target-lang"
        if len(extensions) != 1 or None in extensions:
            raise UserError(
                "the %s files (%s) do not share one extension to name their language: give %s"
                % (
                    "source" if side == 0 else "target",
                    ", ".join(files[side] for files in corpora.values()),
                    option,
                )
            )
        found.append(extensions.pop())
    for lang, option in zip(found, ("--source-lang", "--target-lang")):
        check_path_name(lang, "language suffix", option)
    if found[0] == found[1]:
        raise UserError(
            "source and target languages are both %r: give --source-lang and --target-lang"
            % found[0]
        )
    return found[0], found[1]


def _file_lines(path, progress, crlf=None):
    """Yields the decoded lines of a text file (split on ``\\n`` only, streaming).

    Raises:
      UserError: ``FILE:LINE: not UTF-8 (...)``, ``FILE:LINE: a line of more than ...``.
    """
    with open(path, "rb") as f:
        number = 0
        while True:
            line = f.readline(sources.MAX_LINE_BYTES + 1)
            if not line:
                return
            number += 1
            sources.check_line_length(line, path, number)
            progress(len(line))
            if number == 1 and line.startswith(_BOM_BYTES):
                note_bom(path)
                line = line[len(_BOM_BYTES) :]
            if crlf is not None and line.endswith(b"\r\n"):
                crlf[0] += 1
            try:
                yield line.decode("utf-8").rstrip("\n").rstrip("\r")
            except UnicodeDecodeError as e:
                raise not_utf8_error(path, line, number, e) from None


def read_pairs(source_path, target_path, progress=True, log=None):
    """The pairs of two aligned text files, whitespace normalised (empty and copied pairs
    are kept: the cleaning filters drop and count them). With :obj:`log`, says how many
    lines of each file ended with CRLF (Windows line ends: the ``\\r`` is dropped).

    Raises:
      UserError: on a file that cannot be read, a line that is not UTF-8, or files of
        different lengths.
    """
    for path in (source_path, target_path):
        check_input_file(path, "a corpus file")
    pairs = []
    counts = [0, 0]
    crlf = ([0], [0])
    try:
        with sources.byte_bar(os.path.getsize(source_path), source_path, progress) as bar:
            for source, target in itertools.zip_longest(
                _file_lines(source_path, sources.ByteProgress(bar), crlf[0]),
                _file_lines(target_path, lambda _: None, crlf[1]),
            ):
                counts[0] += source is not None
                counts[1] += target is not None
                if source is None or target is None:
                    continue  # The longer file is still read to the end, to count it.
                pairs.append((_SPACES.sub(" ", source).strip(), _SPACES.sub(" ", target).strip()))
    except OSError as e:
        raise UserError("%s: cannot read (%s)" % (e.filename or source_path, e.strerror or e))
    if counts[0] != counts[1]:
        raise UserError(
            "%s has %d lines but %s has %d: the files must be aligned line by line"
            % (source_path, counts[0], target_path, counts[1])
        )
    if log is not None:
        for path, count, total in zip((source_path, target_path), crlf, counts):
            if count[0]:
                log(
                    "[data] %s: %d of %d lines end with CRLF (Windows line ends): the \\r is"
                    " dropped" % (path, count[0], total)
                )
    return pairs


def build_files(
    corpora,
    out,
    dev_size=None,
    test_size=None,
    bpe_merges=None,
    source_lang=None,
    target_lang=None,
    log=print,
):
    """Builds a corpus from per-domain aligned text files.

    Args:
      corpora: ``{domain: (source file, target file)}``, in domain order.
      out: The output directory.
      dev_size: Dev sentences per domain (default ``None``: 10% of the smallest domain's
        unique pairs after cleaning, at most 1000: :func:`ldr_opennmt.data.corpus.auto_split_size`).
      test_size: Test sentences per domain (default ``None``: as :obj:`dev_size`).
      bpe_merges: BPE merge operations per language (default ``None``: one per 4 training
        pairs, between 1000 and 30000: :func:`ldr_opennmt.data.corpus.auto_bpe_merges`).
      source_lang: The source language (default: the source files' extension).
      target_lang: The target language (default: the target files' extension).
      log: Logging function.

    The defaults scale with the corpus (a few hundred pairs per domain build as they are; a
    large corpus gets the paper's 1000 dev and test sentences per domain and 30k merges).

    Returns:
      The corpus statistics (``corpus.json``).

    Raises:
      UserError: on an invalid domain name, language or size, a missing or unreadable file,
        a line that is not UTF-8, files of different lengths or a domain too small; nothing
        is written under :obj:`out` before every file is checked.
    """
    if not corpora:
        raise UserError("ldr-data build files needs at least one --corpus DOMAIN=SOURCE,TARGET")
    for domain in corpora:
        corpus.check_domain_name(domain, "ldr-data")
    corpus.check_given_sizes(dev_size=dev_size, test_size=test_size, bpe_merges=bpe_merges)
    source_lang, target_lang = languages(corpora, source_lang, target_lang)
    for domain, files in corpora.items():
        for path in files:
            check_input_file(path, "--corpus %s" % domain)
    corpus.check_inputs_outside(
        [("--corpus %s" % domain, path) for domain, files in corpora.items() for path in files],
        out,
    )
    digests = collections.OrderedDict()
    for domain, files in corpora.items():
        digests[domain] = []
        for path in files:
            try:
                digests[domain].append(sources.file_sha256(path))
            except OSError as e:
                raise UserError("%s: cannot read (%s)" % (path, e.strerror or e)) from e
    # The content, not the paths: the same text moved elsewhere is the same corpus.
    base = {
        "corpus": "files",
        "domains": [[domain] + digests[domain] for domain in corpora],
    }
    options = dict(
        dev_size=dev_size,
        test_size=test_size,
        bpe_merges=bpe_merges,
        source_lang=source_lang,
        target_lang=target_lang,
    )
    root, info = corpus.reusable_build(base, out, log, **options)
    if info is not None:
        return info
    domain_pairs = collections.OrderedDict()
    for domain, (source_path, target_path) in corpora.items():
        domain_pairs[domain] = read_pairs(source_path, target_path, log=log)
        log(
            "[data] %s: %d raw pairs from %s, %s"
            % (domain, len(domain_pairs[domain]), *corpora[domain])
        )
    return corpus.build(domain_pairs, root, log=log, inputs=base, **options)
