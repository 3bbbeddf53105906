"""ldr-eval's progress bars and stopped-translation warnings, per system, mode and domain
(issue 47 item 5). Through ldr-eval: tests/evaluation/test_evaluate.py."""

import contextlib
import io

import tensorflow as tf

from ldr_opennmt.evaluation.progress import TranslationProgress
from tests.evaluation.common import logged

COUNTS = {"medical": 2, "religious": 3}


class TranslationProgressTest(tf.test.TestCase):
    def test_each_translation_has_its_mode_and_domain(self):
        progress = TranslationProgress("LDR", ["oracle", "generic"], COUNTS, disable=True)
        self.assertEqual(
            [progress.where(i) for i in range(10)],
            [("oracle", "medical")] * 2
            + [("oracle", "religious")] * 3
            + [("generic", "medical")] * 2
            + [("generic", "religious")] * 3,
        )

    def test_warnings_name_system_mode_and_domain(self):
        progress = TranslationProgress("LDR", ["oracle", "generic"], COUNTS, disable=True)
        # oracle: the second medical sentence stopped; generic: two religious ones.
        for stopped in [False, True, False, False, False, False, False, True, False, True]:
            progress(stopped, 7)
        with logged() as messages:
            lines = progress.report()
        expected = [
            "system LDR, mode oracle, domain medical: 1 of 2 translations stopped at"
            " maximum_decoding_length (7): they may be cut short (raise params:"
            " maximum_decoding_length)",
            "system LDR, mode generic, domain religious: 2 of 3 translations stopped at"
            " maximum_decoding_length (7): they may be cut short (raise params:"
            " maximum_decoding_length)",
        ]
        self.assertEqual(lines, expected)
        self.assertEqual(messages, expected)
        # Nothing stopped: nothing said.
        quiet = TranslationProgress("Mixed", ["oracle"], COUNTS, disable=True)
        for _ in range(5):
            quiet(False, 7)
        self.assertEqual(quiet.report(), [])

    def test_a_progress_bar_per_mode(self):
        stderr = io.StringIO()
        with contextlib.redirect_stderr(stderr):
            progress = TranslationProgress("LDR", ["oracle", "wrong"], COUNTS, disable=False)
            for _ in range(10):
                progress(False, 7)
            progress.report()
        text = stderr.getvalue()
        for mode in ("oracle", "wrong"):
            self.assertRegex(text, r"LDR \(%s\): 100%%.*5/5" % mode)

    def test_a_line_per_system_and_mode_when_not_on_a_terminal(self):
        # Issue 55 item 7: in a log file or a pipeline (StringIO is no terminal) the bars are
        # off, and each mode says when it starts and ends.
        stderr = io.StringIO()
        with contextlib.redirect_stderr(stderr):
            progress = TranslationProgress("LDR", ["oracle", "wrong"], COUNTS)
            for _ in range(10):
                progress(False, 7)
            progress.report()
        lines = stderr.getvalue().splitlines()
        self.assertLen(lines, 4, lines)
        self.assertEqual(lines[0], "[eval] LDR (oracle): translating 5 sentences")
        self.assertRegex(
            lines[1], r"^\[eval\] LDR \(oracle\): 5 sentences translated in \d+\.\d s$"
        )
        self.assertEqual(lines[2], "[eval] LDR (wrong): translating 5 sentences")
        self.assertRegex(lines[3], r"^\[eval\] LDR \(wrong\): 5 sentences translated in")
        self.assertNotIn("%", stderr.getvalue())  # No bar.


if __name__ == "__main__":
    tf.test.main()
