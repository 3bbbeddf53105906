"""The benchmark script: its row table read from the family registry, and its pure
helpers (no measurement is run)."""

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import unittest

from ldr_experiments import benchmarks, systems
from ldr_opennmt import registry

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLE = os.path.join(ROOT, "examples", "domain_bias", "domain_bias.py")
SIZE = benchmarks.make_size(1, 16, 2)
#: The domain counts of the domain-mixing rows (catalog: mix_k2, mix_k3, mix_k6).
MIXING_KS = (2, 3, 6)

CPUINFO = """processor\t: 0
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC 7B13
processor\t: 1
model name\t: AMD EPYC 7B13
"""


def _results(ldr_tokens=96.0, procedure1_ms=200.0, ldr_tf=10.0, ldr_ct2=31.0, dc_ct2=None):
    infer = {
        "tf:vanilla": {"sentences_per_s": 10.0},
        "tf:ldr": {"sentences_per_s": ldr_tf},
        "tf:dc": {"sentences_per_s": 10.0},
        "ct2:ldr": {"sentences_per_s": ldr_ct2},
    }
    if dc_ct2 is not None:
        infer["ct2:dc"] = {"sentences_per_s": dc_ct2}
    return {
        "train": {
            "vanilla": {"tokens_per_s": 100.0, "ms_per_step": 100.0},
            "ldr_joint": {"tokens_per_s": ldr_tokens, "ms_per_step": 104.0},
            "ldr_procedure1": {"tokens_per_s": 50.0, "ms_per_step": procedure1_ms},
        },
        "infer": infer,
    }


def _config(**kwargs):
    args = argparse.Namespace(
        quick=True, threads=2, quantization=None, seed=1, parts=["train", "infer"]
    )
    args = benchmarks.resolve_sizes(
        argparse.Namespace(**vars(args), **{k: None for k in benchmarks.DEFAULTS})
    )
    config = benchmarks.make_config(args, "/tmp/none")
    config.update(kwargs)
    return config


def _selected(families, user_modules=()):
    rows = benchmarks.build_rows(SIZE, user_modules)
    return benchmarks.select_rows(rows, families)


