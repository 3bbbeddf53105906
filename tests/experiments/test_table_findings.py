from unittest import mock

import tensorflow as tf

from ldr_experiments import quoted, table_findings
from tests.experiments.test_tables import DOMAINS, _scores


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
        lines = table_findings.findings(
            self.RESULTS, {"Mixed": 1 / 3}, "Mixed", ["Mixed", "Mixed (seed 2)", "LDR", "DC", "TTM"]
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
        text = "\n".join(
            table_findings.findings(results, {"Mixed": 1 / 3}, "Mixed", rows, controls)
        )
        self.assertIn("Mixed (untied) averages 16.0 BLEU (+1.0 on Mixed", text)
        self.assertIn(
            "Beat their Mixed beyond the spread: LDR (+0.7 on Mixed (untied)).",
            text,
        )
        self.assertIn("Below their Mixed beyond the spread: DC (-0.9 on Mixed (untied)), TTM", text)

    def test_each_row_is_judged_by_its_controls_spread(self):
        # The tied Mixed's seeds are 1.0 apart, the baseline's 1/3: the same +0.7 is within
        # the tied control's spread and beyond the baseline's.
        results = dict(
            self.RESULTS,
            rows=self.RESULTS["rows"]
            + [
                ("Mixed (tied)", _scores(14.0, 9.0, 12.0)),  # 11.67
                ("Mixed (tied, seed 2)", _scores(13.0, 8.0, 11.0)),  # 10.67: spread 1.0
                ("Domain mixing", _scores(15.0, 9.0, 13.0)),  # 12.33: +0.67 on the tied
                ("ML", _scores(21.0, 10.0, 16.0)),  # 15.67: +0.67 on Mixed
            ],
        )
        controls = {"Domain mixing": "Mixed (tied)", "Mixed (tied)": "Mixed (tied)"}
        rows = ["Mixed", "Mixed (tied)", "Mixed (tied, seed 2)", "Domain mixing", "ML"]
        spreads = {"Mixed": 1 / 3, "Mixed (tied)": 1.0}
        text = "\n".join(table_findings.findings(results, spreads, "Mixed", rows, controls))
        self.assertIn("Beat their Mixed beyond the spread: ML (+0.7).", text)
        self.assertIn(
            "Within the spread (no difference this run can show): Domain mixing (+0.7 on Mixed"
            " (tied)).",
            text,
        )
        self.assertIn("Mixed (tied) averages 11.7 BLEU (-3.3 on Mixed; seed spread 1.0 BLEU)", text)
        self.assertNotIn("seed 2) (", text)  # the twin is not judged

    def test_the_orderings_are_compared_with_the_papers(self):
        ordering = {paper: [] for paper in quoted.PAPERS}
        first = next(iter(quoted.PAPERS))
        ordering[first] = ["DC", "LDR", "Mixed"]
        with mock.patch.object(quoted, "ordering", lambda paper: ordering[paper]):
            lines = table_findings.findings(
                self.RESULTS, {"Mixed": 1 / 3}, "Mixed", ["Mixed", "LDR", "DC"]
            )
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
        self.assertNotIn("FT", table_findings.row_averages(results))
        results["rows"].append(("FT_software", _scores(0.0, 0.0, 33.0)))
        self.assertAlmostEqual(table_findings.row_averages(results)["FT"], 31.0)
        self.assertEqual(table_findings._our_row("LDR (predicted)"), "LDR (pred)")
