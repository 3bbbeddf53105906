import os
import types
from unittest import mock

import tensorflow as tf

from experiments import common, quoted, tables
from ldr_opennmt import config_loader, registry

DOMAINS = ["medical", "religious", "software"]
#: The default corpus's training sentences (data/default/corpus.json).
DEFAULT_SIZES = {"medical": 10083, "religious": 29683, "software": 2509}


def _scores(*bleu):
    return {d: {"bleu": b, "chrf": 2 * b} for d, b in zip(DOMAINS, bleu)}


def _plan(root, runs, scale="small", budget="quick"):
    steps = common.Steps(os.path.join(root, "out"), name="tables")
    args = types.SimpleNamespace(
        data=os.path.join(root, "corpus"), cache=None, scale=scale, config=tables.demo.DATA_CONFIG
    )
    plan = tables.TablesPlan(args, dict(tables.BUDGETS[budget]), steps, runs)
    plan.domains, plan.source, plan.target = DOMAINS, "en", "fr"
    plan.data_config = os.path.join(steps.configs_dir, "data.yml")
    return plan


class TableRunsTest(tf.test.TestCase):
    """The rows are read from the registry: one per family, its modes its capabilities."""

    def test_every_transformer_family_has_a_row_mixed_first(self):
        runs = tables.table_runs()
        families = [f.name for f in registry.families() if f.architecture == "transformer"]
        self.assertEqual(runs[0].name, "Mixed")
        self.assertCountEqual(set(run.family for run in runs), families)
        names = [run.name for run in runs]
        self.assertEqual(len(names), len(set(names)))
        for extra in (
            "Mixed (seed 2)",
            "Mixed (untied)",
            "LDR (joint)",
            "LDR (summed)",
            "Domain mixing (E)",
        ):
            self.assertIn(extra, names)
        self.assertNotIn("LDR (RNN)", names)
        for run in runs:  # Every row has its model definition at both scales.
            for scale in ("small", "paper"):
                self.assertTrue(os.path.isfile(os.path.join(common.ROOT, run.model_def(scale))))
        # A family trained on a stage 1 uses the stage-1 row's embedding sharing (tied).
        by_family = {}
        for run in runs:
            by_family.setdefault(run.family, run)
        self.assertIn("tied", by_family["mixed_transformer"].model_def("paper"))
        # The control of the families with their own output layer is untied.
        untied = [run for run in runs if run.name == "Mixed (untied)"][0]
        self.assertNotIn("tied", untied.model_def("small"))
        self.assertIn("tied", by_family["residual_adapters"].model_def("small"))

    def test_label_modes_follow_the_capabilities(self):
        runs = {run.name: run for run in tables.table_runs()}
        self.assertEqual(
            runs["LDR"].label_modes(), ("oracle", "generic", "wrong", "pred", "ens-uniform")
        )
        self.assertIn("ens-uniform", runs["Factorized PA"].label_modes())
        self.assertNotIn("ens-uniform", runs["TTM"].label_modes())  # no ensembles of views
        self.assertIsNone(runs["Mixed"].label_modes())
        self.assertIsNone(runs["Domain mixing"].label_modes())  # labels for training only
        for name, run in runs.items():
            caps = registry.capabilities(run.family)
            modes = run.label_modes() or ()
            self.assertEqual("ens-uniform" in modes, caps.ensembles is None and bool(modes), name)

    def test_a_chosen_family_brings_mixed(self):
        for families in (["factorized_pa"], ["ttm_transformer", "mixed_transformer"]):
            runs = tables.table_runs(families)
            # Mixed, its second seed and its untied control, then the chosen family.
            self.assertEqual([run.family for run in runs][:3], ["mixed_transformer"] * 3)
            self.assertEqual([run.family for run in runs][3], families[0])

    def test_a_user_family_gets_a_row(self):
        example = os.path.join(
            os.path.dirname(__file__), "..", "..", "..", "examples", "domain_bias", "domain_bias.py"
        )
        registry.load_user_module(os.path.abspath(example))
        runs = tables.table_runs(["mixed_transformer", "domain_bias_transformer"])
        self.assertEqual([run.family for run in runs][-1], "domain_bias_transformer")
        # No model definition declared: the module file is its definition.
        self.assertEqual(runs[-1].model_def("small"), os.path.abspath(example))

    def test_the_contrastive_rows_are_mixed_and_the_label_readers(self):
        runs = tables.table_runs()
        rows = tables.contrastive_rows(runs)
        self.assertEqual(rows[0], "Mixed")
        self.assertIn("LDR", rows)
        self.assertIn("Domain mixing", rows)
        self.assertNotIn("Mixed (seed 2)", rows)


