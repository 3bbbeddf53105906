import json
import os
import subprocess
import sys

import pytest
import tensorflow as tf
from parameterized import parameterized

from tests import helpers

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.e2e
class MirroredStrategyTest(tf.test.TestCase):
    # Two replicas (MirroredStrategy, the multi-GPU path) on two logical CPU devices: about
    # 100 s each on a 2-core CPU. Run by LDR_TEST_FULL=1 and `bash run/gpu_check.sh`.
    @parameterized.expand([("procedure1",), ("joint",)])
    @helpers.skip_unless_full("the multi-GPU path (two replicas), about 100 s on the CPU")
    def test_two_replicas_skip_absent_domains(self, mode):
        # Like OpenNMT-tf's own multi-device tests: two logical CPU devices.
        process = subprocess.run(
            [sys.executable, "-m", "tests.training.mirrored_check", self.get_temp_dir(), mode],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=600,
        )
        lines = [line for line in process.stdout.splitlines() if line.startswith("RESULT ")]
        self.assertTrue(lines, msg=process.stderr[-3000:])
        result = json.loads(lines[-1][len("RESULT ") :])
        self.assertEqual(result["num_replicas"], 2)
        self.assertEqual(result["mirrored"], "MirroredVariable")
        self.assertEqual(result["step"], 6)
        self.assertTrue(all(result["changed"]["0"]))  # medical trained
        self.assertFalse(any(result["changed"]["1"]))  # religious absent: bit-identical
        self.assertFalse(any(result["changed"]["2"]))  # software absent: bit-identical
        self.assertTrue(result["replicas_equal"])


if __name__ == "__main__":
    tf.test.main()
