"""Label files, corpora and text files: arbitrary bytes, as a user's files hold them."""

import os
import re
import shutil
import tempfile
import unittest
from unittest import mock

import tensorflow as tf
from hypothesis import example, given
from hypothesis import strategies as st

from ldr_opennmt import domains, ensembles
from ldr_opennmt.inputters import DomainInputter
from ldr_opennmt.utils import decode_lines, read_lines
from tests.property.common import OTHER_SEPARATORS, read, tricky_text

DOMAINS = ["a", "b", "ab"]
ASCII_SPACE = domains.ASCII_SPACE

#: What a line of a label file can be: labels (padded with whitespace, with carriage
#: returns inside), ensemble labels, bytes that are not UTF-8, any text.
small_lines = st.one_of(
    st.tuples(
        st.sampled_from(
            DOMAINS
            + ["generic", "c", "ens-uniform", "ens-learned", "a:1", "a:0.5 b:0.5", "b:2", ""]
        ),
        st.text(alphabet=ASCII_SPACE.replace("\n", ""), max_size=3),
        st.text(alphabet=ASCII_SPACE.replace("\n", ""), max_size=3),
    ).map(lambda t: (t[1] + t[0] + t[2]).encode("utf-8")),
    st.sampled_from(
        [b"a\rb", b"\ra\r\r", b"a\x00", b"\xff", b"\xc3", b"a\xe2\x82", b"\xed\xa0\x80"]
    ),
    st.binary(max_size=12),
    tricky_text.map(lambda t: t.encode("utf-8")),
)
#: Lines of up to 2 MiB too: longer than the chunks scan_text_file reads (1 MiB).
huge_lines = st.tuples(st.sampled_from([b"a", b"\xff", b" "]), st.integers(1, 1 << 21)).map(
    lambda t: t[0] * t[1]
)


def text_files(lines=small_lines):
    """Whole files: :obj:`lines` joined by ``\\n`` or by something a reader must not take
    for a line end (``\\r``, U+2028, U+0085, ...), with or without a last ``\\n``."""
    return st.tuples(
        st.lists(
            st.tuples(
                lines,
                st.sampled_from([b"\n", b"\r\n"] + [s.encode("utf-8") for s in OTHER_SEPARATORS]),
            ),
            max_size=8,
        ),
        st.booleans(),
    ).map(lambda t: b"".join(line + sep for line, sep in t[0]) + (b"\n" if t[1] else b""))


#: Files whose lines may be huge (a few of them).
big_text_files = text_files(st.one_of(small_lines, small_lines, small_lines, huge_lines))


def text_lines(data):
    """The lines ``tf.data.TextLineDataset`` (TensorFlow 2.13) reads from :obj:`data`:
    split on ``\\n`` only, every ``\\r`` dropped, a last line without ``\\n`` counted
    unless nothing is left of it."""
    lines = [line.replace(b"\r", b"") for line in data.split(b"\n")]
    if lines[-1] == b"":
        lines.pop()
    return lines


def utf8(line):
    try:
        return line.decode("utf-8")
    except UnicodeDecodeError:
        return None


class _Files(unittest.TestCase):
    def setUp(self):
        super().setUp()
        self.dir = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.dir, ignore_errors=True)
        self._count = 0

    def write(self, data, name=None):
        """A new file holding :obj:`data` (a new name each time: check_parallel_files
        caches files by size and modification time)."""
        self._count += 1
        path = os.path.join(self.dir, name or "f%d.txt" % self._count)
        with open(path, "wb") as f:
            f.write(data)
        return path