class StagesTest(tf.test.TestCase):
    """The training stages: stage 1 of the registry's or of the family's own curriculum."""

    def _stages(self, families, scale="small", budget="quick"):
        root = self.get_temp_dir()
        plan = _plan(root, tables.table_runs(families), scale=scale, budget=budget)
        return plan, {stage.name: stage for stage in plan.training_stages(plan.runs)}

    def test_curriculum_and_registry_stage_one(self):
        plan, stages = self._stages(["factorized_sf", "factorized_pa", "residual_adapters"])
        # SF: its own stage 1 (domain_training general), then unfolded.
        self.assertIn("factorized_sf_stage1", stages)
        self.assertEqual(stages["factorized_sf"].after, ("factorized_sf_stage1",))
        stage1 = config_loader.load_config_file(
            os.path.join(plan.steps.configs_dir, "factorized_sf_stage1.yml")
        )
        self.assertEqual(stage1["params"]["domain_training"], "general")
        stage2 = config_loader.load_config_file(
            os.path.join(plan.steps.configs_dir, "factorized_sf.yml")
        )
        self.assertTrue(stage2["finetune"]["unfold"])
        self.assertNotIn("domain_training", stage2["params"])
        # PA and the adapters continue Mixed, the registry's stage 1.
        self.assertEqual(stages["factorized_pa"].after, ("mixed",))
        self.assertEqual(stages["residual_adapters"].after, ("mixed",))
        # The stage 1 is trained, not evaluated; the final model is.
        trained = [t.slug for t in plan.trained]
        self.assertIn("factorized_sf", trained)
        self.assertNotIn("factorized_sf_stage1", trained)
        self.assertEqual(
            plan.stage_titles["factorized_sf"],
            [stages["factorized_sf_stage1"].title, stages["factorized_sf"].title],
        )

    def test_stage_two_sees_ft_s_batches_of_every_domain(self):
        # Issue 42 item 4: the steps of stage 2 come from the corpus's sizes (corpus.json),
        # on batches of one domain each like FT's, so that each domain's blocks see at least
        # FT_<domain>'s batches of that domain.
        root = self.get_temp_dir()
        runs = tables.table_runs(["factorized_sf", "factorized_pa", "residual_adapters"])
        plan = _plan(root, runs, budget="default")
        info = {"domains": DOMAINS, "source_lang": "en", "target_lang": "fr"}
        info["stats"] = {d: {"train": {"pairs": n}} for d, n in DEFAULT_SIZES.items()}
        plan.write_data_config(info)
        stage2, budget = plan.stage2, plan.budget
        self.assertEqual(budget["stage2_steps"], stage2.steps)
        self.assertEqual(stage2.steps, 832)
        stages = {stage.name: stage for stage in plan.training_stages(plan.runs)}

        def config(slug):
            return config_loader.load_config_file(
                os.path.join(plan.steps.configs_dir, "%s.yml" % slug)
            )

        ft = budget["finetune_steps"]
        for slug in ("factorized_pa", "factorized_sf", "residual_adapters"):
            trained = config(slug)
            self.assertEqual(trained["finetune"]["steps"], stage2.steps)
            self.assertTrue(trained["data"]["domain_batches"], slug)
            self.assertEqual(trained["train"]["domain_sampling_alpha"], stage2.alpha)
            self.assertEqual(trained["train"]["batch_size"], budget["batch_size"])
            self.assertEqual(trained["eval"]["steps"], stage2.steps // 8)  # 8 curve points
            self.assertIn("%d steps" % stage2.steps, stages[slug].title)
            final = budget["steps"] + stage2.steps
            self.assertTrue(stages[slug].outputs[0].endswith("ckpt-%d.index" % final))
            alpha = trained["train"]["domain_sampling_alpha"]
            sizes = list(DEFAULT_SIZES.values())
            for p in tables.equal_budgets.domains_lib.sampling_probabilities(sizes, alpha):
                batches = stage2.steps * p - 2 * (stage2.steps * p * (1 - p)) ** 0.5
                self.assertGreaterEqual(batches, ft)
        # FT and the trainings from scratch keep their batches.
        medical = config("ft_medical")
        self.assertEqual(
            (medical["finetune"]["domain"], medical["finetune"]["steps"]), ("medical", ft)
        )
        self.assertNotIn("data", medical)
        self.assertEqual(medical["eval"]["steps"], ft // 8)
        self.assertFalse(config("mixed")["data"]["domain_batches"])
        self.assertFalse(config("factorized_sf_stage1")["data"]["domain_batches"])

    def test_the_reversal_ramps_over_the_training(self):
        plan, _ = self._stages(["advl_transformer"])
        config = config_loader.load_config_file(os.path.join(plan.steps.configs_dir, "advl.yml"))
        steps = tables.BUDGETS["quick"]["steps"]
        self.assertEqual(config["params"]["gradient_reversal_steps"], steps)
        self.assertEqual(config["train"]["max_step"], steps)

    def test_paper_scale_uses_the_paper_definitions_and_schedule(self):
        budget = dict(tables.BUDGETS["paper"])
        plan, stages = self._stages(["mixing_transformer"], scale="paper", budget="paper")
        commands = dict(plan.steps.commands)
        mixing = [c for title, c in commands.items() if title == "Train Domain mixing (E)"][0]
        self.assertIn("model_defs/mixing_transformer_encoder.py", mixing)
        mixed = [c for title, c in commands.items() if title == "Train Mixed"][0]
        self.assertIn("model_defs/mixed_transformer_tied.py", mixed)
        config = config_loader.load_config_file(os.path.join(plan.steps.configs_dir, "mixed.yml"))
        self.assertEqual(config["params"]["decay_params"]["model_dim"], 512)
        self.assertEqual(config["train"]["max_step"], budget["steps"])
        # The whole test sets: no --max-sentences.
        plan.score_stage()
        self.assertNotIn("--max-sentences", dict(plan.steps.commands)["Evaluate"])
        self.assertEqual(tables.demo._max_sentences(None), [])
        self.assertEqual(tables.demo._max_sentences(5), ["--max-sentences", "5"])
        for run in plan.runs:
            for scale in ("small", "paper"):
                self.assertTrue(os.path.isfile(os.path.join(common.ROOT, run.model_def(scale))))

    def test_the_options_reach_every_training(self):
        args, budget = tables._arguments(
            [
                "--scale",
                "paper",
                "--onmt-options=--mixed_precision,--jit_compile",
                "--num_gpus",
                "2",
            ]
        )
        self.assertEqual(args.options, ["--mixed_precision", "--jit_compile", "--num_gpus", "2"])
        self.assertEqual(budget["model_dim"], 512)
        with self.assertRaises(SystemExit):
            tables._arguments(["--steps", "0"])
        _, budget = tables._arguments(
            ["--scale", "paper", "--set", "eval_sentences=5", "--set", "finetune_steps=2"]
        )
        self.assertEqual((budget["eval_sentences"], budget["finetune_steps"]), (5, 2))
        for wrong in ("nothing=2", "steps=0", "steps=x", "evaluate_in_lanes=1"):
            with self.assertRaises(SystemExit):
                tables._arguments(["--set", wrong])


class FindingsTest(tf.test.TestCase):
    RESULTS = {
        "domains": DOMAINS,
        "rows": [
            ("Mixed", _scores(20.0, 10.0, 15.0)),  # 15.0
            ("Mixed (seed 2)", _scores(19.0, 10.0, 15.0)),  # spread 0.33
            ("LDR (oracle)", _scores(22.0, 12.0, 16.0)),  # +1.67
            ("DC (oracle)", _scores(20.0, 10.2, 15.0)),  # +0.07: within
            ("TTM (oracle)", _scores(10.0, 5.0, 5.0)),  # below
        ],
    }

    def test_rows_are_judged_by_the_spread(self):
        lines = tables.findings(
            self.RESULTS, 1 / 3, "Mixed", ["Mixed", "Mixed (seed 2)", "LDR", "DC", "TTM"]
        )
        text = "\n".join(lines)
        self.assertIn("Beat their Mixed beyond the spread: LDR (+1.7).", text)
        self.assertIn("Within the spread (no difference this run can show): DC (+0.1).", text)
        self.assertIn("Below their Mixed beyond the spread: TTM (-8.3).", text)

    def test_rows_are_judged_by_the_mixed_with_their_output_layer(self):
        results = dict(
            self.RESULTS,
            rows=self.RESULTS["rows"] + [("Mixed (untied)", _scores(21.0, 11.0, 16.0))],
        )  # 16.0: +1.0 on Mixed
        controls = {
            "LDR": "Mixed (untied)",
            "DC": "Mixed (untied)",
            "Mixed (untied)": "Mixed (untied)",
        }
        rows = ["Mixed", "Mixed (seed 2)", "Mixed (untied)", "LDR", "DC", "TTM"]
        text = "\n".join(tables.findings(results, 1 / 3, "Mixed", rows, controls))
        self.assertIn("Mixed (untied) averages 16.0 BLEU (+1.0)", text)
        self.assertIn(
            "Beat their Mixed beyond the spread: Mixed (untied) (+1.0), LDR (+0.7 on Mixed"
            " (untied)).",
            text,
        )
        self.assertIn("Below their Mixed beyond the spread: DC (-0.9 on Mixed (untied)), TTM", text)

    def test_the_orderings_are_compared_with_the_papers(self):
        ordering = {paper: [] for paper in quoted.PAPERS}
        first = next(iter(quoted.PAPERS))
        ordering[first] = ["DC", "LDR", "Mixed"]
        with mock.patch.object(quoted, "ordering", lambda paper: ordering[paper]):
            lines = tables.findings(self.RESULTS, 1 / 3, "Mixed", ["Mixed", "LDR", "DC"])
        [line] = [line for line in lines if "orders these rows" in line]
        self.assertIn(
            "orders these rows DC > LDR > Mixed; ours: LDR 16.7 > DC 15.1 > Mixed 15.0: of its"
            " 3 pairs, ours orders 1 the same way beyond the spread, 1 the other way, and"
            " cannot separate 1.",
            line,
        )

    def test_the_fine_tuned_rows_make_the_papers_ft_row(self):
        results = dict(
            self.RESULTS,
            rows=self.RESULTS["rows"]
            + [("FT_%s" % d, _scores(30.0, 30.0, 30.0)) for d in DOMAINS[:2]],
        )
        self.assertNotIn("FT", tables.row_averages(results))
        results["rows"].append(("FT_software", _scores(0.0, 0.0, 33.0)))
        self.assertAlmostEqual(tables.row_averages(results)["FT"], 31.0)
        self.assertEqual(tables._our_row("LDR (predicted)"), "LDR (pred)")


class ReportTest(tf.test.TestCase):
    """The report from made-up results: defects are findings, not results (issue 42 item 5),
    and its header states the stage-2 rule (item 4) and AdvL's weight."""

    def test_defects_are_findings_not_results(self):
        root = self.get_temp_dir()
        runs = tables.table_runs(["ml_transformer", "advl_transformer", "factorized_pa"])
        runs += [r for r in tables.table_runs(["factorized_df"]) if r.family == "factorized_df"]
        plan = _plan(root, runs, budget="default")
        plan.equal_stage2(DEFAULT_SIZES)
        plan.training_stages(plan.runs)
        rows = [
            ("Mixed", _scores(27.2, 11.4, 21.2)),
            ("Mixed (seed 2)", _scores(28.6, 11.2, 20.5)),
            ("Mixed (untied)", _scores(35.6, 12.3, 23.3)),
            ("ML", _scores(35.8, 13.4, 24.0)),
            ("AdvL", _scores(30.0, 12.0, 22.0)),  # near its control, but collapsed
            ("Factorized PA (oracle)", _scores(27.4, 12.0, 21.8)),
            ("Factorized DF (oracle)", _scores(21.4, 8.4, 14.4)),  # -5.2 on Mixed
            ("Factorized DF (generic)", _scores(21.0, 8.0, 14.0)),
        ]
        rows += [("FT_%s" % d, _scores(32.8, 12.3, 29.1)) for d in DOMAINS]
        outputs = {}
        for row, _ in rows:
            outputs[row] = os.path.join(root, "%s.fr" % row)
            lines = ["same"] * 5 + ["other"] if row == "AdvL" else ["t%d" % i for i in range(6)]
            with open(outputs[row], "w") as f:
                f.write("\n".join(lines) + "\n")
        results = {"domains": DOMAINS, "rows": rows, "outputs": outputs}
        tied = {run.name: "untied" not in run.name for run in plan.runs}
        tied.update({"ML": False, "AdvL": False})
        choice = {
            "path": "results/advl_grid/choice.json",
            "status": "used",
            "weight": 0.03,
            "points": [{"weight": 0.03, "average": 20.5}, {"weight": 0.3, "average": 2.0}],
        }
        printed = []

        def _table(shown):
            printed.extend(row for row, _ in shown["rows"])
            return "(BLEU table)"

        with mock.patch.object(tables, "output_layers", return_value=tied), mock.patch.object(
            tables.evaluate, "format_tables", side_effect=_table
        ), mock.patch.object(
            tables.contrastive, "format_tables", return_value="(contrastive)"
        ), mock.patch.object(
            tables.corpus_lib, "corpus_table", return_value="(corpus)"
        ):
            text = tables.write_report(
                plan,
                plan.steps,
                {},
                results,
                {},
                60.0,
                budget=plan.budget,
                mode="default",
                advl_choice=choice,
            )
        # Neither defect is printed as a result: not in the BLEU table, the share of FT's
        # gain or the comparisons.
        self.assertNotIn("AdvL", printed)
        self.assertNotIn("Factorized DF (oracle)", printed)
        self.assertNotIn("Factorized DF (generic)", printed)
        self.assertIn("Factorized PA (oracle)", printed)
        shares = text.split("## Share of FT's gain")[1].split("## Systems")[0]
        self.assertNotIn("AdvL", shares)
        self.assertIn("| Factorized PA (oracle) |", shares)
        findings = text.split("## What this shows")[1]
        [beat] = [line for line in findings.splitlines() if line.startswith("- Beat")]
        self.assertNotIn("AdvL", beat)
        [defect] = [line for line in findings.splitlines() if "Defects, not results" in line]
        self.assertIn(
            "AdvL: collapsed: 2 distinct translations of 6 test sentences (fewer than 50%)", defect
        )
        self.assertIn(
            "Factorized DF: 5.2 BLEU below its control Mixed (14.7 against 19.9; the bar is 3)",
            defect,
        )
        # The header: the stage-2 rule with its steps, and AdvL's weight and why.
        header = text.split("## Corpus")[0]
        self.assertIn(
            "stage 2 of the two-stage families 832 steps of batches of one domain", header
        )
        self.assertIn("FT_<domain>'s 250 batches of that domain", header)
        self.assertIn("AdvL's reversal weight: lambda = 0.03, chosen on the dev sets", header)


class ParametersTest(tf.test.TestCase):
    def test_domain_copies_are_counted_per_domain(self):
        def value(path):
            return "model/%s/.ATTRIBUTES/VARIABLE_VALUE" % path

        variables = [
            (value("encoder/layer_0/kernel"), [5, 5]),  # shared
            (value("encoder/layer_0/linear_keys/domain_0_kernel"), [5, 5]),  # PA's copies
            (value("encoder/layer_0/linear_keys/domain_1_kernel"), [5, 5]),
            (value("encoder/layer_0/linear_keys/domain_2_kernel"), [5, 5]),
            (value("word_inputter/domain_0_embedding"), [10, 2]),  # an LDR region
            (value("encoder/ffn/inner/kernel"), [5, 3, 7]),  # mixing: stacked copies
            (value("encoder/ffn/inner/bias"), [3, 7]),
            (value("encoder/ffn/outer/bias"), [7]),  # shared
            (value("encoder/layer_0/kernel") + "/.OPTIMIZER_SLOT/optimizer/m", [5, 5]),
            ("optimizer/iter/.ATTRIBUTES/VARIABLE_VALUE", []),
        ]
        with mock.patch.object(tf.train, "list_variables", return_value=variables):
            total, specific = tables.parameter_counts("ckpt", num_domains=3)
        self.assertEqual(total, 25 + 75 + 20 + 105 + 21 + 7)
        self.assertEqual(specific, 75 + 20 + 105 + 21)


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
            tables.dev_curves(path),
            {"medical": [(4500, 3.5), (4550, 3.25)], "software": [(4550, 4.0), (4600, 4.5)]},
        )
        self.assertEqual(tables.dev_curves(path + ".missing"), {})

    def test_the_section_has_a_row_per_domain_and_a_plot(self):
        plan = _plan(self.get_temp_dir(), tables.table_runs(["factorized_pa"]))
        plan.training_stages(plan.runs)
        with open(os.path.join(plan.steps.logs_dir, "factorized_pa.train.log"), "w") as f:
            f.write(self.LOG)
        lines = tables.curve_section(plan, plan.steps.out)
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


class DomainTokensTest(tf.test.TestCase):
    def test_a_family_with_domain_tokens_trains_with_them_in_its_vocabulary(self):
        plan = _plan(self.get_temp_dir(), tables.table_runs(["ttm_transformer"]))
        written = os.path.join(plan.steps.configs_dir, "ttm_target_vocabulary.txt")
        with mock.patch.object(
            tables.demo.baselines, "domain_token_vocabulary", return_value=written
        ) as vocabulary:
            plan.training_stages(plan.runs)
        vocabulary.assert_called_once_with(tables.demo.DATA_CONFIG, written)
        ttm = config_loader.load_config_file(os.path.join(plan.steps.configs_dir, "ttm.yml"))
        self.assertEqual(ttm["data"]["target_vocabulary"], written)
        mixed = config_loader.load_config_file(os.path.join(plan.steps.configs_dir, "mixed.yml"))
        self.assertNotIn("target_vocabulary", mixed["data"])


class LabelUseSectionTest(tf.test.TestCase):
    """The report's section on where the domain knowledge sits, from its figures."""

    CONTRASTIVE = {
        "rows": [
            {
                "system": "Mixed",
                "metric": "accuracy",
                "mode": "oracle",
                "values": {"all": 93.8},
                "margin": {"all": 14.7},
            },
            {"system": "LDR", "metric": "shift", "values": {"all": 51.0}, "margin": {"all": 0.02}},
            {"system": "DC", "metric": "shift", "values": {"all": 60.0}, "margin": {"all": 0.3}},
        ]
    }
    FIGURES = {
        "ldr": {
            "LDR": {
                "test": {"medical": [0.05, 100], "software": [0.07, 90]},
                "items": {"medical": [0.04, 10]},
                "by_step": [[1125, 0.02], [4500, 0.05]],
            }
        },
        "mixing": {
            "Domain mixing": [
                {
                    "label": "encoder/layer_0",
                    "side": "source",
                    "word": 20,
                    "word_correct": 8,
                    "word_mean": 0.41,
                    "other": 50,
                    "other_correct": 40,
                    "other_mean": 0.7,
                }
            ]
        },
    }

    def test_the_section_says_what_the_figures_say(self):
        text = "\n".join(
            tables.label_use_section(self.FIGURES, self.CONTRASTIVE, {"accuracy": 0.967}, "Mixed")
        )
        self.assertIn("labels 96.7% of the test sentences correctly", text)
        self.assertIn("in 93.8% of the contrastive items, by 14.7 nats", text)
        self.assertIn("DC +0.30, LDR +0.02 nats", text)  # strongest pull first
        self.assertIn("| LDR | test words | 0.050 | 0.070 |", text)
        self.assertIn("| LDR | ambiguous words | 0.040 | n/a |", text)
        self.assertIn("step 1125 0.020, step 4500 0.050", text)
        self.assertIn("| Domain mixing | encoder/layer_0 | 40.0 | 80.0 | 0.41 | 0.70 |", text)

    def test_a_table_without_ldr_or_mixing_rows_has_the_context_lines_only(self):
        lines = tables.label_use_section({"ldr": {}, "mixing": {}}, self.CONTRASTIVE, None, "Mixed")
        text = "\n".join(lines)
        self.assertNotIn("classifier", text)
        self.assertNotIn("|", text)
        self.assertIn("93.8%", text)


class OutputLayerTest(tf.test.TestCase):
    def _checkpoint(self, name, own_kernel):
        output = tf.Module()
        output.bias = tf.Variable([0.0])
        if own_kernel:
            output.kernel = tf.Variable([[0.0]])
        decoder = tf.Module()
        decoder.output_layer = output
        model = tf.Module()
        model.decoder = decoder
        return tf.train.Checkpoint(model=model).save(os.path.join(self.get_temp_dir(), name))

    def test_a_checkpoint_without_an_output_kernel_is_tied(self):
        self.assertTrue(common.output_layer_tied(self._checkpoint("tied", False)))
        self.assertFalse(common.output_layer_tied(self._checkpoint("own", True)))
