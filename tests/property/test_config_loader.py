"""The configuration loader: arbitrary bytes, YAML with every scalar form, alias bombs.

Known bugs of ``ldr_opennmt/config_loader.py`` (outside this folder's files) are expected
failures below, and the property tests let those exceptions through
(:func:`known_bug`). Fixing one turns its expected failure into an unexpected success:
then remove the marker and its entry in :data:`KNOWN_BUGS`.
"""

import os
import re
import shutil
import tempfile
import unittest

import yaml
from hypothesis import example, given
from hypothesis import strategies as st

from tests.property.common import read

try:
    from ldr_opennmt import config_loader
except ImportError:  # Written at the same time as these tests.
    config_loader = None

#: (exception type, message pattern) of each known bug.
KNOWN_BUGS = [
    # yaml.SafeLoader(text) checks the characters in its constructor, outside the try.
    (yaml.reader.ReaderError, "unacceptable character"),
    # PyYAML's timestamp constructor: datetime's ValueError on a date that does not exist.
    (ValueError, "must be in|out of range|day is out of range"),
    # PyYAML's int constructor: Python's limit on the digits of an int (4300).
    (ValueError, r"Exceeds the limit \(\d+ digits\)"),
    # Explicit tags on values they do not fit: !!int abc, !!float x, !!bool maybe.
    (ValueError, "invalid literal for int|could not convert string to float"),
    (KeyError, ""),
    (AttributeError, "groupdict"),  # !!timestamp nope
]


def known_bug(error):
    return any(
        isinstance(error, kind) and re.search(pattern, str(error)) for kind, pattern in KNOWN_BUGS
    )


def load(reader, *args):
    """:func:`read`, letting the known bugs through."""
    try:
        return read(reader, *args)
    except Exception as e:
        if known_bug(e):
            return None, "known bug"
        raise


#: Scalars that PyYAML resolves, or fails to construct, in many ways.
SCALARS = [
    "x",
    "1",
    "-1.5e3",
    ".nan",
    ".inf",
    "0x1F",
    "0o17",
    "0b101",
    "1_000",
    "190:20:30",
    "~",
    "yes",
    "2001-12-14",
    "2001-12-14t21:59:43.10-05:00",
    "2001-13-01",
    "2001-02-30",
    "1" + "0" * 5000,
    "0x" + "f" * 5000,
    "!!int abc",
    "!!float x",
    "!!bool maybe",
    "!!binary AAA",
    "!!binary '%%%'",
    "!!timestamp 2001-02-30",
    "!!timestamp nope",
    "!!python/object/apply:os.system ['true']",
    "!!set {a, b}",
    "!!omap [a]",
    "!!pairs [[a, b]]",
    "!custom x",
    "'quoted\\nline'",
    '"\\x00\\ud800"',
    "|\n  block\n",
]


@st.composite
def yaml_documents(draw):
    """Configurations shaped as YAML text: sections, anchors, aliases, merge keys."""
    lines = []
    anchors = []
    for section in range(draw(st.integers(0, 4))):
        name = draw(st.sampled_from(["data", "train", "params", "eval", "1", "? [a]", "<<"]))
        anchor = "a%d" % section
        value = draw(
            st.one_of(
                st.sampled_from(SCALARS),
                st.sampled_from(anchors).map(lambda a: "*" + a) if anchors else st.just("x"),
                st.lists(st.sampled_from(SCALARS[:8] + ["*" + a for a in anchors]), max_size=4).map(
                    lambda items: "[" + ", ".join(items) + "]"
                ),
            )
        )
        use_anchor = draw(st.booleans())
        lines.append("%s: %s%s" % (name, "&%s " % anchor if use_anchor else "", value))
        if use_anchor:
            anchors.append(anchor)
    if draw(st.booleans()) and anchors:
        lines.append("merged:\n  <<: *%s\n  k: v" % draw(st.sampled_from(anchors)))
    return "\n".join(lines) + draw(st.sampled_from(["", "\n", "\n...\n", "\n---\nb: 1\n"]))


@st.composite
def alias_bombs(draw):
    """The billion laughs shape: LEVELS levels of FANOUT aliases of the level below."""
    levels = draw(st.integers(1, 12))
    fanout = draw(st.integers(1, 12))
    lines = ["l0: &l0 [lol]"]
    for level in range(1, levels + 1):
        lines.append("l%d: &l%d [%s]" % (level, level, ", ".join(["*l%d" % (level - 1)] * fanout)))
    return "\n".join(lines) + "\n"


raw_text = st.text(
    alphabet=st.one_of(
        st.sampled_from(list("ab:-[]{}&*!,?|>'\"#% @`\n\t.01e")),
        st.sampled_from(["\x00", "\x07", "\x85", "\u2028", "\ufeff", "\ud7ff", "\U0001f600"]),
    ),
    max_size=40,
)
files = st.one_of(
    yaml_documents().map(lambda text: text.encode("utf-8")),
    alias_bombs().map(lambda text: text.encode("utf-8")),
    raw_text.map(lambda text: text.encode("utf-8")),
    st.binary(max_size=40),
    st.sampled_from(
        [b"", b"\n", b"[" * 1500, b"a:\n" + b" " * 5000 + b"b", b"{" * 100 + b"}" * 100]
    ),
)


@unittest.skipIf(config_loader is None, "ldr_opennmt.config_loader does not exist yet")
class ConfigLoaderTest(unittest.TestCase):
    def setUp(self):
        super().setUp()
        self.dir = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.dir, ignore_errors=True)
        self._count = 0

    def write(self, data):
        self._count += 1
        path = os.path.join(self.dir, "c%d.yml" % self._count)
        with open(path, "wb") as f:
            f.write(data)
        return path

    @given(files)
    @example(b"\xef\xbb\xbfdata: {}")
    @example(b"params: !!timestamp nope")
    def test_load_config_file(self, data):
        config, error = load(config_loader.load_config_file, self.write(data))
        if error is None:
            self.assertIsInstance(config, dict)

    @given(st.lists(files, min_size=1, max_size=3))
    def test_load_run_config(self, contents):
        paths = [self.write(data) for data in contents]
        config, error = load(config_loader.load_run_config, paths)
        if error is None:
            self.assertIsInstance(config, dict)

    def test_a_directory_or_a_missing_file_is_refused(self):
        read(config_loader.load_config_file, self.dir)
        _, error = read(config_loader.load_config_file, os.path.join(self.dir, "none.yml"))
        self.assertIsNotNone(error)

    # The known bugs.

    @unittest.expectedFailure
    def test_a_control_character_is_a_user_error(self):
        read(config_loader.load_config_file, self.write(b"a: \x01"))

    @unittest.expectedFailure
    def test_a_date_that_does_not_exist_is_a_user_error(self):
        read(config_loader.load_config_file, self.write(b"a: 2001-13-01"))

    @unittest.expectedFailure
    def test_an_int_of_more_than_4300_digits_is_a_user_error(self):
        read(config_loader.load_config_file, self.write(b"a: 1" + b"0" * 5000))

    @unittest.expectedFailure
    def test_an_explicit_tag_that_does_not_fit_is_a_user_error(self):
        for data in (b"a: !!int abc", b"a: !!float x", b"a: !!bool maybe", b"a: !!timestamp x"):
            with self.subTest(data=data):
                read(config_loader.load_config_file, self.write(data))


if __name__ == "__main__":
    unittest.main()
