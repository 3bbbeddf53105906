"""Both spellings of each long option (issue 55, item 7: ``--dev-size`` and ``--model_dir``
both existed; a user had to remember which)."""

import contextlib
import io
import unittest

from ldr_opennmt.cli import ArgumentParser
from ldr_opennmt.cli import data as data_cli
from ldr_opennmt.cli import export as export_cli
from tests.helpers import run_cli


class SpellingsTest(unittest.TestCase):
    def _parser(self):
        parser = ArgumentParser(prog="x")
        parser.add_argument("--dev-size", type=int)
        parser.add_argument("--model_dir")
        sub = parser.add_subparsers(dest="command")
        build = sub.add_parser("build")
        build.add_argument("--bpe-merges", type=int)
        return parser

    def test_both_spellings_of_every_option(self):
        parser = self._parser()
        for argv in (
            ["--dev-size", "3", "--model_dir", "m"],
            ["--dev_size", "3", "--model-dir", "m"],
            ["--dev_size=3", "--model-dir=m"],
        ):
            args = parser.parse_args(argv)
            self.assertEqual((args.dev_size, args.model_dir), (3, "m"), argv)
        # In a sub-command; an option-like value is a value.
        args = parser.parse_args(["--model_dir=--dev-size", "build", "--bpe_merges", "5"])
        self.assertEqual((args.model_dir, args.bpe_merges, args.dev_size), ("--dev-size", 5, None))
        # An unknown option is still refused, under the name given.
        stderr = io.StringIO()
        with self.assertRaises(SystemExit), contextlib.redirect_stderr(stderr):
            parser.parse_args(["build", "--dev_sizes", "3"])
        self.assertIn("unrecognized arguments: --dev_sizes 3", stderr.getvalue())

    def test_the_commands_take_both(self):
        args = export_cli._parser().parse_args(
            ["ctranslate2", "--config", "a.yml", "--output-dir", "out", "--model-dir", "m"]
        )
        self.assertEqual((args.output_dir, args.model_dir), ("out", "m"))
        # ldr-data's --dev-size as --dev_size: recognized (refused for its value, not its name).
        status, stderr = run_cli(
            data_cli.main, ["build", "default", "--out", "x", "--dev_size", "-5"]
        )
        self.assertEqual(status, 2)
        self.assertIn("argument --dev-size: must be a positive integer, got '-5'", stderr)


if __name__ == "__main__":
    unittest.main()
