"""``ldr-experiments levers``: the throughput table at batch and vocabulary sizes, with the
measurement injected (the real one trains the demo's Mixed, about 25 s a point)."""

import io
import json
import os
import unittest
from contextlib import redirect_stdout
from unittest import mock

import tensorflow as tf

from ldr_experiments import host_speed, levers


def _speed(steps=None, batch=None, length=None, vocab=None):
    """A made-up host: a step costs 50 ms of overhead plus 2 us per token per 1000 words."""
    return 1.0 / (0.05 + batch * length * vocab * 2e-9)


class LeversTest(tf.test.TestCase):
    def test_every_point_is_measured_tabled_and_drawn(self):
        out = os.path.join(self.get_temp_dir(), "levers")
        argv = ["--out", out, "--batch-tokens", "1024", "4096", "--vocab", "8000", "2000"]
        with mock.patch.object(host_speed, "measure_lanes", side_effect=_speed) as measured:
            with redirect_stdout(io.StringIO()) as stdout:
                self.assertEqual(levers.main(argv), 0)
        self.assertEqual(measured.call_count, 4)
        sizes = [(c.kwargs["batch"], c.kwargs["vocab"]) for c in measured.call_args_list]
        self.assertEqual(sizes, [(43, 8000), (171, 8000), (43, 2000), (171, 2000)])
        with open(os.path.join(out, "levers.json")) as f:
            points = json.load(f)["points"]
        first = points[0]
        self.assertEqual((first["batch_tokens"], first["sentences"]), (43 * 24, 43))
        self.assertEqual(
            first["tokens_per_s"], round(_speed(batch=43, length=24, vocab=8000) * 43 * 24)
        )
        with open(os.path.join(out, "levers.md")) as f:
            text = f.read()
        self.assertIn("| 1032 tokens, 8000 words | 1032 | 8000 |", text)
        self.assertIn("x1.00", text)
        # A bigger batch and a smaller vocabulary each buy tokens per second here.
        self.assertGreater(points[1]["tokens_per_s"], first["tokens_per_s"])
        self.assertGreater(points[2]["tokens_per_s"], first["tokens_per_s"])
        with open(os.path.join(out, "levers.png"), "rb") as f:
            self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")
        # Progress, one line a point, then the table.
        lines = stdout.getvalue().splitlines()
        self.assertTrue(lines[0].startswith("[levers] 1032 tokens per batch, vocabulary 8000: "))
        self.assertIn("# Training throughput", stdout.getvalue())

    def test_a_failed_point_is_said_and_fails_the_command(self):
        out = os.path.join(self.get_temp_dir(), "failed")
        argv = ["--out", out, "--batch-tokens", "1024", "--vocab", "8000"]
        with mock.patch.object(host_speed, "measure_lanes", return_value=None):
            with redirect_stdout(io.StringIO()):
                self.assertEqual(levers.main(argv), 1)
        with open(os.path.join(out, "levers.md")) as f:
            self.assertIn("| 1032 tokens, 8000 words | 1032 | 8000 | - | - | - |", f.read())

    def test_bad_sizes_are_refused(self):
        for argv in (["--vocab", "0"], ["--batch-tokens", "-5"], ["--steps", "0"]):
            with self.assertRaises(SystemExit), mock.patch("sys.stderr"):
                levers.main(["--out", self.get_temp_dir()] + argv)


if __name__ == "__main__":
    unittest.main()
