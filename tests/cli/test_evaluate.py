"""``ldr-eval``'s command line: what it refuses before it translates anything."""

import os
import re
from unittest import mock

import tensorflow as tf

from ldr_opennmt.cli import evaluate as evaluate_cli
from ldr_opennmt.evaluation import evaluate
from tests import helpers


class OutputTest(tf.test.TestCase):
    def test_an_out_that_cannot_be_written_is_refused_before_anything_is_translated(self):
        # Issue 71 (7): a traceback once the first system was translated.
        folder = self.get_temp_dir()
        config = os.path.join(folder, "run.yml")
        with open(config, "w") as f:
            f.write("model_dir: %s\n" % os.path.join(folder, "model"))
        locked = helpers.unwritable_directory(self, folder)
        out = os.path.join(locked, "eval")
        argv = ["--corpus", folder, "--system", "a=" + config, "--out", out]
        with mock.patch.object(evaluate, "evaluate", side_effect=AssertionError("evaluated")):
            helpers.assert_cli_error(
                self,
                evaluate_cli.main,
                argv,
                r"^--out %s: cannot write in %s \(" % (re.escape(out), re.escape(locked)),
            )
            helpers.assert_cli_error(
                self,
                evaluate_cli.main,
                [evaluate_cli.CONTRASTIVE] + argv,
                r"^--out %s: cannot write in " % re.escape(out),
            )
