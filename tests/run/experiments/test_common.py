import os
import sys
import threading
import time

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
        steps.cores = {"train Mixed": [1]}
        lines = steps.timing_lines(600.0)
        self.assertEqual(lines[2], "| corpus | all | 0.5 |  |  |")
        self.assertEqual(lines[3], "| train Mixed | 1 | 5.0 | 4.25 | 8123 |")
        self.assertEqual(lines[-1], "| total | all | 10.0 | | |")

    def test_jobs_run_after_their_dependencies(self):
        events = []
        lock = threading.Lock()

        def job(name, after=(), seconds=0.0):
            def run(cores):
                with lock:
                    events.append(("start", name, cores))
                time.sleep(seconds)
                with lock:
                    events.append(("end", name, cores))

            return common.Job(name, run, after)

        jobs = [
            job("long", seconds=0.3),
            job("base", seconds=0.1),
            job("child", after=["base"]),
            job("last", after=["long", "child"]),
        ]
        common.run_jobs(jobs, lanes=[[0], [1]])
        order = [(kind, name) for kind, name, _ in events]
        for before, after in (("base", "child"), ("long", "last"), ("child", "last")):
            self.assertLess(order.index(("end", before)), order.index(("start", after)))
        # Two lanes: "long" and "base" start before either ends.
        self.assertEqual({name for kind, name in order[:2]}, {"long", "base"})
        self.assertEqual({kind for kind, name in order[:2]}, {"start"})
        lanes = {name: cores for kind, name, cores in events}
        self.assertNotEqual(lanes["long"], lanes["base"])

    def test_a_failed_job_stops_the_rest(self):
        ran = []

        def fail(cores):
            raise RuntimeError("boom")

        jobs = [
            common.Job("fails", fail),
            common.Job("after", lambda cores: ran.append("after"), after=["fails"]),
        ]
        with self.assertRaisesRegex(RuntimeError, "boom"):
            common.run_jobs(jobs, lanes=[[0], [1]])
        self.assertEqual(ran, [])

    def test_bad_dependencies(self):
        with self.assertRaisesRegex(ValueError, "unknown"):
            common.run_jobs([common.Job("a", lambda cores: None, after=["b"])])
        with self.assertRaisesRegex(ValueError, "circular"):
            common.run_jobs(
                [
                    common.Job("a", lambda cores: None, after=["b"]),
                    common.Job("b", lambda cores: None, after=["a"]),
                ]
            )
        with self.assertRaisesRegex(ValueError, "duplicate"):
            common.run_jobs([common.Job("a", lambda cores: None)] * 2)

    def test_cpu_lanes(self):
        lanes = common.cpu_lanes(2)
        cores = sorted(os.sched_getaffinity(0))
        if len(cores) < 2:
            self.assertEqual(lanes, [None])
        else:
            self.assertLen(lanes, 2)
            self.assertEmpty(set(lanes[0]) & set(lanes[1]))
            self.assertTrue(set(lanes[0] + lanes[1]) <= set(cores))
        self.assertEqual(common.cpu_lanes(1), [None])

    def test_a_command_on_one_core(self):
        if len(os.sched_getaffinity(0)) < 2:
            self.skipTest("needs two cores")
        core = sorted(os.sched_getaffinity(0))[-1]
        log_path = os.path.join(self.get_temp_dir(), "affinity.log")
        code = "import os; print(sorted(os.sched_getaffinity(0)), "
        code += "os.environ['TF_NUM_INTRAOP_THREADS'])"
        common.run_streaming([sys.executable, "-c", code], log_path, cores=[core])
        with open(log_path) as f:
            self.assertIn("[%d] 1" % core, f.read())


if __name__ == "__main__":
    tf.test.main()