class LabelFileTest(_Files):
    """domains.read_label_file, as the domain inputter calls it."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.inputter = DomainInputter()
        cls.inputter.initialize({"domains": DOMAINS})
        cls.inputter.ensemble_refusal = None  # A model with domain views.

    @given(
        big_text_files,
        st.one_of(st.none(), st.integers(0, 10)),
        st.sampled_from([None, "translation", "training"]),
    )
    @example(b"a\rb\n", None, None)
    @example(b"a\n\xff\n", 2, None)
    @example(b"a\xe2\x80\xa8b\n", None, None)
    @example(b"a:0.5\x0bb:0.5\n", 1, "translation")
    def test_reads_or_refuses_in_one_line(self, data, expected_lines, ensemble):
        path = self.write(data)
        # How the inputter reads ensemble labels: checked for translation, refused for training.
        reader = ensemble and self.inputter._ensemble_label(training=ensemble == "training")
        ids, error = read(
            domains.read_label_file, path, DOMAINS, expected_lines=expected_lines, ensemble=reader
        )
        # The oracle: the lines the training and serving graphs read.
        lines = text_lines(data)
        bad = None
        for number, line in enumerate(lines, start=1):
            label = utf8(line)
            if label is None:
                bad = (number, "not UTF-8")
                break
            label = label.strip(ASCII_SPACE)
            if not label:
                bad = (number, "empty domain label")
                break
            if reader is not None and ensembles.is_ensemble_label(label):
                _, ensemble_error = read(reader, label, "x")
                if ensemble_error is not None:
                    bad = (number, None)
                    break
            elif label not in DOMAINS + ["generic"]:
                bad = (number, "unknown domain label")
                break
        if bad is not None:
            self.assertIsNotNone(error, "accepted a bad line %d" % bad[0])
            self.assertTrue(error.startswith("%s:%d: " % (path, bad[0])), error)
            if bad[1]:
                self.assertIn(bad[1], error)
        elif expected_lines is not None and expected_lines != len(lines):
            self.assertRegex(error, r"^%s:\d+: (missing|extra) domain label" % re.escape(path))
        else:
            self.assertIsNone(error)
            self.assertEqual(len(ids), len(lines))
            self.assertTrue(all(i in (-1, 0, 1, 2) for i in ids), ids)

    def test_a_directory_is_refused(self):
        _, error = read(domains.read_label_file, self.dir, DOMAINS)
        self.assertEqual(error, "%s: a directory, not a label file" % self.dir)

    @given(tricky_text, st.sampled_from([None, DOMAINS]))
    def test_label_id(self, label, declared):
        value, error = read(domains.label_id, label, declared, "f.domain:1")
        if error is None:
            self.assertIn(value, (-1, 0, 1, 2))


class TextFileTest(_Files):
    """domains.scan_text_file / check_parallel_files and utils.read_lines / decode_lines."""

    @given(text_files(), st.integers(1, 9))
    @example(b"\xe2\x82\xac\n\xe2", 2)
    @example(b"a\n \r\n\t\n", 1)
    @example(b"a\n\r\r", 1)
    def test_scan_is_the_lines_of_text_line_dataset(self, data, chunk_size):
        path = self.write(data)
        scanned, error = read(domains.scan_text_file, path)
        # Reading in chunks of any size gives the same answer.
        with mock.patch.object(domains, "_CHUNK_SIZE", chunk_size):
            self.assertEqual(read(domains.scan_text_file, path), (scanned, error))
        lines = text_lines(data)
        bad = next((n for n, line in enumerate(lines, start=1) if utf8(line) is None), None)
        if bad is not None:
            self.assertTrue(error.startswith("%s:%d: not UTF-8" % (path, bad)), error)
            return
        self.assertIsNone(error)
        self.assertEqual(scanned.lines, len(lines))
        blank = [n for n, line in enumerate(lines, start=1) if not line.strip(b" \t\n\r\f\v")]
        self.assertEqual(list(scanned.blank), blank)

    @given(
        big_text_files,
        text_files(),
        st.booleans(),
        st.booleans(),
        st.sampled_from(["file", "missing", "directory", "url"]),
    )
    @example(b"a\n", b"b\n", True, False, "directory")
    @example(b"a\n", b"b\n", True, False, "url")
    def test_parallel_files(self, source_data, target_data, training, keep_empty, target_kind):
        source = self.write(source_data)
        target = {
            "file": lambda: self.write(target_data),
            "missing": lambda: os.path.join(self.dir, "missing"),
            "directory": lambda: self.dir,
            "url": lambda: "zz://host/target",
        }[target_kind]()
        result, error = read(
            domains.check_parallel_files, source, target, training=training, keep_empty=keep_empty
        )
        if error is None:
            self.assertEqual(result.size, len(text_lines(source_data)))
            self.assertEqual(result.size, len(text_lines(target_data)))
            self.assertLessEqual(result.dropped, result.size)
            if training and result.size:
                self.assertLess(result.dropped, result.size)

    @given(text_files())
    @example(b"a\rb\nc\r\r\n")
    @example(b"a\n\r")
    @example(b"\xe2\x80\xa8\n\xc2\x85")
    def test_decode_lines_reads_as_text_line_dataset(self, data):
        path = self.write(data)
        lines, error = read(read_lines, path)
        self.assertEqual(read(decode_lines, data, path), (lines, error))
        if any(utf8(line) is None for line in text_lines(data)):
            self.assertRegex(error, r"^%s:\d+: not UTF-8" % re.escape(path))
            return
        expected = [
            line.decode("utf-8") for line in tf.data.TextLineDataset(path).as_numpy_iterator()
        ]
        self.assertEqual(lines, expected)


if __name__ == "__main__":
    unittest.main()
