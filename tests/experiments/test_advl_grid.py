import json
import os

import pytest
import tensorflow as tf

from ldr_experiments import advl_grid, common, tables
from ldr_opennmt.data import corpus as corpus_lib
from ldr_opennmt.errors import UserError
from tests import corpus as tiny
from tests import helpers

RECIPE = {
    "data": "data/default",
    "config": "data_configs/default_corpora.yml",
    "scale": "small",
    "budget": {"steps": 4500, "warmup": 800},
}


def _point(weight, average, distinct=600, sentences=600):
    return {
        "weight": weight,
        "bleu": {"medical": average, "software": average},
        "average": average,
        "distinct": distinct,
        "sentences": sentences,
    }


class ChoiceTest(tf.test.TestCase):
    """The choice on the dev sets, and how the tables read it."""

    def test_the_best_dev_bleu_that_did_not_collapse(self):
        points = [_point(0.01, 20.0), _point(0.03, 21.0), _point(0.1, 25.0, distinct=43)]
        self.assertEqual(advl_grid.choose(points)["weight"], 0.03)
        # A tie goes to the smaller weight; every point collapsed: no choice.
        self.assertEqual(advl_grid.choose([_point(0.3, 21.0), _point(0.03, 21.0)])["weight"], 0.03)
        self.assertIsNone(advl_grid.choose([_point(0.3, 21.0, distinct=2)]))
        record = advl_grid.choice_record(points, RECIPE)
        self.assertEqual(record["weight"], 0.03)
        self.assertEqual([p["collapsed"] for p in record["points"]], [False, False, True])
        report = advl_grid.report_text(record)
        self.assertIn("| 0.1 | 25.0 | 25.0 | 25.0 | 43 / 600 | collapsed |", report)
        self.assertIn("Chosen: lambda = 0.03", report)

    def _write(self, record):
        path = os.path.join(self.get_temp_dir(), "choice.json")
        with open(path, "w") as f:
            json.dump(record, f)
        return path

    def test_the_tables_use_a_choice_of_their_recipe_only(self):
        runs = tables.table_runs(["advl_transformer"])
        missing = advl_grid.read_choice(os.path.join(self.get_temp_dir(), "none.json"), RECIPE)
        self.assertEqual((missing["status"], missing["weight"]), ("absent", 1.0))
        self.assertIs(advl_grid.apply_choice(runs, missing), runs)
        self.assertIn(
            "the grid (`bash run/advl_grid.sh`) was not run", advl_grid.choice_lines(missing)[0]
        )

        path = self._write(advl_grid.choice_record([_point(0.01, 20.0), _point(0.1, 22.0)], RECIPE))
        used = advl_grid.read_choice(path, RECIPE)
        self.assertEqual((used["status"], used["weight"]), ("used", 0.1))
        chosen = advl_grid.apply_choice(runs, used)
        [advl] = [run for run in chosen if run.family == "advl_transformer"]
        self.assertEqual(advl.params["gradient_reversal_scale"], 0.1)
        self.assertNotIn("gradient_reversal_scale", chosen[0].params)  # Mixed
        self.assertIn("lambda = 0.1, chosen on the dev sets", advl_grid.choice_lines(used)[0])
        self.assertIn("0.01: 20.0, 0.1: 22.0", advl_grid.choice_lines(used)[0])

        other = dict(RECIPE, budget=dict(RECIPE["budget"], steps=60))
        stale = advl_grid.read_choice(path, other)
        self.assertEqual((stale["status"], stale["weight"]), ("other recipe", 1.0))
        self.assertIn("steps 4500 against 60", advl_grid.choice_lines(stale)[0])

        path = self._write(advl_grid.choice_record([_point(0.3, 1.0, distinct=1)], RECIPE))
        self.assertEqual(advl_grid.read_choice(path, RECIPE)["status"], "all collapsed")
        with open(path, "w") as f:
            f.write("{not json")
        with self.assertRaisesRegex(UserError, "not a choice written by run/advl_grid.sh"):
            advl_grid.read_choice(path, RECIPE)

    def test_a_negative_weight_is_refused(self):
        with self.assertRaisesRegex(
            UserError, r"^--weights: expected numbers >= 0, got \[0.1, -1.0\]$"
        ):
            advl_grid._arguments(["--weights", "0.1", "-1"])
        args, budget = advl_grid._arguments(["--quick", "--weights", "0.3", "0.01", "0.3"])
        self.assertEqual((args.weights, args.out), ([0.01, 0.3], "results/advl_grid-quick"))
        self.assertEqual(budget["steps"], tables.BUDGETS["quick"]["steps"])

    def test_a_grid_point_is_the_tables_advl_row_with_its_weight(self):
        budget = dict(tables.BUDGETS["default"])
        runs_dir = self.get_temp_dir()
        [point] = advl_grid.grid_runs([0.03], budget)
        grid = advl_grid.point_config(point, budget, runs_dir)
        [advl] = [r for r in tables.table_runs(["advl_transformer"]) if r.family == point.family]
        table = tables._with_budget(advl, budget)
        expected = common.train_config(
            "advl", dict(table.params), {}, budget, runs_dir, data=dict(common.MIXED_BATCHES)
        )
        self.assertEqual(grid["params"].pop("gradient_reversal_scale"), 0.03)
        self.assertEqual(grid.pop("model_dir"), os.path.join(runs_dir, "advl_lambda_0.03"))
        expected.pop("model_dir")
        self.assertEqual(grid, expected)
        self.assertEqual(grid["params"]["gradient_reversal_steps"], budget["steps"])
        self.assertEqual(
            (point.seed, point.model_def("small")), (table.seed, table.model_def("small"))
        )


