import os

import tensorflow as tf

from experiments import common

STEP_LOG = (
    "2026-11-23 09:11:01.388000: I runner.py:310] Step = %d ; steps/s = %.2f, tokens/s = %d"
    " (%d source, %d target) ; Learning rate = 0.001116 ; Loss = 7.382585\n"
)


class CommonTest(tf.test.TestCase):
    def test_training_speed_of_the_last_run(self):
        path = os.path.join(self.get_temp_dir(), "train.log")
        with open(path, "w") as f:
            # An interrupted run, then the run that resumed it: only the last counts.
            f.write("$ ldr-main train\n" + STEP_LOG % (100, 0.5, 2000, 900, 1100))
            f.write("$ ldr-main train\n" + STEP_LOG % (100, 0.0, 0, 0, 0))  # After a restore.
            f.write(STEP_LOG % (200, 1.0, 3000, 1000, 2000))
            f.write(STEP_LOG % (300, 2.0, 3000, 2000, 1000))
        self.assertEqual(common.training_speed(path), (1.5, 1500.0))
        with open(path, "a") as f:
            f.write("$ ldr-main train\nalready trained\n")
        self.assertIsNone(common.training_speed(path))
        self.assertIsNone(common.training_speed(path + ".missing"))

    def test_timing_lines(self):
        steps = common.Steps(os.path.join(self.get_temp_dir(), "out"))
        steps.timings = [("corpus", 30.0), ("train Mixed", 300.0)]
        steps.speeds = {"train Mixed": (4.25, 8123.4)}
        lines = steps.timing_lines(600.0)
        self.assertEqual(lines[2], "| corpus | 0.5 |  |  |")
        self.assertEqual(lines[3], "| train Mixed | 5.0 | 4.25 | 8123 |")
        self.assertEqual(lines[-1], "| total | 10.0 | | |")


if __name__ == "__main__":
    tf.test.main()
