"""The benchmark's command line and driver: sizes, tasks, the entry points (no measurement
is run)."""

import os
import subprocess
import sys
import unittest

from ldr_experiments import cli as experiments_cli
from ldr_experiments.benchmarks import cli, rows
from tests.experiments.benchmarks import fixtures

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
EXAMPLE = os.path.join(ROOT, "examples", "domain_bias", "domain_bias.py")


class CommandLineTest(unittest.TestCase):
    def test_sizes(self):
        quick = fixtures.config()
        self.assertEqual(quick["layers"], rows.QUICK["layers"])
        self.assertEqual(quick["size"]["ffn_inner_dim"], 4 * rows.QUICK["units"])
        args = cli.parse_args(["--units", "32", "--steps", "7"])
        self.assertEqual((args.units, args.steps), (32, 7))
        self.assertEqual(args.layers, rows.DEFAULTS["layers"])
        args = cli.parse_args(["--quick", "--units", "32"])
        self.assertEqual((args.units, args.layers), (32, rows.QUICK["layers"]))
        with self.assertRaises(SystemExit):
            cli.parse_args(["--steps", "0"])

    def test_tasks(self):
        tasks = cli.tasks_of(["train", "infer"], fixtures.selected(["factorized"]))
        self.assertEqual(
            tasks,
            ["train:vanilla", "train:fact_pa", "train:fact_sf", "train:fact_df", "prepare"]
            + ["tf:vanilla", "tf:fact_pa", "tf:fact_sf", "tf:fact_df", "tf:ens_fact_pa"]
            + ["ct2:vanilla", "ct2:fact_pa", "ct2:fact_sf", "ct2:fact_df"],
        )
        self.assertIn("ct2:ldr", cli.tasks_of(["infer"], fixtures.selected(None)))

    def test_a_user_module_reaches_every_measurement_process(self):
        selected = fixtures.selected(["domain_bias_transformer"], [EXAMPLE])
        self.assertEqual(
            cli.tasks_of(["train", "infer"], selected),
            ["train:vanilla", "train:domain_bias", "prepare", "tf:vanilla", "tf:domain_bias"]
            + ["ct2:vanilla"],
        )
        args = cli.parse_args(
            ["--quick", "--user_module", EXAMPLE, "--families", "domain_bias_transformer"]
        )
        config = cli.make_config(args, "/tmp/none")
        self.assertEqual(config["user_modules"], [EXAMPLE])
        self.assertEqual([row["name"] for row in config["rows"]], ["vanilla", "domain_bias"])
        with self.assertRaises(SystemExit):
            cli.parse_args(["--quick", "--families", "domain_bias_transformer_typo"])

    def test_entry_points(self):
        # ldr-experiments bench runs this module's main; a measurement process is
        # python -m ldr_experiments.benchmarks --one TASK --workdir DIR.
        module, _ = experiments_cli.COMMANDS["bench"]
        self.assertEqual("ldr_experiments." + module, cli.__name__)
        result = subprocess.run(
            [sys.executable, "-m", "ldr_experiments.benchmarks", "--one", "train:vanilla"],
            capture_output=True,
            text=True,
        )
        self.assertEqual(result.returncode, 2)
        self.assertIn("run/bench.sh: error: --one needs --workdir", result.stderr)


if __name__ == "__main__":
    unittest.main()