@pytest.mark.e2e
class QuickGridTest(tf.test.TestCase):
    """The grid driver end to end with tiny budgets on a tiny corpus: two weights trained,
    scored on the dev sets, the choice written; a rerun trains nothing."""

    @helpers.skip_unless_full("about 2 minutes: the grid end to end")
    def test_quick_grid(self):
        root = self.get_temp_dir()
        data = os.path.join(root, "corpus")
        pairs = {domain: tiny.make_pairs(domain, 40, seed=1) for domain in tiny.DOMAINS}
        corpus_lib.build(pairs, data, dev_size=3, test_size=3, bpe_merges=20, log=lambda _: None)
        with open(os.path.join(common.ROOT, "data_configs", "default_corpora.yml")) as f:
            config = f.read().replace("data/default", data)
        config_path = os.path.join(root, "data.yml")
        with open(config_path, "w") as f:
            f.write(config)
        out = os.path.join(root, "grid")
        argv = ["--quick", "--weights", "0.3", "0.01", "--steps", "2", "--data", data]
        argv += ["--config", config_path, "--out", out, "--set", "eval_sentences=2"]
        argv += ["--set", "max_decoding_length=4", "--set", "warmup=1", "--set", "log_steps=1"]
        self.assertEqual(advl_grid.main(argv), 0)
        with open(os.path.join(out, "choice.json")) as f:
            record = json.load(f)
        self.assertEqual([p["weight"] for p in record["points"]], [0.01, 0.3])
        for point in record["points"]:
            self.assertEqual(sorted(point["bleu"]), sorted(tiny.DOMAINS))
            self.assertEqual(point["sentences"], 2 * len(tiny.DOMAINS))
        # The weight the recorded dev scores select (the best average among the points that
        # did not collapse), recomputed from the points as written.
        kept = [p for p in record["points"] if not p["collapsed"]]
        best = max(kept, key=lambda p: (round(p["average"], 6), -p["weight"])) if kept else None
        self.assertEqual(record["weight"], best and best["weight"])
        for point in record["points"]:
            self.assertEqual(point["collapsed"], advl_grid.collapsed(point))
        self.assertEqual(record["recipe"]["budget"]["steps"], 2)
        self.assertTrue(os.path.isfile(os.path.join(out, "report.md")))
        for weight in ("0.01", "0.3"):
            self.assertTrue(
                os.path.isfile(os.path.join(out, "runs", "advl_lambda_%s" % weight, "ckpt-2.index"))
            )
            with open(os.path.join(out, "configs", "advl_lambda_%s.yml" % weight)) as f:
                self.assertIn("gradient_reversal_scale: %s" % weight, f.read())
        # Resumable: a rerun skips every stage (no new training command in the logs).
        log = os.path.join(out, "logs", "advl_lambda_0.3.train.log")
        with open(log) as f:
            before = f.read()
        self.assertEqual(advl_grid.main(argv), 0)
        with open(log) as f:
            self.assertEqual(f.read(), before)
        # The table with the same recipe reads the choice.
        args, budget = tables._arguments(argv[argv.index("--steps") :] + ["--quick"])
        choice = advl_grid.read_choice(
            os.path.join(out, "choice.json"), advl_grid.recipe(args, budget)
        )
        self.assertEqual(
            choice["status"], "used" if record["weight"] is not None else "all collapsed"
        )
