"""The configuration loader: arbitrary bytes, YAML with every scalar form, alias bombs."""

import os
import re
import shutil
import tempfile
import unittest

from hypothesis import example, given
from hypothesis import strategies as st

from ldr_opennmt import config_loader
from tests.property.common import read

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
        config, error = read(config_loader.load_config_file, self.write(data))
        if error is None:
            self.assertIsInstance(config, dict)

    @given(st.lists(files, min_size=1, max_size=3))
    def test_load_run_config(self, contents):
        paths = [self.write(data) for data in contents]
        config, error = read(config_loader.load_run_config, paths)
        if error is None:
            self.assertIsInstance(config, dict)

    def test_a_directory_or_a_missing_file_is_refused(self):
        _, error = read(config_loader.load_config_file, self.dir)
        self.assertIsNotNone(error)
        _, error = read(config_loader.load_config_file, os.path.join(self.dir, "none.yml"))
        self.assertIsNotNone(error)

    def refused(self, data):
        """The message of the UserError on a file holding :obj:`data`."""
        path = self.write(data)
        _, error = read(config_loader.load_config_file, path)
        self.assertIsNotNone(error, "%r accepted" % data)
        return path, error

    # Fixed bugs: each raised another exception than UserError.

    def test_a_control_character_is_a_user_error(self):
        # yaml.SafeLoader(text) checks the characters in its constructor: ReaderError.
        for data, line in ((b"a: \x01", 1), (b"a:\n  b: [1,\n  \x07]", 3)):
            with self.subTest(data=data):
                path, error = self.refused(data)
                self.assertRegex(
                    error,
                    "^%s:%d: invalid YAML: unacceptable character #x00" % (re.escape(path), line),
                )

    def test_a_date_that_does_not_exist_is_a_user_error(self):
        # ValueError from datetime in PyYAML's timestamp constructor.
        for data in (b"a: 2001-13-01", b"a:\n  b: 2001-02-30"):
            with self.subTest(data=data):
                path, error = self.refused(data)
                self.assertRegex(
                    error,
                    r"^%s:\d: invalid YAML: cannot make !!timestamp from '2001-..-..': "
                    % re.escape(path),
                )

    def test_an_int_of_more_than_4300_digits_is_a_user_error(self):
        # ValueError "Exceeds the limit (4300 digits)" from int(); the same int in base
        # 16 was read, then refused by str() wherever the configuration was printed.
        for data in (b"a: 1" + b"0" * 5000, b"a: 0x" + b"f" * 5000, b"a: 1" + b":0" * 5000):
            with self.subTest(data=data[:10]):
                path, error = self.refused(data)
                self.assertRegex(
                    error,
                    r"^%s:1: invalid YAML: cannot make !!int from '[0-9a-fx:]{40}'\.\.\. "
                    r"\(\d+ characters\): an? (int of more than \d+ digits|sexagesimal int of "
                    r"more than \d+ parts)$" % re.escape(path),
                )
        self.assertEqual(
            read(config_loader.load_config_file, self.write(b"a: 1:20:30"))[0]["a"], 4830
        )
        config, _ = read(config_loader.load_config_file, self.write(b"a: 1" + b"0" * 4299))
        self.assertEqual(config["a"], 10**4299)

    def test_an_explicit_tag_that_does_not_fit_is_a_user_error(self):
        # ValueError, KeyError, AttributeError or IndexError from PyYAML's constructors.
        cases = [
            (b"a: !!int abc", "!!int from 'abc': invalid literal for int"),
            (b"a: !!float x", "!!float from 'x': could not convert string to float"),
            (b"a: !!bool maybe", "!!bool from 'maybe': not a valid !!bool"),
            (b"a: !!timestamp x", "!!timestamp from 'x': not a valid !!timestamp"),
            (b"a: !!int ''", "!!int from '': not a valid !!int"),
            (b"a: 1\nb: [1, !!int x]", "!!int from 'x': "),
        ]
        for data, regex in cases:
            with self.subTest(data=data):
                path, error = self.refused(data)
                line = data.count(b"\n") + 1
                self.assertRegex(
                    error, "^%s:%d: invalid YAML: cannot make %s" % (re.escape(path), line, regex)
                )


if __name__ == "__main__":
    unittest.main()
