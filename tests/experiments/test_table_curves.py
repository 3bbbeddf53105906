import os

import tensorflow as tf

from ldr_experiments import table_curves, tables
from tests.experiments.test_tables import _plan


class CurvesTest(tf.test.TestCase):
    """The per-domain dev loss of stage 2 and fine-tuning, read from the training logs."""

    LOG = (
        "INFO Step = 4510 ; learning_rate = 0.001 ; loss = 2.5\n"
        "INFO Evaluation result for domain medical at step 4550: loss = 3.250000 ;"
        " perplexity = 25.79\n"
        "INFO Evaluation result for domain software at step 4550: loss = 4.000000 ;"
        " perplexity = 54.6\n"
        "INFO Evaluation result for domain medical at step 4500: loss = 3.500000 ;"
        " perplexity = 33.1\n"
        "INFO Evaluation result for domain software at step 4600: loss = 4.500000 ;"
        " perplexity = 90.0\n"
    )

    def test_the_curves_are_read_in_step_order(self):
        path = os.path.join(self.get_temp_dir(), "x.train.log")
        with open(path, "w") as f:
            f.write(self.LOG)
        self.assertEqual(
            table_curves.dev_curves(path),
            {"medical": [(4500, 3.5), (4550, 3.25)], "software": [(4550, 4.0), (4600, 4.5)]},
        )
        self.assertEqual(table_curves.dev_curves(path + ".missing"), {})

    def test_the_section_has_a_row_per_domain_and_a_plot(self):
        plan = _plan(self.get_temp_dir(), tables.table_runs(["factorized_pa"]))
        plan.training_stages(plan.runs)
        with open(os.path.join(plan.steps.logs_dir, "factorized_pa.train.log"), "w") as f:
            f.write(self.LOG)
        lines = table_curves.curve_section(plan, plan.steps.out)
        self.assertIn(
            "| Factorized PA | software | 4.000 (step 4550) | 4.000 (step 4550) |"
            " 4.500 (step 4600) |",
            "\n".join(lines),
        )
        self.assertTrue(os.path.isfile(os.path.join(plan.steps.out, "stage2_curves.png")))
        # Stage 2 and the FT_* trainings are evaluated during training, the others not.
        commands = dict(plan.steps.commands)
        self.assertIn("--with_eval", commands["Train FT_medical"])
        self.assertNotIn("--with_eval", commands["Train Mixed"])
