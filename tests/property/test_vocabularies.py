"""Vocabulary and tokenization entries of the ``data`` section, and vocabulary contents.

The Runner checks the entries when it reads the configuration
(:func:`ldr_opennmt.training.runner.check_data_files`), and turns OpenNMT-tf's errors on
a vocabulary's contents into one line naming the key when it builds the model
(:meth:`~ldr_opennmt.training.runner.Runner.checked_new_model`). The inputs that still
escape as another exception are known bugs of ``runner.py``, outside this folder's
files: each is an expected failure below, and the property tests leave those inputs out
(:func:`known_bug`). Fixing one turns its expected failure into an unexpected success:
then remove the marker and the input from :func:`known_bug`.
"""

import itertools
import os
import re
import shutil
import tempfile
import unittest

import opennmt
import tensorflow as tf
from hypothesis import example, given
from hypothesis import strategies as st

from ldr_opennmt.errors import UserError
from ldr_opennmt.training.runner import Runner, check_data_files
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
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def known_bug(data):
    """Whether check_data_files fails on :obj:`data` with another exception or a
    multi-line message (see the expected failures below)."""
    for key, value in data.items():
        if not isinstance(key, str):
            return True
        if not isinstance(value, str) or not key.endswith(("_vocabulary", "_tokenization")):
            continue
        if value.splitlines() != [value] or (
            _SCHEME.match(value) and not value.startswith(("file://", "ram://"))
        ):
            return True
    return False


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
        if known_bug(data):
            return
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
        path = os.path.join(self.dir, "v%d.txt" % next(_NUMBERS))
        with open(path, "wb") as f:
            f.write(data)
        try:
            read(check_vocabulary, path)
        except (tf.errors.OpError, ValueError) as e:
            # The known bug of test_an_opennmt_error_that_does_not_name_the_file_...: an
            # error of OpenNMT-tf that does not name the file is re-raised as it is.
            self.assertNotIsInstance(e, UserError)
            self.assertNotIn(path, str(e))

    # The known bugs (runner.py, outside this folder's files).

    @unittest.expectedFailure
    def test_an_unknown_scheme_is_a_user_error(self):
        # tf.errors.UnimplementedError from tf.io.gfile.exists.
        read(check_data_files, {"source_vocabulary": "zz://host/vocab"})

    @unittest.expectedFailure
    def test_a_path_with_a_line_break_is_quoted(self):
        # "data: source_vocabulary: file not found: a\nb" is two lines.
        read(check_data_files, {"source_vocabulary": "a\nb"})

    @unittest.expectedFailure
    def test_a_key_that_is_not_a_string_is_a_user_error(self):
        # TypeError from sorted(data.items()) (YAML reads `1: x` as an int key).
        read(check_data_files, {1: "x", "source_vocabulary": self.vocabulary})

    @unittest.expectedFailure
    def test_deeply_nested_inline_tokenization_is_a_user_error(self):
        # RecursionError from json.loads.
        read(check_data_files, {"source_tokenization": "[" * 5000})

    @unittest.expectedFailure
    def test_an_opennmt_error_that_does_not_name_the_file_is_a_user_error(self):
        # A duplicate token and <unk>: FailedPreconditionError "HashTable has different
        # value for same key", which does not name the file: checked_new_model re-raises it.
        path = os.path.join(self.dir, "duplicates.txt")
        with open(path, "wb") as f:
            f.write(b"a\na\n<unk>\n")
        read(check_vocabulary, path)

    @unittest.expectedFailure
    def test_an_empty_vocabulary_is_a_user_error(self):
        # OpenNMT-tf's ValueError "`vocab_size` should be > 0" does not name the file, so
        # checked_new_model re-raises it.
        path = os.path.join(self.dir, "empty.txt")
        open(path, "wb").close()
        read(check_vocabulary, path)

    @unittest.expectedFailure
    def test_a_vocabulary_that_is_not_utf8_is_a_user_error(self):
        # UnicodeDecodeError (OpenNMT-tf reads the file as text); its message does not name
        # the file either.
        path = os.path.join(self.dir, "latin1.txt")
        with open(path, "wb") as f:
            f.write(b"caf\xe9\n")
        read(check_vocabulary, path)


if __name__ == "__main__":
    unittest.main()
