import os

import tensorflow as tf
from parameterized import parameterized

from ldr_opennmt import domains
from ldr_opennmt.errors import UserError


class DomainsTest(tf.test.TestCase):
    def _write(self, name, lines):
        path = os.path.join(self.get_temp_dir(), name)
        with open(path, "w") as f:
            f.write("".join(line + "\n" for line in lines))
        return path

    def test_validate_names(self):
        self.assertEqual(domains.validate_domain_names(["a", " b "]), ["a", "b"])

    @parameterized.expand(
        [
            (None, "declares no domains"),
            ([], "empty domain list"),
            (["a", "a"], "declared twice"),
            (["a", "generic"], "reserved"),
            ("a", "must be a list"),
            (["a b"], "invalid domain name"),
        ]
    )
    def test_validate_names_errors(self, names, message):
        with self.assertRaisesRegex(UserError, message):
            domains.validate_domain_names(names)

    def test_read_label_file(self):
        path = self._write("ok.domain", ["b", "generic", "a"])
        self.assertEqual(domains.read_label_file(path, ["a", "b"]), [1, -1, 0])

    def test_unknown_label_names_file_line_value(self):
        path = self._write("bad.domain", ["a", "a", "legal"])
        with self.assertRaisesRegex(UserError, r"bad\.domain:3: unknown domain label 'legal'"):
            domains.read_label_file(path, ["a", "b"])

    def test_empty_label(self):
        path = self._write("empty.domain", ["a", "  "])
        with self.assertRaisesRegex(UserError, r"empty\.domain:2: empty domain label"):
            domains.read_label_file(path, ["a"])

    def test_line_count_mismatch(self):
        path = self._write("short.domain", ["a"])
        with self.assertRaisesRegex(
            UserError,
            r"short\.domain:2: missing domain label \(1 labels, but src has 2 lines\)",
        ):
            domains.read_label_file(path, ["a"], expected_lines=2, source_path="src")

    def test_sampling_probabilities(self):
        self.assertAllClose(domains.sampling_probabilities([100, 300], alpha=1), [0.25, 0.75])
        self.assertAllClose(domains.sampling_probabilities([100, 400], alpha=0.5), [1 / 3, 2 / 3])
        self.assertAllClose(domains.sampling_probabilities([1, 50], alpha=0), [0.5, 0.5])
        with self.assertRaisesRegex(UserError, "alpha"):
            domains.sampling_probabilities([1], alpha=-1)
        with self.assertRaisesRegex(UserError, "empty corpus"):
            domains.sampling_probabilities([3, 0])

    def test_lookup_table(self):
        table = domains.make_lookup_table(["a", "b"])
        ids = domains.lookup_domain_ids(table, tf.constant(["b", " a", "generic"]), ["a", "b"])
        self.assertAllEqual(ids, [1, 0, -1])
        with self.assertRaisesRegex(tf.errors.InvalidArgumentError, "Unknown domain label.*zzz"):
            domains.lookup_domain_ids(table, tf.constant(["a", "zzz"]), ["a", "b"])

    def test_tf_one_hot_of_generic_is_zero(self):
        # The convention every domain-aware layer relies on.
        self.assertAllEqual(tf.one_hot([domains.GENERIC_ID, 1], 3), [[0, 0, 0], [0, 1, 0]])


if __name__ == "__main__":
    tf.test.main()
