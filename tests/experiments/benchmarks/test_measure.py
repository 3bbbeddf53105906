"""The benchmark's measurement processes: their data, helpers and imports (no model is
measured here; ``bash run/bench.sh --quick`` measures them all)."""

import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import unittest

from ldr_experiments.benchmarks import measure
from tests.experiments.benchmarks import fixtures

#: The modules of the library a CTranslate2 process may hold: the package and its
#: standard-library modules (loaded from their files, or plainly once importing the package
#: imports no TensorFlow).
PLAIN = {"ldr_opennmt", "ldr_opennmt.gpu", "ldr_opennmt.reports"}


class HelpersTest(unittest.TestCase):
    def test_domain_blocks(self):
        with tempfile.TemporaryDirectory() as directory:
            paths = measure.write_data(directory, 10, 7, 3, seed=1, block=3)
            with open(paths["dom"]) as f:
                self.assertEqual(f.read().split(), ["d0"] * 3 + ["d1"] * 3 + ["d2"])
            with open(paths["src"]) as f:
                sentences = f.read().splitlines()
            self.assertEqual([len(s.split()) for s in sentences], [3] * 7)

    def test_agreement(self):
        self.assertEqual(measure.agreement([["a"], ["b"]], [["a"], ["c"]]), 0.5)
        self.assertIsNone(measure.agreement([["a"]], None))
        self.assertIsNone(measure.agreement([["a"]], [["a"], ["b"]]))

    def test_peak_rss(self):
        self.assertGreater(measure.peak_rss_mib(), 1.0)

    def test_write_atomically(self):
        with tempfile.TemporaryDirectory() as directory:
            path = os.path.join(directory, "bench.md")
            measure.write_atomically(path, "first\n")
            measure.write_atomically(path, "second\n")
            with open(path) as f:
                self.assertEqual(f.read(), "second\n")
            self.assertEqual(os.listdir(directory), ["bench.md"])


class ProcessTest(unittest.TestCase):
    def test_a_ctranslate2_process_reads_no_registry(self):
        # What a CTranslate2 measurement process (python -m ldr_experiments.benchmarks) does
        # before it loads its model: its row read from the configuration.
        config = {"rows": [dataclasses.asdict(r) for r in fixtures.selected(["ldr_transformer"])]}
        config["workdir"] = "/w"
        code = (
            "import json, sys; from ldr_experiments.benchmarks import __main__, measure, rows; "
            "config = json.loads(sys.argv[1]); row = rows.find_row(config, 'ldr'); "
            "print(measure._ct2_model_dir(config, row)); "
            "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('tensorflow', 'ldr_opennmt', 'opennmt', 'ldr_experiments'))))"
        )
        output = subprocess.run(
            [sys.executable, "-c", code, json.dumps(config)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.splitlines()
        self.assertEqual(output[0], "/w/ct2/ldr/d0")
        loaded = set(json.loads(output[1]))
        self.assertLessEqual(loaded - {m for m in loaded if m.startswith("ldr_experiments")}, PLAIN)
        # None of the experiments' modules that import TensorFlow at their top either.
        self.assertNotIn("ldr_experiments.common", loaded)
        self.assertIn("ldr_experiments.benchmarks.cli", loaded)


if __name__ == "__main__":
    unittest.main()