class BenchmarkHelpersTest(unittest.TestCase):
    def test_ratio_and_formats(self):
        self.assertEqual(benchmarks.ratio(3.0, 2.0), 1.5)
        self.assertIsNone(benchmarks.ratio(None, 2.0))
        self.assertIsNone(benchmarks.ratio(1.0, 0.0))
        self.assertEqual(benchmarks.format_ratio(0.955), "0.95x")
        self.assertEqual(benchmarks.format_ratio(None), "n/a")
        self.assertEqual(benchmarks.format_number(1234.56, 0), "1235")
        self.assertEqual(benchmarks.format_number(None), "n/a")

    def test_check(self):
        self.assertEqual(benchmarks.check(0.95, ">=", 0.95), "PASS")
        self.assertEqual(benchmarks.check(0.94, ">=", 0.95), "MISS")
        self.assertEqual(benchmarks.check(2.05, "<=", 2.05), "PASS")
        self.assertEqual(benchmarks.check(2.06, "<=", 2.05), "MISS")
        self.assertEqual(benchmarks.check(None, ">=", 3.0), "n/a")
        with self.assertRaises(ValueError):
            benchmarks.check(1.0, ">", 1.0)

    def test_targets(self):
        checks = benchmarks.check_targets(_results())
        self.assertEqual(len(checks), len(benchmarks.TARGETS))
        # DC's CTranslate2 model was not measured.
        self.assertEqual([c[4] for c in checks[:5]], ["PASS", "PASS", "PASS", "PASS", "n/a"])
        # The Factorized systems were not measured.
        self.assertEqual({c[4] for c in checks[5:]}, {"n/a"})
        self.assertAlmostEqual(checks[0][1], 0.96)
        self.assertAlmostEqual(checks[1][1], 2.0)
        self.assertAlmostEqual(checks[3][1], 3.1)

    def test_targets_missed(self):
        checks = benchmarks.check_targets(
            _results(ldr_tokens=94.0, procedure1_ms=210.0, ldr_tf=9.0, ldr_ct2=26.0, dc_ct2=29.0)
        )
        self.assertEqual([c[4] for c in checks[:5]], ["MISS"] * 5)

    def test_factorized_targets(self):
        results = _results()
        results["train"]["vanilla"]["peak_rss_mib"] = 1000.0
        results["infer"]["tf:vanilla"]["ms_per_sentence"] = 100.0
        for design, step, rss, beam in (("sf", 115.0, 1300.0, 130.0), ("pa", 121.0, 900.0, 170.0)):
            results["train"]["fact_" + design] = {"ms_per_step": step, "peak_rss_mib": rss}
            results["infer"]["tf:fact_" + design] = {"ms_per_sentence": beam}
        checks = {c[0]: c for c in benchmarks.check_targets(results)}
        sf = [c for name, c in checks.items() if name.startswith("Factorized SF")]
        self.assertEqual([c[4] for c in sf], ["PASS", "PASS", "PASS"])
        pa = [c for name, c in checks.items() if name.startswith("Factorized PA")]
        self.assertEqual([c[4] for c in pa], ["MISS", "PASS", "MISS"])
        self.assertAlmostEqual(pa[2][1], 1.7)
        df = [c for name, c in checks.items() if name.startswith("Factorized DF")]
        self.assertEqual([c[4] for c in df], ["n/a"] * 3)

    def test_mixing_flops_and_targets(self):
        config = _config()
        self.assertAlmostEqual(benchmarks.mixing_flop_ratios(config, 1)[0], 1.0, delta=0.02)
        ratios = [benchmarks.mixing_flop_ratios(config, k) for k in MIXING_KS]
        self.assertEqual(ratios, sorted(ratios))
        for train, decode in ratios:
            self.assertGreater(train, 1.0)
            self.assertGreater(decode, 1.0)
        results = _results()
        results["train"]["vanilla"]["ms_per_step"] = 100.0
        train2 = ratios[0][0]
        results["train"]["mix_k2"] = {"ms_per_step": 100.0 * train2 / 0.8 - 1}
        results["train"]["mix_k3"] = {"ms_per_step": 100.0 * ratios[1][0] / 0.8 + 1}
        checks = benchmarks.check_targets(results, config)
        self.assertEqual(len(checks), len(benchmarks.TARGETS) + 2 * len(MIXING_KS))
        mixing = {c[0]: c[4] for c in checks[len(benchmarks.TARGETS) :]}
        self.assertEqual(
            [status for name, status in mixing.items() if "training" in name],
            ["PASS", "MISS", "n/a"],
        )
        self.assertEqual(benchmarks._row(config, "mix_k6").domains, ["d%d" % i for i in range(6)])
        self.assertIsNone(benchmarks._row(config, "vanilla").domains)
        # Without the domain-mixing rows, no domain-mixing target.
        config["rows"] = [row for row in config["rows"] if not row["name"].startswith("mix")]
        self.assertEqual(len(benchmarks.check_targets(results, config)), len(benchmarks.TARGETS))

    def test_families_and_domain_blocks(self):
        tasks = benchmarks._tasks(["train", "infer"], _selected(["factorized"]))
        self.assertEqual(
            tasks,
            ["train:vanilla", "train:fact_pa", "train:fact_sf", "train:fact_df", "prepare"]
            + ["tf:vanilla", "tf:fact_pa", "tf:fact_sf", "tf:fact_df", "tf:ens_fact_pa"]
            + ["ct2:vanilla", "ct2:fact_pa", "ct2:fact_sf", "ct2:fact_df"],
        )
        self.assertIn("ct2:ldr", benchmarks._tasks(["infer"], _selected(None)))
        with tempfile.TemporaryDirectory() as directory:
            paths = benchmarks.write_data(directory, 10, 7, 3, seed=1, block=3)
            with open(paths["dom"]) as f:
                self.assertEqual(f.read().split(), ["d0"] * 3 + ["d1"] * 3 + ["d2"])

    def test_failed_measurement_is_not_checked(self):
        results = _results()
        results["train"]["vanilla"] = {"error": "boom"}
        checks = benchmarks.check_targets(results)
        self.assertEqual([c[4] for c in checks[:2]], ["n/a", "n/a"])
        self.assertIsNone(checks[0][1])

    def test_markdown_table(self):
        table = benchmarks.markdown_table(["system", "ms"], [["a", 1.5], ["b", "n/a"]])
        self.assertEqual(table, "| system | ms |\n|---|---:|\n| a | 1.5 |\n| b | n/a |")
        with self.assertRaises(ValueError):
            benchmarks.markdown_table(["a", "b"], [["only one"]])

    def test_machine_parsers(self):
        self.assertEqual(benchmarks.parse_cpu_model(CPUINFO), "AMD EPYC 7B13")
        self.assertIsNone(benchmarks.parse_cpu_model("processor\t: 0\n"))
        self.assertEqual(benchmarks.parse_mem_total_gib("MemTotal:  2097152 kB\n"), 2.0)
        self.assertIsNone(benchmarks.parse_mem_total_gib(""))
        status = "Name:\tpython\nVmHWM:\t  524288 kB\nVmRSS:\t 1024 kB\n"
        self.assertEqual(benchmarks.parse_peak_rss_mib(status), 512.0)
        self.assertIsNone(benchmarks.parse_peak_rss_mib("Name:\tpython\n"))
        self.assertGreater(benchmarks.peak_rss_mib(), 1.0)

    def test_agreement(self):
        self.assertEqual(benchmarks.agreement([["a"], ["b"]], [["a"], ["c"]]), 0.5)
        self.assertIsNone(benchmarks.agreement([["a"]], None))
        self.assertIsNone(benchmarks.agreement([["a"]], [["a"], ["b"]]))

    def test_sizes(self):
        quick = _config()
        self.assertEqual(quick["layers"], benchmarks.QUICK["layers"])
        self.assertEqual(quick["size"]["ffn_inner_dim"], 4 * benchmarks.QUICK["units"])
        args = benchmarks.parse_args(["--units", "32", "--steps", "7"])
        self.assertEqual((args.units, args.steps), (32, 7))
        self.assertEqual(args.layers, benchmarks.DEFAULTS["layers"])
        args = benchmarks.parse_args(["--quick", "--units", "32"])
        self.assertEqual((args.units, args.layers), (32, benchmarks.QUICK["layers"]))
        with self.assertRaises(SystemExit):
            benchmarks.parse_args(["--steps", "0"])

    def test_report(self):
        results = _results()
        results["train"]["vanilla"].update(
            params=10, tokens_per_step=40, import_rss_mib=400.0, peak_rss_mib=500.0
        )
        results["train"]["ldr_joint"].update(
            params=12, tokens_per_step=40, import_rss_mib=400.0, peak_rss_mib=550.0
        )
        results["train"]["ldr_procedure1"] = {"error": "killed"}
        config = _config()
        length = config["decode_length"]
        for task, entry in results["infer"].items():
            entry.update(
                tokens_per_s=entry["sentences_per_s"] * length,
                tokens_per_sentence=length,
                model_mib=1.0,
                peak_rss_mib=500.0,
                agreement=1.0 if task.startswith("ct2") else None,
            )
        results["infer"]["ct2:ldr"]["tokens_per_sentence"] = length - 0.5
        machine = dict.fromkeys(
            ["cpu", "arch", "cores", "memory", "load", "python", "tensorflow", "opennmt"], "x"
        )
        machine.update(ctranslate2="3.24.0", date="2026-01-01")
        report = benchmarks.format_report(config, results, machine, elapsed=90)
        self.assertIn("CTranslate2 3.24.0", report)
        self.assertIn("| LDR joint | 12 | 104.0 | 96 | 0.96x | 1.04x | 400 | 550 | 1.10x |", report)
        self.assertIn("| LDR Procedure 1 | failed: killed |", report)
        self.assertIn("| LDR | CTranslate2 | 31.0 |", report)
        self.assertIn("| 3.10x | 100% |", report)
        self.assertIn("**Warning**: the outputs of ct2:ldr are not all of L", report)
        self.assertIn(
            "| LDR joint training tokens/s ≥ 0.95× vanilla | 0.96x | ≥ 0.95x | PASS |", report
        )
        self.assertIn(
            "| LDR Procedure 1 step ≤ 2.05× a vanilla step | n/a | ≤ 2.05x | n/a |", report
        )
        self.assertTrue(report.endswith("Run time: 1.5 min.\n"))

    def test_write_atomically(self):
        with tempfile.TemporaryDirectory() as directory:
            path = os.path.join(directory, "bench.md")
            benchmarks.write_atomically(path, "first\n")
            benchmarks.write_atomically(path, "second\n")
            with open(path) as f:
                self.assertEqual(f.read(), "second\n")
            self.assertEqual(os.listdir(directory), ["bench.md"])


