import json
import os
import types
from unittest import mock

import tensorflow as tf

from ldr_experiments import common, demo
from ldr_opennmt import stamps

DOMAINS = ["medical", "religious", "software"]


def _scores(*bleu):
    return {d: {"bleu": b, "chrf": 2 * b} for d, b in zip(DOMAINS, bleu)}


def _results(rows):
    return {"domains": DOMAINS, "sentences": {d: 200 for d in DOMAINS}, "rows": rows}


RESULTS = _results(
    [
        ("Mixed", _scores(20.0, 10.0, 15.0)),  # avg 15.0
        (demo.SEED_ROW, _scores(19.0, 10.0, 15.0)),  # avg 14.667: spread 0.333
        ("LDR (summed) (oracle)", _scores(22.0, 12.0, 16.0)),  # avg 16.667: +1.667
        ("LDR (summed) (generic)", _scores(20.0, 10.0, 15.3)),  # avg 15.1
        ("LDR (summed) (wrong)", _scores(21.8, 12.0, 16.0)),  # avg 16.6: -0.067, within the spread
        ("DC (oracle)", _scores(20.0, 10.2, 15.0)),  # avg 15.067: +0.067
        ("FT_medical", _scores(30.0, 4.0, 5.0)),
    ]
)


class FindingsTest(tf.test.TestCase):
    def test_seed_spread(self):
        self.assertAlmostEqual(demo.seed_spread(RESULTS), 1.0 / 3)
        self.assertIsNone(demo.seed_spread(_results([("Mixed", _scores(1, 2, 3))])))

    def test_differences_are_judged_by_the_spread(self):
        lines = demo.findings(RESULTS, demo.seed_spread(RESULTS))
        text = "\n".join(lines)
        self.assertIn("- Mixed averages 15.0 BLEU; a second seed differs by 0.3.", text)
        self.assertIn(
            "- LDR (summed) with its domain labels: +1.7 BLEU against Mixed, larger than the seed"
            " spread (0.3).",
            text,
        )
        self.assertIn("  With a wrong label it loses 0.1 BLEU (within the seed spread", text)
        self.assertNotIn("the model uses its labels", text)
        self.assertIn("  With the generic label: -1.6 BLEU", text)
        self.assertIn("- DC with its domain labels: +0.1 BLEU against Mixed, within the seed", text)
        self.assertIn("- FT_medical: +10.0 BLEU on medical, -8.0 on the other domains", text)
        self.assertIn("forgets them", text)
        self.assertIn("200 test sentences per domain", lines[-1])
        # Factorized PA has no row: nothing is said about it.
        self.assertNotIn("Factorized", text)

    def test_rows_below_the_bar_are_named(self):
        text = "\n".join(demo.findings(RESULTS, 0.3))
        self.assertIn(
            "- Every row but the FT_* ones averages at least 10 BLEU (lowest: %s, 14.7)."
            % demo.SEED_ROW,
            text,
        )
        rows = RESULTS["rows"] + [("Factorized PA (wrong)", _scores(9.0, 3.0, 6.0))]
        text = "\n".join(demo.findings(_results(rows), 0.3))
        self.assertIn("- Below 10 BLEU on average (too weak", text)
        self.assertIn(": Factorized PA (wrong) 6.0.", text)
        self.assertNotIn("FT_medical 13.0", text)

    def test_a_label_loss_above_the_spread_shows_the_labels_are_used(self):
        rows = [row for row in RESULTS["rows"] if row[0] != "LDR (summed) (wrong)"]
        rows.append(("LDR (summed) (wrong)", _scores(10.0, 5.0, 9.0)))
        text = "\n".join(demo.findings(_results(rows), 0.5))
        self.assertIn(
            "With a wrong label it loses 8.7 BLEU (larger than the seed spread (0.5))", text
        )
        self.assertIn("the model uses its labels", text)

    def test_contrastive_figures(self):
        results = {
            "rows": [
                {"system": "Mixed", "mode": "oracle", "metric": "accuracy", "values": {"all": 70}},
                {"system": "Mixed", "mode": "oracle", "metric": "follow", "values": {"all": 30}},
                {
                    "system": "LDR (summed)",
                    "mode": "oracle",
                    "metric": "accuracy",
                    "values": {"all": 80},
                },
                {
                    "system": "LDR (summed)",
                    "mode": "flipped",
                    "metric": "follow",
                    "values": {"all": 40},
                },
                {
                    "system": "LDR (summed)",
                    "mode": "flipped",
                    "metric": "shift",
                    "values": {"all": 65},
                },
                {"system": "DC", "mode": "wrong", "metric": "accuracy", "values": {"all": None}},
            ]
        }
        figures = demo.contrastive_rates(results)
        self.assertEqual(
            figures,
            {"Mixed (oracle)": 70, "LDR (summed) (oracle)": 80, "LDR (summed) (effect)": 65},
        )
        text = "\n".join(demo.findings(RESULTS, 0.3, figures))
        self.assertIn(
            "  Contrastive lexical choice: 80% right with its labels (Mixed: 70%); giving it the"
            " other domain's label moves its choice towards that domain's word in 65% of pairs",
            text,
        )

    def test_each_row_names_its_control_and_whether_it_is_matched(self):
        matched = "\n".join(
            demo.findings(
                RESULTS, 0.3, output_layers={"Mixed": True, "LDR (summed)": True}, steps=4500
            )
        )
        self.assertIn(
            "  Control: Mixed, matched (4500 steps, seed 1, output layer tied to the target"
            " embeddings like LDR (summed)'s).",
            matched,
        )
        unmatched = "\n".join(
            demo.findings(RESULTS, 0.3, output_layers={"Mixed": True, "LDR (summed)": False})
        )
        self.assertIn("  Control: Mixed, NOT matched: its output layer is tied", unmatched)
        unknown = "\n".join(demo.findings(RESULTS, 0.3))
        self.assertIn("  Control: Mixed (output layers not read: no checkpoint).", unknown)

    def test_the_demo_trains_ldr_tied_like_its_control(self):
        # The registry's small Mixed (the demo's baseline) ties its output layer: so does the
        # demo's LDR at that scale, and neither does at paper scale.
        ldr = [run for run in demo.SYSTEMS if run.family == "ldr_transformer"]
        mixed = demo.BASELINE
        for scale in ("small", "paper"):
            sharing = {
                path: "share_target_embeddings=True" in open(path, encoding="utf-8").read()
                for path in [mixed.model_def(scale)] + [run.model_def(scale) for run in ldr]
            }
            self.assertLen(set(sharing.values()), 1, sharing)

    def test_example_rows(self):
        rows = demo._example_rows(RESULTS)
        self.assertEqual(rows, ["Mixed", "LDR (summed) (oracle)", "DC (oracle)"])

    def test_ldr_is_judged_against_its_equal_compute_control(self):
        # Issue 59 item 5: the main job trains LDR summed (the released loss) with
        # the Mixed of the same passes, and says what the compute and the label add.
        by_name = {run.name: run for run in demo.SYSTEMS if not run.full}
        self.assertEqual(
            set(by_name), {"Mixed", "Mixed (equal passes)", "LDR (summed)"}
        )  # the rest under --full: the default run's 30 minutes
        by_name = {run.name: run for run in demo.SYSTEMS}
        self.assertEqual(by_name["LDR (summed)"].params, {"domain_training": "summed"})
        self.assertEqual(by_name["LDR (summed)"].control, "Mixed (equal passes)")
        passes = by_name["Mixed (equal passes)"]
        self.assertEqual((passes.continues, passes.continue_steps), ("Mixed", "passes"))
        self.assertIn("pred", by_name["LDR (summed)"].label_modes())
        rows = set(by_name) | {"FT_medical"}
        self.assertEqual(
            [(row, control) for row, control, _ in demo.demo_comparisons(rows)],
            [
                ("LDR (summed)", "Mixed"),
                ("LDR (summed)", "Mixed (equal passes)"),
                ("Mixed (equal passes)", "Mixed"),
                ("DC", "Mixed"),
                ("Factorized PA", "Mixed"),
                ("Factorized PA", "Mixed (continued)"),
            ],
        )
        from tests.experiments.test_table_verdicts import make_judge

        judge = make_judge(
            self.get_temp_dir(),
            {
                "Mixed": 0.4,
                "Mixed (equal passes)": 0.7,
                "LDR (summed) (oracle)": 0.7,
                "LDR (summed) (generic)": 0.5,
            },
        )
        text = "\n".join(demo.verdict_findings(judge))
        self.assertIn("- What the compute adds: Mixed trained for the passes of LDR (summed)", text)
        self.assertIn("against Mixed of the same compute: +0.0 BLEU", text)
        self.assertIn("no difference found", text)
        self.assertIn("- What the label adds: LDR (summed) with its true label against", text)


