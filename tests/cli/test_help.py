"""``--help`` of the commands (issue 55, item 7): the usage first, with no TensorFlow or
TensorFlow Addons log lines before it, and ``ldr-main --help`` names ldr-main's additions."""

import os
import subprocess
import sys
import unittest

import pytest

from ldr_opennmt.cli import main as main_cli

BIN = os.path.dirname(sys.executable)


@pytest.mark.e2e
class HelpTest(unittest.TestCase):
    def test_help_prints_the_usage_and_nothing_of_tensorflow(self):
        # As a user runs them: without run/setup_env.sh's TF_CPP_MIN_LOG_LEVEL and
        # PYTHONWARNINGS. Started together: each imports TensorFlow.
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("TF_CPP_MIN_LOG_LEVEL", "PYTHONWARNINGS")
        }
        commands = {"ldr-main": ["--help"], "ldr-data": ["build", "--help"]}
        processes = {
            name: subprocess.Popen(
                [os.path.join(BIN, name)] + args,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for name, args in commands.items()
        }
        outputs = {}
        for name, process in processes.items():
            stdout, stderr = process.communicate(timeout=300)
            with self.subTest(command=name):
                self.assertEqual(process.returncode, 0, stderr)
                self.assertTrue(stdout.startswith("usage: %s" % name), stdout[:300])
                self.assertEqual(stderr, "")
                outputs[name] = stdout
        # ldr-main's additions follow onmt-main's usage.
        self.assertIn(main_cli.ADDITIONS.strip(), outputs["ldr-main"])
        for name in ("--list-families", "check-family", "predict_domains"):
            self.assertIn(name, outputs["ldr-main"])


if __name__ == "__main__":
    unittest.main()
