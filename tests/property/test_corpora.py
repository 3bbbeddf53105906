"""Per-domain corpora and domain lists: the ``data`` section with arbitrary YAML values."""

import math
import os
import shutil
import tempfile
import unittest

from hypothesis import example, given
from hypothesis import strategies as st

from ldr_opennmt import domains
from ldr_opennmt.names import check_path_name
from ldr_opennmt.training import corpora
from tests.property.common import path_tokens, read, tricky_text, yaml_scalars, yaml_values

#: The files a path token ``@NAME`` stands for (written once for the class).
FILES = {
    "@src": b"one\ntwo\nthree\n",
    "@tgt": b"un\r\ndeux\r\ntrois",
    "@short": b"un\n",
    "@empty": b"",
    "@blank": b" \n\t\n\n",
    "@latin1": b"caf\xe9\n",
    "@bom": b"\xef\xbb\xbfone\ntwo\nthree\n",
}

names = st.one_of(
    st.sampled_from(["a", "b", "med", "generic", "ens-x", "a:b", "", " a ", "a b", "..", "a/b"]),
    yaml_scalars,
)
paths = st.one_of(st.sampled_from(sorted(FILES) + ["@dir"]), path_tokens)
specs = st.one_of(
    st.lists(paths, min_size=2, max_size=2),
    st.fixed_dictionaries({"source": paths, "target": paths}),
    yaml_values(st.one_of(paths, yaml_scalars), max_leaves=4),
)
corpora_values = st.one_of(st.dictionaries(names, specs, max_size=3), yaml_values())
data_sections = st.fixed_dictionaries(
    {},
    optional={
        "domains": st.one_of(st.lists(names, max_size=4), yaml_values()),
        "train_corpora": corpora_values,
        "eval_corpora": corpora_values,
        "keep_empty_targets": st.one_of(st.booleans(), yaml_scalars),
    },
)


class CorporaTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.dir = tempfile.mkdtemp()
        cls.files = {"@dir": cls.dir}
        for token, data in FILES.items():
            cls.files[token] = os.path.join(cls.dir, token[1:] + ".txt")
            with open(cls.files[token], "wb") as f:
                f.write(data)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)
        super().tearDownClass()

    def resolve(self, value):
        """:obj:`value` with each ``@NAME`` token replaced by its file's path."""
        if isinstance(value, str):
            return self.files.get(value, value)
        if isinstance(value, list):
            return [self.resolve(item) for item in value]
        if isinstance(value, dict):
            return {key: self.resolve(item) for key, item in value.items()}
        return value

    @given(data_sections, st.sampled_from(["train_corpora", "eval_corpora"]))
    @example({"train_corpora": {"a": ["zz://host/x", "@tgt"]}}, "train_corpora")
    @example({"train_corpora": {"a": ["\udcff", "@tgt"]}}, "train_corpora")
    @example({"train_corpora": {"a": ["@dir", "@tgt"]}}, "train_corpora")
    @example({"eval_corpora": {"a": ["@src", "missing\nfile"]}}, "eval_corpora")
    def test_read_corpora(self, data, key):
        data = self.resolve(data)
        result, error = read(corpora.read_corpora, data, key)
        if error is not None or result is None:
            return
        declared = corpora.domain_names(data)
        given = {str(name) for name in data[key]}
        self.assertEqual([c.domain for c in result], [d for d in declared if d in given])
        for corpus in result:
            self.assertGreater(corpus.size, 0)
            check_path_name(corpus.domain, "domain name", "test")

    @given(data_sections)
    @example({"train_corpora": 5})
    @example({"train_corpora": "abc"})
    def test_domain_names(self, data):
        data = self.resolve(data)
        names, error = read(corpora.domain_names, data)
        if error is None and data.get("domains") is None:
            # From the corpora: a mapping of domain names, never a string's letters.
            key = "train_corpora" if data.get("train_corpora") else "eval_corpora"
            self.assertIsInstance(data[key], dict)
        if error is None:
            self.assertTrue(names)
            self.assertEqual(len(set(names)), len(names))
            for name in names:
                check_path_name(name, "domain name", "test")
                self.assertNotEqual(name, domains.GENERIC)

    @given(
        st.one_of(st.lists(names, max_size=5), yaml_values(st.one_of(names, tricky_text))),
    )
    @example(["a", "a\u2028"])
    @example([["a"]])
    def test_validate_domain_names(self, value):
        names, error = read(domains.validate_domain_names, value, source="data: domains")
        if error is None:
            self.assertEqual(len(set(names)), len(names))
            for name in names:
                check_path_name(name, "domain name", "test")

    @given(st.one_of(st.booleans(), yaml_values()))
    def test_keep_empty_targets(self, value):
        kept, error = read(domains.keep_empty_targets, {domains.KEEP_EMPTY_TARGETS: value})
        if error is None:
            self.assertIs(kept, value)

    @given(
        st.lists(st.integers(1, 10**9), min_size=1, max_size=4),
        st.one_of(yaml_scalars, st.floats(0, 1e4), st.sampled_from(["0.5", "1e400", " 2 "])),
    )
    @example([10**6, 10], 10**400)
    @example([10**6, 10], math.nan)
    @example([10**6, 10], 200)
    @example([10**9] * 4, 34.2)
    def test_sampling(self, sizes, alpha):
        result = [corpora.Corpus("d%d" % i, "s", "t", size) for i, size in enumerate(sizes)]
        sampled, error = read(corpora.sampling, result, alpha)
        if error is None:
            probabilities, weights = sampled
            self.assertAlmostEqual(sum(probabilities), 1.0, places=6)
            for value in probabilities + weights:
                self.assertTrue(math.isfinite(value) and value >= 0, sampled)


if __name__ == "__main__":
    unittest.main()