class PriorityTest(tf.test.TestCase):
    def test_trainings_from_scratch_first_then_what_continues_them_then_evaluations(self):
        def job(name, after=()):
            return common.Stage(name, name, "", dict, [], lambda cores: None, after)

        jobs = [
            job("mixed"),
            job("eval_mixed", ["mixed"]),
            job("mixed_seed2"),
            job("factorized_pa", ["mixed"]),
            job("ldr"),
            job("classifier"),
            job("predict", ["classifier"]),
            job("contrastive_ldr", ["ldr"]),
        ]
        self.assertEqual(
            [j.name for j in demo._by_priority(jobs)],
            [
                "ldr",
                "mixed",
                "mixed_seed2",
                "classifier",
                "predict",
                "factorized_pa",
                "eval_mixed",
                "contrastive_ldr",
            ],
        )


class ReportStageTest(tf.test.TestCase):
    """The report records its date and machine; a rerun with the same inputs keeps them."""

    def setUp(self):
        super().setUp()
        root = self.get_temp_dir()
        self.steps = common.Steps(os.path.join(root, "out"))
        args = types.SimpleNamespace(data=os.path.join(root, "corpus"), cache=None)
        self.plan = demo.Plan(args, dict(demo.BUDGETS["quick"]), self.steps)
        os.makedirs(args.data, exist_ok=True)
        self._put(os.path.join(args.data, "corpus.json"), {"domains": DOMAINS})
        self._put(self.plan.scores_path, {"rows": []})
        self._put(self.plan.contrastive_path, {"rows": []})
        self._put(self.plan.classification_path, {"accuracy": 0.9})
        self._put(os.path.join(self.steps.configs_dir, "data.yml"), {"data": {}})
        self.report = os.path.join(self.steps.out, "report.md")
        self.stamp_path = os.path.join(self.steps.stages_dir, "report.json")

    def _put(self, path, content):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            json.dump(content, f)

    def _run(self, written, machine="AMD EPYC 7B13 (2 cores)"):
        def record(command, now=None):
            return {"written": written, "machine": machine, "command": " ".join(command)}

        stage = self.plan.report_stage(
            lambda total: "# Multi-domain demo (quick)\n\nThe figures.",
            "quick",
            0.0,
            ["bash", "run/demo.sh", "--quick"],
        )
        with mock.patch.object(demo.plan, "provenance", record), mock.patch.object(
            common, "log"
        ) as log:
            self.steps.run_stage(stage)
        with open(self.report) as f:
            lines = f.read().splitlines()
        return lines, "\n".join(call.args[0] for call in log.call_args_list)

    def test_the_first_line_is_recorded_not_compared(self):
        lines, log = self._run("2026-11-24 13:05 UTC")
        self.assertIn("report: runs (no stamp", log)
        first = (
            "Written 2026-11-24 13:05 UTC on AMD EPYC 7B13 (2 cores) by"
            " `bash run/demo.sh --quick`."
        )
        self.assertEqual(lines[:3], [first, "", "# Multi-domain demo (quick)"])
        record = stamps.read(self.stamp_path)
        self.assertTrue(record["complete"])
        self.assertEqual(record["written"], "2026-11-24 13:05 UTC")
        self.assertEqual(record["machine"], "AMD EPYC 7B13 (2 cores)")
        self.assertEqual(record["command"], "bash run/demo.sh --quick")
        self.assertNotIn("written", json.dumps(record[stamps.INPUTS]))
        # Another day, another machine, the same inputs: the report is kept, with its line.
        lines, log = self._run("2026-11-25 08:00 UTC", machine="another CPU (64 cores)")
        self.assertIn("report: skipped, done from the same inputs", log)
        self.assertEqual(lines[0], first)
        self.assertEqual(stamps.read(self.stamp_path)["written"], "2026-11-24 13:05 UTC")
        # Other results: written again, saying why, with the new date and machine.
        self._put(self.plan.scores_path, {"rows": [], "changed": True})
        lines, log = self._run("2026-11-25 08:00 UTC", machine="another CPU (64 cores)")
        self.assertIn("report: runs (results differ)", log)
        self.assertEqual(
            lines[0],
            "Written 2026-11-25 08:00 UTC on another CPU (64 cores) by `bash run/demo.sh --quick`.",
        )
        self.assertEqual(stamps.read(self.stamp_path)["machine"], "another CPU (64 cores)")

    def test_a_change_to_the_report_s_code_writes_it_again(self):
        self._run("2026-11-24 13:05 UTC")
        with mock.patch.object(demo.plan.engine, "stage_code", return_value="other code"):
            lines, log = self._run("2026-11-25 08:00 UTC")
        self.assertIn("report: runs (code differs)", log)
        self.assertTrue(lines[0].startswith("Written 2026-11-25 08:00 UTC"))

    def test_a_report_of_the_former_layout_is_written_again(self):
        self._run("2026-11-24 13:05 UTC")
        record = stamps.read(self.stamp_path)
        inputs = dict(record.pop(stamps.INPUTS))
        del inputs["layout"]  # As the report stage wrote it before the first line.
        record.pop("format")
        stamps.write(self.stamp_path, inputs, **record)
        _, log = self._run("2026-11-25 08:00 UTC")
        self.assertIn("report: runs (layout added)", log)


if __name__ == "__main__":
    tf.test.main()
