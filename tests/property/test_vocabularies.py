"""Vocabulary and tokenization entries of the ``data`` section, and vocabulary contents.

The Runner checks the entries, and the contents of every vocabulary file, when it reads
the configuration (:func:`ldr_opennmt.training.data_files.check_data_files`), and turns
OpenNMT-tf's errors on a file into one line naming the key when it builds the model
(:meth:`~ldr_opennmt.training.runner.Runner.checked_new_model`).
"""

import itertools
import os
import shutil
import tempfile
import unittest

import opennmt
from hypothesis import example, given
from hypothesis import strategies as st

from ldr_opennmt.training.data_files import check_data_files
from ldr_opennmt.training.runner import Runner
from tests.property.common import path_tokens, read, tricky_text, yaml_values

KEYS = [
    "source_vocabulary",
    "target_vocabulary",
    "source_1_vocabulary",
    "source_tokenization",
    "target_tokenization",
    "train_features_file",
]
_NUMBERS = itertools.count()


class _VocabularyOnly:
    """What Runner.checked_new_model needs of a Runner, whose model is a word embedder:
    OpenNMT-tf reads the vocabulary as a model's initialization does, without a model."""

    def new_model(self, config):
        embedder = opennmt.inputters.WordEmbedder(embedding_size=4)
        embedder.initialize({"vocabulary": config["data"]["source_vocabulary"]})
        return embedder


def check_vocabulary(path):
    """The Runner's checks of a ``source_vocabulary`` file, in their order."""
    data = {"source_vocabulary": path}
    check_data_files(data)
    return Runner.checked_new_model(_VocabularyOnly(), {"data": data})


class VocabularyTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.dir = tempfile.mkdtemp()
        cls.vocabulary = os.path.join(cls.dir, "vocab.txt")
        with open(cls.vocabulary, "w") as f:
            f.write("<blank>\n<s>\n</s>\na\nb\n")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)
        super().tearDownClass()

    def resolve(self, value):
        if isinstance(value, str):
            return {"@vocab": self.vocabulary, "@dir": self.dir}.get(value, value)
        return value

    @given(
        st.dictionaries(
            st.one_of(st.sampled_from(KEYS), tricky_text),
            st.one_of(
                st.sampled_from(["@vocab", "@dir", '{"mode": "aggressive"}', "[1, 2]", "{"]),
                path_tokens,
                yaml_values(),
            ),
            max_size=4,
        )
    )
    @example({"source_vocabulary": "@dir"})
    @example({"source_tokenization": "null"})
    def test_check_data_files(self, data):
        data = {key: self.resolve(value) for key, value in data.items()}
        read(check_data_files, data)

    @given(
        st.lists(
            st.one_of(
                st.sampled_from(["a", "a", "<unk>", "<s>", "", " ", "a b", "a\r", "\u2028"]),
                tricky_text.filter(lambda t: "\n" not in t),
            ),
            max_size=8,
        ).map(lambda tokens: "".join(t + "\n" for t in tokens).encode("utf-8")),
    )
    @example(b"a\n\n")
    @example(b"a\na\n")
    def test_vocabulary_contents(self, data):
        model, error = read(check_vocabulary, self.write(data))
        if error is None:
            tokens = [line.replace(b"\r", b"") for line in data.split(b"\n")[:-1]]
            self.assertEqual(model.vocabulary_size, len(tokens) + 1)  # + the OOV bucket.

    def write(self, data, name=None):
        path = os.path.join(self.dir, name or "v%d.txt" % next(_NUMBERS))
        with open(path, "wb") as f:
            f.write(data)
        return path

    def refused(self, reader, *args):
        _, error = read(reader, *args)
        self.assertIsNotNone(error, "accepted: %r" % (args,))
        return error

    # Fixed bugs: each raised another exception than UserError, or a multi-line message.

    def test_an_unknown_scheme_is_a_user_error(self):
        # tf.errors.UnimplementedError from tf.io.gfile.exists.
        for key in ("source_vocabulary", "target_tokenization"):
            with self.subTest(key=key):
                self.assertRegex(
                    self.refused(check_data_files, {key: "zz://host/vocab"}),
                    r"^data: %s: cannot read zz://host/vocab \(File system scheme 'zz' not "
                    r"implemented" % key,
                )

    def test_a_path_with_a_line_break_is_quoted(self):
        # "data: source_vocabulary: file not found: a\nb" was two lines.
        for path in ("a\nb", "a\rb", "a\u2028b", ""):
            with self.subTest(path=path):
                self.assertEqual(
                    self.refused(check_data_files, {"source_vocabulary": path}),
                    "data: source_vocabulary: file not found: %r" % path,
                )

    def test_a_key_that_is_not_a_string_is_a_user_error(self):
        # TypeError from sorted(data.items()) (YAML reads `1: x` as an int key).
        self.assertEqual(
            self.refused(check_data_files, {1: "x", "source_vocabulary": self.vocabulary}),
            "data: 1: a key that is not a string (int)",
        )

    def test_deeply_nested_inline_tokenization_is_a_user_error(self):
        # RecursionError from json.loads.
        self.assertRegex(
            self.refused(check_data_files, {"source_tokenization": "[" * 5000}),
            r"^data: source_tokenization: neither a file nor an inline JSON configuration "
            r"\(nested too deeply\): '\[{40}'\.\.\. \(5000 characters\)$",
        )

    def test_an_inline_tokenization_is_a_json_object(self):
        # OpenNMT-tf raises ValueError on another JSON value; "" is no tokenization.
        self.assertEqual(
            self.refused(check_data_files, {"source_tokenization": "null"}),
            "data: source_tokenization: neither a file nor an inline JSON object (got a "
            "NoneType): 'null'",
        )
        for value in ('{"mode": "aggressive"}', "{}", ""):
            with self.subTest(value=value):
                self.assertEqual(
                    read(check_data_files, {"source_tokenization": value}), (None, None)
                )

    def test_an_opennmt_error_that_does_not_name_the_file_is_a_user_error(self):
        # A duplicate token and <unk>: FailedPreconditionError "HashTable has different
        # value for same key", which does not name the file.
        path = self.write(b"a\na\n<unk>\n", "duplicates.txt")
        self.assertEqual(
            self.refused(check_vocabulary, path), "%s:2: token 'a' repeats line 1" % path
        )

    def test_an_empty_vocabulary_is_a_user_error(self):
        # OpenNMT-tf's ValueError "`vocab_size` should be > 0" does not name the file.
        for data in (b"", b"\r"):
            with self.subTest(data=data):
                path = self.write(data)
                self.assertEqual(
                    self.refused(check_vocabulary, path),
                    "data: source_vocabulary: empty vocabulary file: %s" % path,
                )

    def test_a_vocabulary_that_is_not_utf8_is_a_user_error(self):
        # UnicodeDecodeError (OpenNMT-tf reads the file as text), not naming the file.
        path = self.write(b"a\ncaf\xe9\n", "latin1.txt")
        self.assertEqual(
            self.refused(check_vocabulary, path),
            "%s:2: not UTF-8 (byte 0xe9 at byte 4 of the line)" % path,
        )

    def test_what_opennmt_accepts_is_accepted(self):
        # One token per line, the whole line (no frequency column), "\r" dropped, "\u2028"
        # inside a token, a last line without "\n".
        cases = [
            (b"a 5\nb\t7\n", 2),
            (b"a\r\nb\r\n", 2),
            ("a\u2028b\nc".encode(), 2),
            (b"a\n\r", 1),
            (b"a\n\r\r\n", 2),
        ]
        for data, tokens in cases:
            with self.subTest(data=data):
                model, error = read(check_vocabulary, self.write(data))
                self.assertIsNone(error)
                self.assertEqual(model.vocabulary_size, tokens + 1)  # + the OOV bucket.


if __name__ == "__main__":
    unittest.main()
