import errno
import io
from unittest import mock

import tensorflow as tf

from ldr_opennmt import errors


def _raise(error):
    def main():
        raise error

    return main


class RunMainTest(tf.test.TestCase):
    def _run(self, error):
        with mock.patch("sys.stderr", new_callable=io.StringIO) as stderr:
            status = errors.run_main("prog", _raise(error))
        return status, stderr.getvalue()

    def test_user_error_is_one_line_and_status_2(self):
        status, text = self._run(errors.UserError("x.yml: bad"))
        self.assertEqual((status, text), (2, "prog: error: x.yml: bad\n"))

    def test_a_full_disk_is_one_line_naming_the_file(self):
        # Python's writes (an export's files, a translation) and TensorFlow's (a checkpoint).
        status, text = self._run(OSError(errno.ENOSPC, "No space left on device", "/d/model.bin"))
        self.assertEqual(status, errors.DISK_FULL_STATUS)
        self.assertEqual(text.count("\n"), 1)
        self.assertIn(
            "prog: error: No space left on device (writing /d/model.bin): free some space", text
        )
        status, text = self._run(
            tf.errors.ResourceExhaustedError(
                None,
                None,
                "{{function_node __wrapped__SaveV2_dtypes_279_device_/job:localhost}}"
                " /d/ckpt-5.data-00000-of-00001.tempstate1; No space left on device [Op:SaveV2]",
            )
        )
        self.assertEqual(status, errors.DISK_FULL_STATUS)
        self.assertIn(
            "prog: error: /d/ckpt-5.data-00000-of-00001.tempstate1; No space left on device:", text
        )
        self.assertIn("resumes from its last complete checkpoint", text)

    def test_other_errors_keep_their_traceback(self):
        with self.assertRaises(OSError):
            errors.run_main("prog", _raise(OSError(errno.EIO, "I/O error")))
        with self.assertRaises(ZeroDivisionError):
            errors.run_main("prog", _raise(ZeroDivisionError()))


if __name__ == "__main__":
    tf.test.main()
