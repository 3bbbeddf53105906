import json
import os
import types

import tensorflow as tf

from ldr_experiments import table_serving, tables
from tests.experiments.test_tables import DOMAINS


class ServingTest(tf.test.TestCase):
    def test_each_row_says_what_serving_it_takes(self):
        out = self.get_temp_dir()
        for domain, (sentences, seconds) in zip(DOMAINS, [(100, 1.0), (300, 2.0), (100, 1.0)]):
            model_dir = os.path.join(out, "distill", "ct2_%s" % domain, domain)
            os.makedirs(model_dir, exist_ok=True)
            with open(os.path.join(out, "distill", "%s.json" % domain), "w") as f:
                json.dump({"sentences": sentences, "seconds": seconds}, f)
            with open(os.path.join(model_dir, "model.bin"), "wb") as f:
                f.write(b"0" * 2_000_000)
        self.assertEqual(table_serving.measured(out, DOMAINS), (2.0, 125.0))
        runs = {
            run.name: run for run in tables.table_runs(["ldr_transformer", "residual_adapters"])
        }
        plan = types.SimpleNamespace(
            steps=types.SimpleNamespace(out=out), domains=DOMAINS, scale="small", runs_by_name=runs
        )
        names = ["Mixed", "LDR", "Residual adapters", "LDR (summed, every layer)"]
        text = "\n".join(table_serving.serving_section(plan, names))
        self.assertIn("| Mixed | 1 | CTranslate2 | 2 | 125 |", text)
        # LDR folds into one plain Transformer per label: 3 domains and generic.
        self.assertIn("| LDR | 4 | CTranslate2 | 8 | 125 |", text)
        self.assertIn("| Residual adapters | 1 | SavedModel only: residual adapters are not", text)
        self.assertIn("| LDR (summed, every layer) | 1 | SavedModel only: the LDR transform", text)
        self.assertIn("| FT (FT_<domain>, one per domain) | 3 | CTranslate2 | 6 | 125 |", text)
        # Without the distillation's measures: no figure is made up.
        empty = types.SimpleNamespace(**dict(vars(plan), steps=types.SimpleNamespace(out="/no")))
        self.assertIn(
            "| Mixed | 1 | CTranslate2 | - | - |",
            "\n".join(table_serving.serving_section(empty, ["Mixed"])),
        )
