import os
import runpy

import tensorflow as tf

from ldr_experiments import common, factorized
from ldr_opennmt import stamps
from ldr_opennmt.models import FactorizedTransformer


def _write(path, text):
    with open(path, "w") as f:
        f.write(text)
    return path


def _fake_checkpoint(model_dir, step):
    """A model directory whose latest checkpoint is ``ckpt-STEP`` (fake contents)."""
    os.makedirs(model_dir)
    prefix = os.path.join(model_dir, "ckpt-%d" % step)
    _write(prefix + ".index", "index %d" % step)
    _write(prefix + ".data-00000-of-00001", "weights %d" % step)
    _write(os.path.join(model_dir, "checkpoint"), 'model_checkpoint_path: "ckpt-%d"\n' % step)
    return prefix


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

    def test_the_small_sizes_are_the_small_definitions(self):
        # The parameter tables at the small size (here and in the baselines' experiment) count
        # the models of model_defs/small/: both read the registry's presets.
        sizes = factorized.parameter_sizes("small")
        path = os.path.join(common.ROOT, factorized.model_def("small", "df"))
        model = runpy.run_path(path)["model"]()
        self.assertEqual(model.d_inner, sizes["d_inner"])
        self.assertEqual(
            (sizes["d_model"], sizes["num_heads"], sizes["ffn_dim"], sizes["encoder_layers"]),
            (64, 4, 256, 2),
        )
        self.assertEqual(factorized.parameter_sizes("paper"), {})
        self.assertEqual(factorized.model_width("small"), 64)
        self.assertEqual(factorized.model_width("paper"), 512)

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
        # Finished stages are kept (trained before their stamps: adopted, then stamped);
        # the options reach every training command.
        steps = common.Steps(os.path.join(out, "exp"), options=["--mixed_precision"])
        for directory, step in (("f_stage1", 30), ("f", 40)):
            _fake_checkpoint(os.path.join(steps.runs_dir, directory), step)
        model_def = _write(os.path.join(out, "m.py"), "model = None\n")
        vocabulary = _write(os.path.join(out, "vocab.en"), "a\n")
        data_config = _write(
            os.path.join(out, "data.yml"), "data:\n  source_vocabulary: %s\n" % vocabulary
        )
        paths = common.train_curriculum(steps, "F", "f", model_def, data_config, budget, "train")
        self.assertEqual(paths[0], data_config)
        self.assertTrue(os.path.exists(paths[1]))
        self.assertLen(steps.commands, 2)
        for _, command in steps.commands:
            self.assertEqual(command[-3:], ["--auto_config", "--mixed_precision", "train"])
        for name in ("f_stage1", "f"):
            record = stamps.read(os.path.join(steps.stages_dir, "%s.json" % name))
            self.assertTrue(record["complete"])
            self.assertEqual(record["inputs"]["options"], ["--mixed_precision"])
        # Stage 2's stamp holds stage 1's checkpoint.
        record = stamps.read(os.path.join(steps.stages_dir, "f.json"))
        self.assertEqual(
            record["inputs"]["base"],
            stamps.checkpoint_digest(os.path.join(steps.runs_dir, "f_stage1", "ckpt-30")),
        )


if __name__ == "__main__":
    tf.test.main()