class RowTableTest(unittest.TestCase):
    """The rows come from the registry, and from nowhere else."""

    def test_every_family_with_a_benchmark_has_its_rows(self):
        rows = {row.name: row for row in benchmarks.build_rows(SIZE)}
        self.assertEqual(list(rows)[0], benchmarks.VANILLA)
        families = [f for f in registry.families() if systems.benchmarked(f)]
        self.assertGreater(len(families), 5)
        for family in families:
            caps = registry.capabilities(family.name)
            declared = systems.benchmark_rows(family, SIZE)
            self.assertTrue(declared, family.name)
            for name, kwargs, options in declared:
                self.assertIn(name, rows, family.name)
                row = rows[name]
                self.assertEqual((row.family, row.family_title), (family.name, family.title))
                if options.get("ensemble"):
                    self.assertTrue(row.ensemble and row.tf and not row.train and not row.ct2)
                    self.assertIsNone(caps.ensembles)
                    self.assertTrue(rows[row.model].tf)  # The SavedModel it translates with.
                    continue
                self.assertTrue(row.train)
                self.assertEqual(row.kwargs, kwargs)
                self.assertEqual(len(row.domains), options.get("num_domains", 3))
                mode = options.get("domain_training", "joint")
                self.assertEqual(row.domain_training, mode)
                self.assertIn(mode, caps.domain_training)
            # The family's SavedModel and, when it folds, its CTranslate2 model.
            own = [row for row in rows.values() if row.family == family.name]
            inference = [row for row in own if row.tf and not row.ensemble]
            self.assertTrue(inference, family.name)
            folds = caps.ctranslate2 is None and caps.domain_parameters
            self.assertEqual([row.ct2 for row in inference], [folds] * len(inference))
            self.assertFalse(any(row.ct2 for row in own if not row.tf or row.ensemble))
            selected = benchmarks.select_rows(list(rows.values()), [family.name])
            self.assertEqual([row.name for row in selected], ["vanilla"] + [r.name for r in own])

    def test_the_package_rows(self):
        rows = {row.name: row for row in benchmarks.build_rows(SIZE)}
        self.assertEqual(rows["ldr_joint"].title, "LDR joint")
        self.assertEqual(rows["ldr_procedure1"].title, "LDR Procedure 1")
        # The two LDR training rows share one inference row, titled by the family.
        self.assertEqual((rows["ldr"].title, rows["ldr"].train, rows["ldr"].ct2), ("LDR", 0, 1))
        self.assertEqual(rows["ens_ldr"].model, "ldr")
        self.assertEqual(rows["ens_ldr"].title, "LDR, ens-uniform (3 domains + generic)")
        self.assertEqual(rows["mix_k2"].title, "Domain mixing, k = 2")
        self.assertEqual(rows["fact_df"].kwargs, {"d_inner": 9})  # 280/512 of 16 units.
        self.assertEqual(rows["adapters"].domain_training, "domains")
        self.assertTrue(rows["ttm"].domain_tokens)
        mixed = [name for name, row in rows.items() if row.labels == benchmarks.FEED_MIXED]
        self.assertEqual(mixed, ["fact_pa", "fact_sf", "fact_df"])
        folded = [name for name, row in rows.items() if row.ct2]
        self.assertEqual(folded, ["vanilla", "dc", "ldr", "fact_pa", "fact_sf", "fact_df"])
        # Today's group names still select their families.
        self.assertEqual(
            [row.name for row in benchmarks.select_rows(list(rows.values()), ["mixing"])],
            ["vanilla", "mix_k2", "mix_k3", "mix_k6"],
        )
        self.assertEqual(
            [row.name for row in benchmarks.select_rows(list(rows.values()), ["ensembles"])],
            ["vanilla", "ldr", "ens_ldr", "fact_pa", "ens_fact_pa"],
        )
        with self.assertRaisesRegex(ValueError, "names no benchmark row"):
            benchmarks.select_rows(list(rows.values()), ["no_such_family"])

    def test_a_user_family_gets_its_rows(self):
        rows = _selected(["domain_bias_transformer"], [EXAMPLE])
        self.assertEqual([row.name for row in rows], ["vanilla", "domain_bias"])
        row = rows[1]
        self.assertEqual((row.family, row.title), ("domain_bias_transformer", "Domain output bias"))
        self.assertEqual(row.domain_training, "joint")
        self.assertEqual(row.domains, benchmarks.DOMAINS)
        self.assertTrue(row.train and row.tf)
        # It refuses CTranslate2: no CTranslate2 row.
        self.assertFalse(row.ct2)
        self.assertEqual(
            benchmarks._tasks(["train", "infer"], rows),
            ["train:vanilla", "train:domain_bias", "prepare", "tf:vanilla", "tf:domain_bias"]
            + ["ct2:vanilla"],
        )
        # Through the command line: the module reaches every measurement process.
        args = benchmarks.parse_args(
            ["--quick", "--user_module", EXAMPLE, "--families", "domain_bias_transformer"]
        )
        config = benchmarks.make_config(args, "/tmp/none")
        self.assertEqual(config["user_modules"], [EXAMPLE])
        self.assertEqual([row["name"] for row in config["rows"]], ["vanilla", "domain_bias"])
        with self.assertRaises(SystemExit):
            benchmarks.parse_args(["--quick", "--families", "domain_bias_transformer_typo"])

    def test_rows_travel_as_json(self):
        for row in benchmarks.build_rows(SIZE):
            data = json.loads(json.dumps(dataclasses.asdict(row)))
            self.assertEqual(benchmarks.Row(**data), row)

    def test_a_ctranslate2_process_reads_no_registry(self):
        # What a CTranslate2 measurement does before it loads its model: the module run
        # as a script, its row read from the configuration.
        config = {"rows": [dataclasses.asdict(r) for r in _selected(["ldr_transformer"])]}
        config["workdir"] = "/w"
        code = (
            "import json, runpy, sys; g = runpy.run_path(sys.argv[1]); "
            "row = g['_row'](json.loads(sys.argv[2]), 'ldr'); "
            "print(g['_ct2_model_dir'](json.loads(sys.argv[2]), row)); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('tensorflow', 'ldr_opennmt', 'opennmt')))"
        )
        path = os.path.join(ROOT, "ldr_experiments", "benchmarks.py")
        output = subprocess.run(
            [sys.executable, "-c", code, path, json.dumps(config)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.splitlines()
        self.assertEqual(output, ["/w/ct2/ldr/d0", "[]"])

    def test_no_other_list_of_families(self):
        with open(os.path.join(ROOT, "ldr_experiments", "benchmarks.py"), encoding="utf-8") as f:
            source = f.read()
        self.assertNotIn("fact_pa", source)
        # No row name (the registry's) is written out in the script.
        for row in benchmarks.build_rows(SIZE):
            if row.name != benchmarks.VANILLA:
                self.assertNotIn('"%s"' % row.name, source)
                self.assertNotIn("'%s'" % row.name, source)

    def test_no_tables_beside_the_rows(self):
        # ldr_experiments/gpu_check.py reads the rows too (issue 33): the tables derived for it are
        # gone, and a name that is no row of the run is no row.
        for name in ("NAMES", "TRAIN_SYSTEMS", "FAMILIES", "DOMAIN_TRAINING", "derived_tables"):
            self.assertFalse(hasattr(benchmarks, name), name)
        config = {"rows": [dataclasses.asdict(r) for r in _selected(["ldr_transformer"])]}
        self.assertEqual(benchmarks._as_row("ldr_joint", config).family, "ldr_transformer")
        with self.assertRaisesRegex(KeyError, "no row 'dc'"):
            benchmarks._as_row("dc", config)


if __name__ == "__main__":
    unittest.main()
