import os
import re
import stat
from unittest import mock

import tensorflow as tf

from ldr_opennmt import utils
from ldr_opennmt.errors import UserError
from ldr_opennmt.utils import atomic_directory, atomic_output, read_lines, write_lines_atomic
from tests import helpers


class ReadLinesTest(tf.test.TestCase):
    def test_lines_end_at_newline_only(self):
        # As OpenNMT-tf reads the file it translates: U+2028 and U+0085 do not end a line.
        path = os.path.join(self.get_temp_dir(), "text")
        with open(path, "wb") as f:
            f.write("a\u2028b\r\nc\x85d\n\ne".encode("utf-8"))
        self.assertEqual(read_lines(path), ["a\u2028b", "c\x85d", "", "e"])

    def test_byte_order_mark_is_removed_with_a_note(self):
        path = os.path.join(self.get_temp_dir(), "bom")
        with open(path, "wb") as f:
            f.write("\ufeffThe cell\nhere\ufeff\n".encode("utf-8"))
        with mock.patch("sys.stderr") as stderr:
            self.assertEqual(read_lines(path), ["The cell", "here\ufeff"])
        written = "".join(call.args[0] for call in stderr.write.call_args_list)
        self.assertIn("%s starts with a UTF-8 byte order mark" % path, written)

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


class CheckWritableTest(tf.test.TestCase):
    def test_an_output_that_cannot_be_written_is_refused_before_any_work(self):
        parent = self.get_temp_dir()
        locked = helpers.unwritable_directory(self, parent)
        for path, directory in (
            (locked, True),
            (os.path.join(locked, "new", "deeper"), True),  # Would be created there.
            (os.path.join(locked, "pred.txt"), False),
        ):
            with self.assertRaisesRegex(
                UserError,
                r"^--out %s: cannot write in %s \(.+\): choose a folder"
                % (re.escape(path), re.escape(locked)),
            ):
                utils.check_writable(path, "--out", directory=directory)
        a_file = os.path.join(parent, "a_file")
        with open(a_file, "w") as f:
            f.write("x")
        with self.assertRaisesRegex(UserError, "is not a directory"):
            utils.check_writable(os.path.join(a_file, "out"), "--out")
        missing = os.path.join(parent, "none", "p.txt")
        with self.assertRaisesRegex(UserError, "^%s: directory .* not found$" % re.escape(missing)):
            utils.check_writable(missing, "--predictions_file", directory=False)
        # A stream is written in place: nothing is tried in its folder.
        utils.check_writable(os.devnull, "--predictions_file", directory=False)
        # A writable one passes, and nothing is left or created.
        before = sorted(os.listdir(parent))
        utils.check_writable(os.path.join(parent, "new", "out"), "--out")
        utils.check_writable(os.path.join(parent, "pred.txt"), "--out", directory=False)
        self.assertEqual(sorted(os.listdir(parent)), before)


