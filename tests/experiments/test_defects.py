import os

import tensorflow as tf

from ldr_experiments import defects, table_verdicts

SYSTEMS = ["Mixed", "Mixed (untied)", "LDR", "LDR (joint)", "AdvL", "Factorized DF", "FT_medical"]
AVERAGES = {
    "Mixed": 20.0,
    "Mixed (untied)": 23.8,
    "LDR": 23.7,
    "LDR (joint)": 25.8,
    "AdvL": 0.5,
    "Factorized DF": 14.8,
    "FT_medical": 12.0,  # forgetting the other domains: its point, not a defect
}
CONTROLS = {"LDR": "Mixed (untied)", "LDR (joint)": "Mixed (untied)", "AdvL": "Mixed (untied)"}


class DefectsTest(tf.test.TestCase):
    def test_collapsed_and_far_below_their_control_are_defects(self):
        counts = {"AdvL": (43, 600), "LDR": (598, 600), "FT_medical": (250, 600)}
        found = defects.find(AVERAGES, SYSTEMS, "Mixed", CONTROLS, counts)
        self.assertEqual(list(found), ["AdvL", "Factorized DF", "FT_medical"])
        self.assertEqual(
            found["AdvL"],
            "collapsed: 43 distinct translations of 600 test sentences (fewer than 50%);"
            " 23.3 BLEU below its control Mixed (untied) (0.5 against 23.8; the bar is 3)",
        )
        self.assertEqual(
            found["Factorized DF"],
            "5.2 BLEU below its control Mixed (14.8 against 20.0; the bar is 3)",
        )
        self.assertIn("collapsed: 250 distinct translations of 600", found["FT_medical"])

    def test_a_control_is_not_judged_against_another_kinds_control(self):
        # The tied Mixed is 3.8 below the untied base but is the control of the tied rows
        # (its own control): not a defect; a tied row far below it is.
        averages = {"Mixed": 23.8, "Mixed (tied)": 20.0, "DF": 14.8, "Broken": 10.0}
        controls = {"Mixed (tied)": "Mixed (tied)", "DF": "Mixed (tied)"}
        systems = ["Mixed", "Mixed (tied)", "DF", "Broken"]
        found = defects.find(averages, systems, "Mixed", controls, {"Mixed (tied)": (590, 600)})
        self.assertEqual(list(found), ["DF", "Broken"])
        self.assertIn("below its control Mixed (tied) (14.8 against 20.0", found["DF"])
        found = defects.find(averages, systems, "Mixed", controls, {"Mixed (tied)": (10, 600)})
        self.assertIn("Mixed (tied)", found)  # a collapsed control is still a defect

    def test_the_bars(self):
        # 3.0 below is not more than 3 below; half the sentences distinct is not fewer.
        averages = {"Mixed": 20.0, "SF": 17.0, "DF": 16.99}
        found = defects.find(averages, ["Mixed", "SF", "DF"], "Mixed", {}, {"SF": (300, 600)})
        self.assertEqual(list(found), ["DF"])
        found = defects.find(averages, ["SF"], "Mixed", {}, {"SF": (299, 600)})
        self.assertEqual(list(found), ["SF"])

    def test_a_defect_leaves_every_row_of_its_system(self):
        results = {
            "domains": ["medical"],
            "rows": [
                ("Mixed", {}),
                ("Mixed (seed 2)", {}),
                ("LDR (oracle)", {}),
                ("LDR (joint) (oracle)", {}),
                ("LDR (joint) (generic)", {}),
                ("AdvL", {}),
            ],
        }
        kept = defects.without(results, {"LDR (joint)": "x", "AdvL": "y", "Mixed": "z"})
        self.assertEqual([row for row, _ in kept["rows"]], ["Mixed (seed 2)", "LDR (oracle)"])
        self.assertIs(defects.without(results, {}), results)
        # With the twins' rows known, a flagged row's seeds go with it, translations too.
        results["outputs"] = {row: row + ".fr" for row, _ in results["rows"]}
        results["rows"].append(("LDR (joint, seed 2) (oracle)", {}))
        results["outputs"]["LDR (joint, seed 2) (oracle)"] = "twin.fr"
        kept = defects.without(
            results, {"LDR (joint)": "x"}, lambda row: table_verdicts.parse_twin(row)[0]
        )
        self.assertNotIn("LDR (joint, seed 2) (oracle)", [row for row, _ in kept["rows"]])
        self.assertEqual(
            sorted(kept["outputs"]), ["AdvL", "LDR (oracle)", "Mixed", "Mixed (seed 2)"]
        )
        self.assertEqual(defects.system_of("LDR (joint) (ens-uniform)", SYSTEMS), "LDR (joint)")
        self.assertIsNone(defects.system_of("Mixed (seed 2)", SYSTEMS))

    def test_translation_counts_read_each_systems_first_row(self):
        directory = self.get_temp_dir()
        paths = {}
        for name, lines in (("advl", ["a", "a", "b", "a"]), ("ldr", ["a", "b", "c", "d"])):
            paths[name] = os.path.join(directory, name)
            with open(paths[name], "w") as f:
                f.write("\n".join(lines) + "\n")
        results = {
            "rows": [("AdvL", {}), ("LDR (oracle)", {}), ("LDR (generic)", {}), ("ML", {})],
            "outputs": {
                "AdvL": paths["advl"],
                "LDR (oracle)": paths["ldr"],
                "LDR (generic)": paths["advl"],
                "ML": os.path.join(directory, "gone"),
            },
        }
        counts = defects.translation_counts(results, ["AdvL", "LDR", "ML"])
        self.assertEqual(counts, {"AdvL": (2, 4), "LDR": (4, 4)})

    def test_the_findings_line(self):
        self.assertEqual(defects.lines({}), [])
        [line] = defects.lines({"AdvL": "collapsed"})
        self.assertIn("**Defects, not results**", line)
        self.assertIn("AdvL: collapsed.", line)
