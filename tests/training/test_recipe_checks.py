"""Warnings about a recipe that will not do what its numbers suggest (issue 55, item 2)."""

import logging
import os

import tensorflow as tf
from parameterized import parameterized

from ldr_opennmt import models
from ldr_opennmt.training import eta, recipe_checks
from ldr_opennmt.training.runner import Runner
from tests import corpus, helpers


class RecipeWarningsTest(tf.test.TestCase):
    def test_accumulation_on_a_cpu_is_one_line_naming_the_key(self):
        config = {"train": {"batch_size": 1024, "effective_batch_size": 25000}}
        self.assertEqual(
            recipe_checks.recipe_warnings(config),
            [
                "train: effective_batch_size 25000 with batch_size 1024 accumulates 25 batches"
                " per step (each step costs 25 batches' time; --auto_config sets it for GPUs):"
                " on this CPU, set train: effective_batch_size: null (as"
                " data_configs/default_corpora.yml does)"
            ],
        )
        # On GPUs accumulation is the recipe's intent; a few batches on a CPU are fine.
        self.assertEqual(recipe_checks.recipe_warnings(config, on_gpu=True), [])
        config["train"]["effective_batch_size"] = 4096
        self.assertEqual(recipe_checks.recipe_warnings(config), [])
        config["train"]["effective_batch_size"] = None
        self.assertEqual(recipe_checks.recipe_warnings(config), [])
        # Replicas share the effective batch.
        self.assertEqual(
            recipe_checks.accumulated_batches(
                {"batch_size": 1024, "effective_batch_size": 25000}, 8
            ),
            4,
        )

    def test_averaging_with_early_checkpoints_is_named(self):
        # The quickstart's run.yml under --auto_config: 4500 steps, saves every 5000 (default).
        config = {"train": {"max_step": 4500, "average_last_checkpoints": 8}}
        self.assertEqual(recipe_checks.saved_steps(4500, 5000, 8), [1, 4500])
        self.assertEqual(
            recipe_checks.recipe_warnings(config),
            [
                "train: average_last_checkpoints 8 averages the checkpoints of steps 1, 4500"
                " (save_checkpoints_steps 5000, max_step 4500): weights from the first half of"
                " the training spoil the average; set train: average_last_checkpoints: 0, or"
                " save_checkpoints_steps: 281 to average the last 8 saves of the second half"
            ],
        )
        # The suggested value averages late checkpoints only: no warning.
        config["train"]["save_checkpoints_steps"] = 281
        self.assertEqual(recipe_checks.recipe_warnings(config), [])
        self.assertGreaterEqual(recipe_checks.saved_steps(4500, 281, 8)[-8], 2250)

    @parameterized.expand([(0,), (1,)])
    def test_no_averaging_no_warning(self, average):
        config = {"train": {"max_step": 4500, "average_last_checkpoints": average}}
        self.assertEqual(recipe_checks.recipe_warnings(config), [])

    def test_keep_checkpoint_max_bounds_what_is_averaged(self):
        self.assertEqual(recipe_checks.saved_steps(100, 10, 3), [80, 90, 100])
        config = {
            "train": {
                "max_step": 100,
                "save_checkpoints_steps": 10,
                "keep_checkpoint_max": 3,
                "average_last_checkpoints": 8,
            }
        }
        self.assertEqual(recipe_checks.recipe_warnings(config), [])


class RunnerRecipeTest(tf.test.TestCase):
    def test_the_runner_logs_the_auto_config_recipe_of_the_own_corpora_page(self):
        # docs/own-corpora.md's configuration with the quickstart's run.yml and --auto_config,
        # as ldr-main finalizes it before training.
        directory = self.get_temp_dir()
        paths = corpus.write_corpus(os.path.join(directory, "data"), count=20)
        config = {
            "model_dir": os.path.join(directory, "run"),
            "data": {
                "source_vocabulary": paths["src_vocab"],
                "target_vocabulary": paths["tgt_vocab"],
                "train_corpora": corpus.write_domain_corpora(
                    os.path.join(directory, "data"), {"medical": 10, "religious": 10}
                ),
            },
            "train": {"max_step": 4500, "batch_size": 1024},
        }
        runner = Runner(models.ldr_transformer(**helpers.TINY), config, auto_config=True)
        with self.assertLogs(tf.get_logger(), "WARNING") as logs:
            found = runner.warn_about_recipe()
        self.assertLen(found, 2)
        self.assertIn("effective_batch_size 25000 with batch_size 1024", found[0])
        self.assertIn("average_last_checkpoints 8 averages the checkpoints of steps 1", found[1])
        self.assertEqual([record.getMessage() for record in logs.records], found)
        # The CPU recipe of the own-corpora page: no warning.
        config["train"].update(effective_batch_size=None, average_last_checkpoints=0)
        runner = Runner(models.ldr_transformer(**helpers.TINY), config, auto_config=True)
        self.assertEqual(runner.warn_about_recipe(), [])


class EtaTest(tf.test.TestCase):
    """Issue 55 item 7: the training logs the time left on OpenNMT-tf's step lines."""

    def test_step_lines_get_the_time_left(self):
        logger = logging.getLogger("eta_test")
        with self.assertLogs(logger, "INFO") as logs:
            with eta.eta_in_step_logs(2000, logger=logger):
                # OpenNMT-tf's own line (opennmt.training.TrainingStats.log), as it logs it.
                logger.info(
                    "Step = %d ; steps/s = %0.2f, tokens/s = %d (%s) ; Learning rate = %f"
                    " ; Loss = %f",
                    200, 4.0, 3000, "1500 source, 1500 target", 0.001, 5.25,
                )  # fmt: skip
                logger.info("Saved checkpoint %s", "ckpt-200")
            logger.info(
                "Step = %d ; steps/s = %0.2f, tokens/s = %d (%s) ; Learning rate = %f ; Loss = %f",
                300, 4.0, 3000, "x", 0.001, 5.0,
            )  # fmt: skip
        lines = [record.getMessage() for record in logs.records]
        self.assertEqual(
            lines[0],
            "Step = 200 ; steps/s = 4.00, tokens/s = 3000 (1500 source, 1500 target) ; Learning"
            " rate = 0.001000 ; Loss = 5.250000 ; ETA 7 min 30 s (step 200 of 2000)",
        )
        self.assertEqual(lines[1], "Saved checkpoint ckpt-200")
        self.assertNotIn("ETA", lines[2])  # The filter leaves with the training.

    def test_durations(self):
        self.assertEqual(eta.format_duration(45.4), "45 s")
        self.assertEqual(eta.format_duration(440), "7 min 20 s")
        self.assertEqual(eta.format_duration(7500), "2 h 05 min")


if __name__ == "__main__":
    tf.test.main()