class OutputTreeTest(tf.test.TestCase):
    """Directories of an output tree are never links; files never written through one."""

    def setUp(self):
        super().setUp()
        self.dir = self.get_temp_dir()
        self.root = os.path.join(self.dir, "out")
        os.makedirs(self.root)
        self.outside = os.path.join(self.dir, "outside")
        os.makedirs(self.outside)

    def _plant_raw_link(self):
        raw = os.path.join(self.root, "raw")
        os.symlink(self.outside, raw)
        self.addCleanup(os.remove, raw)  # tf's temporary-directory cleanup trips on it.
        return raw

    def test_make_directories(self):
        path = os.path.join(self.root, "a", "b")
        self.assertEqual(utils.make_directories(path, self.root), path)
        self.assertTrue(os.path.isdir(path))
        self.assertFalse(os.path.islink(os.path.join(self.root, "a")))
        utils.make_directories(path, self.root)  # Existing real directories are fine.

    def test_make_directories_refuses_a_link(self):
        raw = self._plant_raw_link()
        with self.assertRaises(UserError) as context:
            utils.make_directories(os.path.join(raw, "sub"), self.root)
        self.assertEqual(
            str(context.exception),
            "%s: a symbolic link inside the output directory %s: refused (nothing is written"
            " through a link; remove it, or choose another output directory)" % (raw, self.root),
        )
        self.assertEqual(os.listdir(self.outside), [])
        with self.assertRaisesRegex(UserError, "not inside the output directory"):
            utils.make_directories(self.outside, self.root)

    def test_atomic_output_with_root_refuses_a_directory_link(self):
        raw = self._plant_raw_link()
        with self.assertRaisesRegex(UserError, "^%s: a symbolic link inside" % raw):
            write_lines_atomic(os.path.join(raw, "train.en"), ["x"], root=self.root)
        self.assertEqual(os.listdir(self.outside), [])
        # A link at the file itself is replaced, never written through.
        victim = os.path.join(self.outside, "victim")
        write_lines_atomic(victim, ["precious"])
        os.symlink(victim, os.path.join(self.root, "vocab.en"))
        write_lines_atomic(os.path.join(self.root, "vocab.en"), ["new"], root=self.root)
        self.assertEqual(read_lines(victim), ["precious"])
        self.assertFalse(os.path.islink(os.path.join(self.root, "vocab.en")))
        utils.copy_file_atomic(victim, os.path.join(self.root, "copy"), root=self.root)
        self.assertEqual(read_lines(os.path.join(self.root, "copy")), ["precious"])

    def test_resolve_output_root(self):
        link = os.path.join(self.dir, "link")
        os.symlink(self.outside, link)
        self.addCleanup(os.remove, link)  # tf's temporary-directory cleanup trips on it.
        messages = []
        self.assertEqual(
            utils.resolve_output_root(link, "--out", log=messages.append), self.outside
        )
        self.assertEqual(
            messages, ["%s (--out) is a symbolic link: writing into %s" % (link, self.outside)]
        )
        victim = os.path.join(self.outside, "victim")
        write_lines_atomic(victim, ["precious"])
        os.symlink(victim, os.path.join(self.dir, "to_file"))
        with self.assertRaisesRegex(UserError, "is a symbolic link to %s, which is not a" % victim):
            utils.resolve_output_root(os.path.join(self.dir, "to_file"), "--out")
        with self.assertRaisesRegex(UserError, "^%s: --out is not a directory$" % victim):
            utils.resolve_output_root(victim, "--out")
        new = os.path.join(self.dir, "new")
        self.assertEqual(utils.resolve_output_root(new), new)

    def test_remove_output_file(self):
        victim = os.path.join(self.outside, "victim")
        write_lines_atomic(victim, ["precious"])
        done = os.path.join(self.root, "DONE")
        os.symlink(victim, done)
        utils.remove_output_file(done, self.root)  # The link, as a name.
        self.assertFalse(os.path.lexists(done))
        self.assertEqual(read_lines(victim), ["precious"])
        utils.remove_output_file(done, self.root)  # Absent: nothing to do.
        os.makedirs(done)
        with self.assertRaisesRegex(UserError, "a directory where a file was written"):
            utils.remove_output_file(done, self.root)
        raw = self._plant_raw_link()
        write_lines_atomic(os.path.join(self.outside, "train.en"), ["keep"])
        with self.assertRaisesRegex(UserError, "a symbolic link inside"):
            utils.remove_output_file(os.path.join(raw, "train.en"), self.root)
        self.assertEqual(read_lines(os.path.join(self.outside, "train.en")), ["keep"])

    def test_open_for_append_refuses_a_link(self):
        victim = os.path.join(self.outside, "victim")
        write_lines_atomic(victim, ["precious"])
        log = os.path.join(self.root, "train.log")
        os.symlink(victim, log)
        with self.assertRaisesRegex(UserError, "^%s: a symbolic link: not appended to" % log):
            utils.open_for_append(log)
        self.assertEqual(read_lines(victim), ["precious"])
        with utils.open_for_append(os.path.join(self.root, "ok.log")) as f:
            f.write("line\n")
        with utils.open_for_append(os.path.join(self.root, "ok.log")) as f:
            f.write("more\n")
        self.assertEqual(read_lines(os.path.join(self.root, "ok.log")), ["line", "more"])

    def test_nothing_at_the_temporary_name_is_removed_after_the_rename(self):
        # Once renamed, the temporary name is free: a file that appears there is not ours.
        replace = os.replace
        planted = []

        def replace_then_plant(src, dst):
            replace(src, dst)
            with open(src, "w") as f:
                f.write("someone else's\n")
            planted.append(src)

        out = os.path.join(self.root, "scores.json")
        with mock.patch.object(utils.os, "replace", side_effect=replace_then_plant):
            write_lines_atomic(out, ["ok"])
        self.assertEqual(read_lines(planted[0]), ["someone else's"])
        self.assertEqual(read_lines(out), ["ok"])


if __name__ == "__main__":
    tf.test.main()
