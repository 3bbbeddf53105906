import os

import tensorflow as tf

from experiments import common, factorized
from ldr_opennmt.models import FactorizedTransformer


class FactorizedExperimentTest(tf.test.TestCase):
    def test_model_definitions_build_each_design(self):
        for size in ("small", "paper"):
            for design in factorized.DESIGNS:
                path = os.path.join(common.ROOT, factorized.model_def(size, design))
                scope = {}
                exec(compile(open(path).read(), path, "exec"), scope)
                model = scope["model"]()
                self.assertIsInstance(model, FactorizedTransformer)
                self.assertEqual(model.design, design)
        self.assertTrue(
            os.path.exists(os.path.join(common.ROOT, factorized.model_def("paper", "mixed")))
        )

    def test_parameter_lines_at_paper_size(self):
        lines = factorized.parameter_lines(["df", "sf", "pa"], 5, "paper")
        self.assertEqual(
            lines[2:],
            [
                "| Factorized DF | 1.01x |",
                "| Factorized SF | 1.13x |",
                "| Factorized PA | 1.79x |",
            ],
        )

    def test_curriculum_configs_and_options(self):
        budget = dict(factorized.BUDGETS["quick"])
        out = self.get_temp_dir()
        stage1, stage2 = common.curriculum_configs("f", budget, os.path.join(out, "runs"), 512)
        self.assertEqual(stage1["params"]["domain_training"], "general")
        self.assertEqual(stage1["params"]["decay_params"]["model_dim"], 512)
        self.assertEqual(stage1["train"]["max_step"], budget["steps"])
        self.assertNotIn("domain_training", stage2["params"])
        self.assertEqual(
            stage2["finetune"],
            {"base": stage1["model_dir"], "steps": budget["stage2_steps"], "unfold": True},
        )
        self.assertEqual(stage2["data"], common.MIXED_BATCHES)
        # Finished stages are skipped; the options reach every training command.
        steps = common.Steps(os.path.join(out, "exp"), options=["--mixed_precision"])
        for directory, step in (("f_stage1", 30), ("f", 40)):
            os.makedirs(os.path.join(steps.runs_dir, directory))
            open(os.path.join(steps.runs_dir, directory, "ckpt-%d.index" % step), "w").close()
        paths = common.train_curriculum(steps, "F", "f", "m.py", "data.yml", budget, "train")
        self.assertEqual(paths[0], "data.yml")
        self.assertTrue(os.path.exists(paths[1]))
        self.assertLen(steps.commands, 2)
        for _, command in steps.commands:
            self.assertEqual(command[-3:], ["--auto_config", "--mixed_precision", "train"])


if __name__ == "__main__":
    tf.test.main()
