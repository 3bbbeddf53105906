"""The benchmark's row table, read from the family registry and from nowhere else."""

import dataclasses
import glob
import json
import os
import unittest

from ldr_experiments import systems
from ldr_experiments.benchmarks import rows as rows_lib
from ldr_opennmt import probe, registry
from tests.experiments.benchmarks import fixtures

PACKAGE = os.path.dirname(os.path.abspath(rows_lib.__file__))


class RowTableTest(unittest.TestCase):
    def test_every_family_with_a_benchmark_has_its_rows(self):
        rows = {row.name: row for row in rows_lib.build_rows(fixtures.SIZE)}
        self.assertEqual(list(rows)[0], rows_lib.VANILLA)
        families = [f for f in registry.families() if systems.benchmarked(f)]
        self.assertGreater(len(families), 5)
        for family in families:
            caps = probe.capabilities(family.name)
            declared = systems.benchmark_rows(family, fixtures.SIZE)
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
            selected = rows_lib.select_rows(list(rows.values()), [family.name])
            self.assertEqual([row.name for row in selected], ["vanilla"] + [r.name for r in own])

    def test_the_package_rows(self):
        rows = {row.name: row for row in rows_lib.build_rows(fixtures.SIZE)}
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
        mixed = [name for name, row in rows.items() if row.labels == rows_lib.FEED_MIXED]
        self.assertEqual(mixed, ["fact_pa", "fact_sf", "fact_df"])
        folded = [name for name, row in rows.items() if row.ct2]
        self.assertEqual(folded, ["vanilla", "dc", "ldr", "fact_pa", "fact_sf", "fact_df"])
        # Today's group names still select their families.
        self.assertEqual(
            [row.name for row in rows_lib.select_rows(list(rows.values()), ["mixing"])],
            ["vanilla", "mix_k2", "mix_k3", "mix_k6"],
        )
        self.assertEqual(
            [row.name for row in rows_lib.select_rows(list(rows.values()), ["ensembles"])],
            ["vanilla", "ldr", "ens_ldr", "fact_pa", "ens_fact_pa"],
        )
        with self.assertRaisesRegex(ValueError, "names no benchmark row"):
            rows_lib.select_rows(list(rows.values()), ["no_such_family"])

    def test_a_user_family_gets_its_rows(self):
        example = os.path.join(os.path.dirname(PACKAGE), "..", "examples", "domain_bias")
        rows = fixtures.selected(
            ["domain_bias_transformer"], [os.path.join(example, "domain_bias.py")]
        )
        self.assertEqual([row.name for row in rows], ["vanilla", "domain_bias"])
        row = rows[1]
        self.assertEqual((row.family, row.title), ("domain_bias_transformer", "Domain output bias"))
        self.assertEqual(row.domain_training, "joint")
        self.assertEqual(row.domains, rows_lib.DOMAINS)
        self.assertTrue(row.train and row.tf)
        # It refuses CTranslate2: no CTranslate2 row.
        self.assertFalse(row.ct2)

    def test_rows_travel_as_json(self):
        for row in rows_lib.build_rows(fixtures.SIZE):
            data = json.loads(json.dumps(dataclasses.asdict(row)))
            self.assertEqual(rows_lib.Row(**data), row)

    def test_no_other_list_of_families(self):
        sources = ""
        for path in sorted(glob.glob(os.path.join(PACKAGE, "*.py"))):
            with open(path, encoding="utf-8") as f:
                sources += f.read()
        self.assertIn("def build_rows", sources)
        self.assertNotIn("fact_pa", sources)
        # No row name (the registry's) is written out in the package.
        for row in rows_lib.build_rows(fixtures.SIZE):
            if row.name != rows_lib.VANILLA:
                self.assertNotIn('"%s"' % row.name, sources)
                self.assertNotIn("'%s'" % row.name, sources)

    def test_no_tables_beside_the_rows(self):
        # ldr_experiments/gpu_check reads the rows too (issue 33): the tables derived for it are
        # gone, and a name that is no row of the run is no row.
        for name in ("NAMES", "TRAIN_SYSTEMS", "FAMILIES", "DOMAIN_TRAINING", "derived_tables"):
            self.assertFalse(hasattr(rows_lib, name), name)
        config = {"rows": [dataclasses.asdict(r) for r in fixtures.selected(["ldr_transformer"])]}
        self.assertEqual(rows_lib.find_row(config, "ldr_joint").family, "ldr_transformer")
        with self.assertRaisesRegex(KeyError, "no row 'dc'"):
            rows_lib.find_row(config, "dc")


if __name__ == "__main__":
    unittest.main()
