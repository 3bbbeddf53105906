"""ldr-experiments stack-parity (issue 78 item 3): one family measured twice on this stack is
identical to itself, and a changed weight or translation is found and named."""

import json
import os
import shutil
import tempfile
import unittest

import numpy as np

from ldr_experiments import stack_parity


class StackParityTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.directory = tempfile.mkdtemp(prefix="ldr-stack-parity-")
        cls.a = os.path.join(cls.directory, "a")
        stack_parity.main(
            ["measure", "--out", cls.a, "--steps", "2", "--families", "ldr_transformer"]
        )

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.directory, ignore_errors=True)

    def test_measure_records_the_stack_and_the_family(self):
        with open(os.path.join(self.a, "measure.json"), encoding="utf-8") as f:
            record = json.load(f)
        self.assertEqual(sorted(record["families"]), ["ldr_transformer"])
        family = record["families"]["ldr_transformer"]
        self.assertEqual(len(family["losses"]), 2)
        self.assertEqual(sorted(family["model"]), sorted(stack_parity.LABELS))
        self.assertEqual(sorted(family["ctranslate2"]), sorted(stack_parity.LABELS))
        self.assertIn("tensorflow", record["versions"])
        with self.assertRaises(SystemExit):  # An existing directory is refused.
            stack_parity.main(["measure", "--out", self.a])

    def test_a_copy_is_identical_and_a_change_is_named(self):
        b = os.path.join(self.directory, "b")
        shutil.copytree(self.a, b)
        same = stack_parity.compare(self.a, b, os.path.join(self.directory, "same"))
        row = same["families"]["ldr_transformer"]
        self.assertEqual(row["weights_max_difference"], 0.0)
        self.assertIsNone(row["loss_first_step_differing"])
        self.assertTrue(row["translations_identical"] and row["ctranslate2_identical"])
        # One weight moved by 0.5, one translation changed, the second loss changed.
        weights_path = os.path.join(b, "ldr_transformer", "weights.npz")
        weights = dict(np.load(weights_path))
        key = sorted(weights)[3]
        weights[key] = weights[key] + 0.5
        np.savez(weights_path, **weights)
        with open(os.path.join(b, "measure.json"), encoding="utf-8") as f:
            record = json.load(f)
        family = record["families"]["ldr_transformer"]
        family["losses"][1] += 1e-3
        family["model"]["d0"][0] = family["model"]["d0"][0] + ["x"]
        with open(os.path.join(b, "measure.json"), "w", encoding="utf-8") as f:
            json.dump(record, f)
        out = os.path.join(self.directory, "changed")
        row = stack_parity.compare(self.a, b, out)["families"]["ldr_transformer"]
        self.assertAlmostEqual(row["weights_max_difference"], 0.5, places=5)
        self.assertEqual(row["weights_worst"], key.split(" ", 1)[1])
        self.assertEqual(row["loss_first_step_differing"], 2)
        self.assertFalse(row["translations_identical"])
        with open(os.path.join(out, "report.md"), encoding="utf-8") as f:
            report = f.read()
        short = "/".join(key.split(" ", 1)[1].split("/")[-3:])
        self.assertIn("| ldr_transformer | 0.5 (%s) |" % short, report)


if __name__ == "__main__":
    unittest.main()
