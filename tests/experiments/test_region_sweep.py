import os

import tensorflow as tf

from ldr_experiments import region_sweep
from ldr_opennmt.layers import LDREmbedder


class RegionSweepTest(tf.test.TestCase):
    def test_sizes_must_leave_a_generic_region(self):
        region_sweep.check_sizes([4, 8, 16], 64, 3)
        with self.assertRaisesRegex(SystemExit, "regions of 32, 64 cells do not fit"):
            region_sweep.check_sizes([4, 32, 64], 64, 3)
        region_sweep.check_sizes([4, 8, 16, 32, 64], 512, 6)

    def test_model_definition_builds_the_size(self):
        path = os.path.join(self.get_temp_dir(), "cells16.py")
        with open(path, "w") as f:
            f.write(region_sweep.model_definition("small", 16))
        scope = {}
        exec(compile(open(path).read(), path, "exec"), scope)
        model = scope["model"]()
        embedder = model.features_inputter.word_inputter
        self.assertIsInstance(embedder, LDREmbedder)
        self.assertEqual(embedder.domain_region_size, 16)
        self.assertEqual(embedder.embedding_size, 64)

    def test_the_table_s_recipe_and_a_mode_that_reads_the_label(self):
        # Issue 42, item 6: the sweep at the table's budget, in the mode whose shared network
        # reads the regions, evaluated with the true, generic and wrong labels.
        args, budget = region_sweep._arguments(["--budget", "table", "--domain_training", "joint"])
        table = region_sweep.demo.BUDGETS["default"]
        for key in ("steps", "warmup", "batch_size", "alpha", "max_length", "eval_sentences"):
            self.assertEqual(budget[key], table[key], key)
        self.assertEqual(args.out, "results/region_sweep-table-joint")
        self.assertEqual(args.modes, ["oracle", "generic", "wrong"])
        config = region_sweep.point_config(args, budget, 8, "runs")
        self.assertEqual(config["model_dir"], os.path.join("runs", "ldr_cells8"))
        self.assertEqual(config["params"]["domain_training"], "joint")
        self.assertEqual(config["train"]["max_step"], 4500)
        self.assertEqual(config["train"]["batch_size"], 1024)
        self.assertEqual(config["train"]["domain_sampling_alpha"], 0.5)
        self.assertEqual(config["params"]["decay_params"]["model_dim"], 64)
        # The default is the sweep as it was: Procedure 1, 1000 steps, its own directory.
        args, budget = region_sweep._arguments([])
        self.assertEqual((args.domain_training, budget["steps"]), ("procedure1", 1000))
        self.assertEqual(args.out, "results/region_sweep")
        with self.assertRaises(SystemExit):
            region_sweep._arguments(["--domain_training", "general"])

    def test_the_chart_draws_oracle_and_generic_rows(self):
        domains = ["a", "b"]
        rows = []
        for cells in (4, 8):
            for mode, bleu in (("oracle", 20.0 + cells), ("generic", 18.0)):
                scores = {d: {"bleu": bleu, "chrf": 40.0} for d in domains}
                rows.append(("LDR %d cells (%s)" % (cells, mode), scores))
        path = os.path.join(self.get_temp_dir(), "chart.png")
        region_sweep.line_chart({"domains": domains, "rows": rows}, [4, 8], path)
        self.assertGreater(os.path.getsize(path), 1000)


if __name__ == "__main__":
    tf.test.main()
