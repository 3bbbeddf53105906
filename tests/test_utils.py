import os
import stat

import tensorflow as tf

from ldr_opennmt.errors import UserError
from ldr_opennmt.utils import atomic_directory, atomic_output, read_lines, write_lines_atomic


class ReadLinesTest(tf.test.TestCase):
    def test_lines_end_at_newline_only(self):
        # As OpenNMT-tf reads the file it translates: U+2028 and U+0085 do not end a line.
        path = os.path.join(self.get_temp_dir(), "text")
        with open(path, "wb") as f:
            f.write("a\u2028b\r\nc\x85d\n\ne".encode("utf-8"))
        self.assertEqual(read_lines(path), ["a\u2028b", "c\x85d", "", "e"])

    def test_not_utf8_names_file_and_line(self):
        path = os.path.join(self.get_temp_dir(), "bad")
        with open(path, "wb") as f:
            f.write(b"ok\nalso ok\nnot \xe9 ok\n")
        with self.assertRaisesRegex(
            UserError, "^%s:3: not UTF-8 \\(byte 0xe9 at byte 5 of the line\\)$" % path
        ):
            read_lines(path)


class AtomicOutputTest(tf.test.TestCase):
    def test_planted_partial_link_is_not_followed(self):
        directory = self.get_temp_dir()
        victim = os.path.join(directory, "victim.txt")
        with open(victim, "w") as f:
            f.write("keep me\n")
        out = os.path.join(directory, "out.txt")
        # The old scheme wrote through the predictable OUT.partial.
        os.symlink(victim, out + ".partial")
        write_lines_atomic(out, ["a", "b"])
        self.assertEqual(read_lines(out), ["a", "b"])
        self.assertEqual(read_lines(victim), ["keep me"])
        self.assertFalse(os.path.islink(out))

    def test_failure_leaves_nothing(self):
        directory = self.get_temp_dir()
        out = os.path.join(directory, "scores.json")
        with open(out, "w") as f:
            f.write("old\n")
        with self.assertRaises(RuntimeError):
            with atomic_output(out) as tmp:
                with open(tmp, "w") as f:
                    f.write("half")
                raise RuntimeError("killed")
        self.assertEqual(read_lines(out), ["old"])
        self.assertEqual(sorted(os.listdir(directory)), ["scores.json"])

    def test_permissions_follow_the_umask(self):
        out = os.path.join(self.get_temp_dir(), "table.md")
        old = os.umask(0o022)
        try:
            write_lines_atomic(out, ["x"])
        finally:
            os.umask(old)
        self.assertEqual(stat.S_IMODE(os.stat(out).st_mode), 0o644)

    def test_directory_replaced_only_when_complete(self):
        parent = self.get_temp_dir()
        export = os.path.join(parent, "export")
        with atomic_directory(export) as tmp:
            write_lines_atomic(os.path.join(tmp, "a"), ["1"])
        self.assertEqual(os.listdir(export), ["a"])
        with self.assertRaises(RuntimeError):
            with atomic_directory(export) as tmp:
                write_lines_atomic(os.path.join(tmp, "b"), ["2"])
                raise RuntimeError("killed")
        self.assertEqual(os.listdir(export), ["a"])
        with atomic_directory(export) as tmp:
            write_lines_atomic(os.path.join(tmp, "c"), ["3"])
        self.assertEqual(os.listdir(export), ["c"])
        self.assertEqual(sorted(os.listdir(parent)), ["export"])


if __name__ == "__main__":
    tf.test.main()
