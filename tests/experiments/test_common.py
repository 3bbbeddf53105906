import os
import sys
from unittest import mock

import tensorflow as tf

from ldr_experiments import common
from ldr_opennmt import stamps

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


class StageTest(tf.test.TestCase):
    """A stage runs unless its stamp matches, says why, and removes only what is stale."""

    def setUp(self):
        super().setUp()
        self.steps = common.Steps(os.path.join(self.get_temp_dir(), "stages-out"))
        self.input = os.path.join(self.steps.out, "input.txt")
        self.output = os.path.join(self.steps.out, "result", "output.txt")
        self.owned = os.path.join(self.steps.out, "result")
        self._put(self.input, "v1")
        self.runs = []

    def _put(self, path, text):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)

    def _stage(self, fail=False):
        def run(cores):
            self.runs.append(sorted(os.listdir(self.owned)) if os.path.isdir(self.owned) else None)
            self._put(os.path.join(self.owned, "partial.txt"), "x")
            if fail:
                raise RuntimeError("killed")
            self._put(self.output, "done")

        return common.Stage(
            "step",
            "make the result",
            "1/1",
            lambda: stamps.make_stamp(input=stamps.file_digest(self.input), options={"n": 1}),
            [self.output],
            run,
            owns=[self.owned],
        )

    def _run(self, stage):
        with mock.patch.object(common, "log") as log:
            self.steps.run_stage(stage)
        return "\n".join(call.args[0] for call in log.call_args_list)

    def test_runs_then_is_skipped_then_reruns_saying_what_changed(self):
        stamp_path = os.path.join(self.steps.stages_dir, "step.json")
        text = self._run(self._stage())
        self.assertIn("[demo] 1/1 make the result: runs (no stamp (%s))" % stamp_path, text)
        record = stamps.read(stamp_path)
        self.assertTrue(record["complete"])
        self.assertGreaterEqual(record["seconds"], 0)
        self.assertIn("code", record["inputs"])  # The code it ran (engine.stage_code).
        self.assertIsNone(self.steps.due(self._stage()))
        # The same inputs: skipped, its time that of the run that made it.
        text = self._run(self._stage())
        self.assertIn("make the result: skipped, done from the same inputs", text)
        self.assertLen(self.runs, 1)
        with mock.patch.object(common.engine, "started", return_value=record["finished"] + 1):
            self.steps.record_timings([self._stage()])
        self.assertEqual(
            self.steps.timings[0], ("make the result (earlier run)", record["seconds"])
        )
        # Another input: due again, saying why.
        self._put(self.input, "v2")
        self.assertEqual(self.steps.due(self._stage()), "input differs")
        self._put(self.input, "v1")
        # Another input: what it owns is removed (made from the former input), then redone.
        self._put(self.input, "v2")
        text = self._run(self._stage())
        self.assertIn("make the result: runs (input differs)", text)
        self.assertIn("removing %s (made from other inputs)" % self.owned, text)
        self.assertEqual(self.runs[-1], None)
        self.assertTrue(os.path.exists(self.output))

    def test_a_run_killed_half_way_resumes_from_what_it_left(self):
        with self.assertRaisesRegex(RuntimeError, "killed"):
            self._run(self._stage(fail=True))
        self.assertFalse(stamps.read(os.path.join(self.steps.stages_dir, "step.json"))["complete"])
        text = self._run(self._stage())
        self.assertIn("runs (the run that wrote them did not finish)", text)
        self.assertEqual(self.runs[-1], ["partial.txt"])  # Not removed: the same inputs.
        # An output removed by hand: redone, saying so.
        os.remove(self.output)
        text = self._run(self._stage())
        self.assertIn("runs (missing: %s)" % self.output, text)

    def test_only_what_is_under_the_results_directory_is_removed(self):
        self._run(self._stage())
        self._put(self.input, "v2")
        stage = self._stage()
        stage.owns = [os.path.join(self.get_temp_dir(), "elsewhere")]
        with self.assertRaisesRegex(Exception, "not under the results directory"):
            self._run(stage)

    def test_training_stamp(self):
        out = self.get_temp_dir()
        model_def = os.path.join(out, "model.py")
        vocabulary = os.path.join(out, "vocab.en")
        self._put(model_def, "model = None\n")
        self._put(vocabulary, "a\n")
        data = os.path.join(out, "data.yml")
        run = os.path.join(out, "run.yml")
        self._put(data, "data:\n  source_vocabulary: %s\n  missing: %s.x\n" % (vocabulary, out))
        self._put(run, "model_dir: %s\ntrain:\n  max_step: 60\n" % out)
        stamp = common.training_stamp(model_def, [data, run], ["--seed", "1"])
        self.assertEqual(common.data_files(stamp["config"]), [vocabulary])
        self.assertEqual(stamp["config"]["train"], {"max_step": 60})
        self.assertIsNone(stamp["base"])
        self._put(run, "model_dir: %s\ntrain:\n  max_step: 100\n" % out)
        self._put(vocabulary, "b\n")
        other = common.training_stamp(model_def, [data, run], ["--seed", "1"])
        self.assertEqual(
            stamps.describe(stamp, other), "config.train.max_step: 60 -> 100; data differs"
        )


if __name__ == "__main__":
    tf.test.main()


class TrainStageTest(tf.test.TestCase):
    """A training stage is done when ``checkpoint`` names its final checkpoint, not when the
    final checkpoint's files are there: a run killed inside that checkpoint's write leaves them,
    with ``checkpoint`` still naming the one before (the next run resumes from that one)."""

    def test_final_checkpoint_files_not_named_by_checkpoint_are_trained_again(self):
        steps = common.Steps(os.path.join(self.get_temp_dir(), "out"))
        model_dir = os.path.join(steps.runs_dir, "mixed")
        os.makedirs(model_dir)
        for step in (4, 6):
            for suffix in (".index", ".data-00000-of-00001"):
                with open(os.path.join(model_dir, "ckpt-%d%s" % (step, suffix)), "w") as f:
                    f.write("x")
        stage = steps.train_stage("Mixed", "mixed", "model.py", ["run.yml"], model_dir, 6, "1/1")

        def run(text):
            with open(os.path.join(model_dir, "checkpoint"), "w") as f:
                f.write(text)
            with mock.patch.object(common, "run_streaming") as trained, mock.patch.object(
                common, "log"
            ) as log:
                stage.run(None)
            return trained.call_count, " ".join(c.args[0] for c in log.call_args_list)

        # Killed after ckpt-6.index was written, before `checkpoint` named it.
        self.assertEqual(
            run('model_checkpoint_path: "ckpt-4"\nall_model_checkpoint_paths: "ckpt-4"\n'),
            (1, ""),
        )
        self.assertEqual(common.latest_step(model_dir), 4)
        count, text = run('model_checkpoint_path: "%s/ckpt-6"\n' % model_dir)
        self.assertEqual(count, 0)
        self.assertIn("already trained", text)
        os.remove(os.path.join(model_dir, "checkpoint"))
        self.assertIsNone(common.latest_step(model_dir))
        self.assertEqual(run("")[0], 1)
