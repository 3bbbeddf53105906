import os
from unittest import mock

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

    def _write_bytes(self, name, data):
        path = os.path.join(self.get_temp_dir(), name)
        with open(path, "wb") as f:
            f.write(data)
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

    def test_label_file_with_byte_order_mark(self):
        path = os.path.join(self.get_temp_dir(), "bom.domain")
        with open(path, "wb") as f:
            f.write("\ufeffmedical\nsoftware\n".encode("utf-8"))
        with mock.patch("sys.stderr") as stderr:
            ids = domains.read_label_file(path, ["medical", "software"])
        self.assertEqual(ids, [0, 1])
        self.assertIn("byte order mark", stderr.write.call_args.args[0])
        with mock.patch("sys.stderr") as stderr:
            self.assertEqual(domains.count_lines(path), 2)  # The training files' check.
        self.assertIn(
            "%s starts with a UTF-8 byte order mark" % path, stderr.write.call_args.args[0]
        )

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

    def test_label_file_not_utf8_is_one_line(self):
        # Was a UnicodeDecodeError traceback naming neither the file nor the line.
        path = self._write_bytes("latin1.domain", b"a\nb\nm\xe9dical\n")
        with self.assertRaises(UserError) as context:
            domains.read_label_file(path, ["a", "b"])
        self.assertEqual(
            str(context.exception), "%s:3: not UTF-8 (byte 0xe9 at byte 2 of the line)" % path
        )
        self.assertIsNone(context.exception.__cause__)

    def test_label_file_strips_ascii_whitespace_only(self):
        # As tf.strings.strip does in the graph: "a\xa0" is not the label "a".
        path = self._write("nbsp.domain", ["a\r", "\ta ", "a\u00a0"])
        with self.assertRaisesRegex(UserError, r"nbsp\.domain:3: unknown domain label 'a\\xa0'"):
            domains.read_label_file(path, ["a"])

    def test_scan_text_file(self):
        path = self._write_bytes("text", b"one\n\n \t\r\nd\xc3\xa9j\xc3\xa0\n\nlast")
        for chunk_size in (1, 2, 3, 1 << 20):  # Lines and characters across chunks.
            with mock.patch.object(domains, "_CHUNK_SIZE", chunk_size):
                scanned = domains.scan_text_file(path)
            self.assertEqual(scanned.lines, 6)
            self.assertEqual(list(scanned.blank), [2, 3, 5])
        self.assertEqual(domains.count_lines(path), 6)
        self.assertEqual(domains.count_lines(self._write_bytes("none", b"")), 0)
        self.assertEqual(list(domains.scan_text_file(self._write_bytes("sp", b"  ")).blank), [1])

    def test_not_utf8_names_file_and_line(self):
        path = self._write_bytes("bad.txt", b"ok\n\nstill ok\nd\xc3j\xc3\xa0\nok\n")
        for chunk_size in (1, 4, 1 << 20):
            with mock.patch.object(domains, "_CHUNK_SIZE", chunk_size):
                with self.assertRaises(UserError) as context:
                    domains.count_lines(path)
            self.assertEqual(
                str(context.exception), "%s:4: not UTF-8 (byte 0xc3 at byte 2 of the line)" % path
            )

    def _pair(self, name, sources, targets):
        return (
            self._write(name + ".src", sources),
            self._write(name + ".tgt", targets),
        )

    def test_check_parallel_files_reports_empty_pairs_per_file(self):
        source, target = self._pair(
            "p", ["a", "b", "", "d", "e", "f", "g", "h"], ["A", "", "C", " ", "", "", "", ""]
        )
        with self.assertLogs("tensorflow", "WARNING") as logs:
            checked = domains.check_parallel_files(source, target)
        self.assertEqual(
            logs.output,
            [
                "WARNING:tensorflow:%s: 1 of 8 source lines are empty (line 3): these pairs are "
                "dropped from training (nothing to encode)" % source,
                "WARNING:tensorflow:%s: 6 of 8 target lines are empty (lines 2, 4, 5, 6, 7, ...):"
                " these pairs are dropped from training (data: keep_empty_targets: true keeps "
                "them)" % target,
            ],
        )
        self.assertEqual(checked, domains.ParallelFiles(source, target, 8, 1, 6, 7))
        kept = domains.check_parallel_files(source, target, keep_empty=True)
        self.assertEqual(kept.dropped, 1)
        evaluation = domains.check_parallel_files(source, target, training=False)
        self.assertEqual(evaluation.dropped, 0)

    def test_check_parallel_files_reads_unchanged_files_once(self):
        source, target = self._pair("once", ["a", "b"], ["A", ""])
        with self.assertLogs("tensorflow", "WARNING"):
            domains.check_parallel_files(source, target)
        with mock.patch.object(domains, "scan_text_file") as scan:
            domains.check_parallel_files(source, target)
        scan.assert_not_called()
        with open(target, "a") as f:
            f.write("C\n")
        with self.assertRaisesRegex(UserError, r"once\.tgt:3: extra target line \(3 lines, but"):
            domains.check_parallel_files(source, target)

    def test_check_parallel_files_errors(self):
        source, target = self._pair("short", ["a", "b"], ["A"])
        with self.assertRaisesRegex(
            UserError, r"short\.tgt:2: missing target line \(1 lines, but .*short\.src has 2\)"
        ):
            domains.check_parallel_files(source, target)
        source, target = self._pair("void", ["a", ""], ["", "B"])
        with self.assertRaisesRegex(
            UserError, r"void\.tgt: every pair of x has an empty source or target: nothing to"
        ):
            domains.check_parallel_files(source, target, what="x")
        self.assertEqual(domains.check_parallel_files(source, target, keep_empty=True).dropped, 1)
        target = self._write_bytes("bad.tgt", b"A\n\xff\n")
        with self.assertRaisesRegex(UserError, r"bad\.tgt:2: not UTF-8"):
            domains.check_parallel_files(source, target)
        with self.assertRaisesRegex(UserError, "nope.tgt: file not found"):
            domains.check_parallel_files(source, "nope.tgt")

    def test_keep_empty_targets(self):
        self.assertFalse(domains.keep_empty_targets({}))
        self.assertTrue(domains.keep_empty_targets({"keep_empty_targets": True}))
        with self.assertRaisesRegex(UserError, "data: keep_empty_targets must be true or false"):
            domains.keep_empty_targets({"keep_empty_targets": "yes"})

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
