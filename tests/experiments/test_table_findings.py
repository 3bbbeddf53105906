from unittest import mock

import tensorflow as tf

from ldr_experiments import quoted, table_findings
from tests.experiments.test_table_verdicts import make_judge
from tests.experiments.test_tables import DOMAINS, _scores


class FindingsTest(tf.test.TestCase):
    RESULTS = {
        "domains": DOMAINS,
        "rows": [
            ("Mixed", _scores(20.0, 10.0, 15.0)),  # 15.0
            ("LDR (oracle)", _scores(22.0, 12.0, 16.0)),  # 16.7
            ("DC (oracle)", _scores(20.0, 10.2, 15.0)),  # 15.1
            ("TTM (oracle)", _scores(10.0, 5.0, 5.0)),
            ("Domain mixing", _scores(10.0, 5.0, 5.0)),
        ],
    }
    QUALITIES = {
        "Mixed": 0.5,
        "Mixed (tied)": 0.3,
        "LDR (oracle)": 0.9,
        "DC (oracle)": 0.5,
        "TTM (oracle)": 0.2,
        "Domain mixing": 0.6,
    }

    def setUp(self):
        super().setUp()
        self.judge = make_judge(self.get_temp_dir(), self.QUALITIES)

    def test_rows_are_judged_by_the_stated_test_against_their_matched_mixed(self):
        controls = {"Domain mixing": "Mixed (tied)", "Mixed (tied)": "Mixed (tied)"}
        rows = ["Mixed", "Mixed (tied)", "LDR", "DC", "TTM", "Domain mixing"]
        results = dict(
            self.RESULTS, rows=self.RESULTS["rows"] + [("Mixed (tied)", _scores(1, 1, 1))]
        )
        text = "\n".join(table_findings.findings(results, self.judge, "Mixed", rows, controls))
        [beat] = [line for line in text.splitlines() if line.startswith("- Beat")]
        self.assertIn("LDR (+", beat)
        self.assertIn("Domain mixing (+", beat)
        self.assertIn("on Mixed (tied), p ", beat)
        self.assertIn("- No difference found: DC (+0.0 on Mixed, p 1.000).", text)
        [below] = [line for line in text.splitlines() if line.startswith("- Below")]
        self.assertIn("TTM (-", below)
        self.assertNotIn("Mixed (tied) (", text)  # a control is not judged here

    def test_the_orderings_are_compared_with_the_papers_on_matched_pairs(self):
        ordering = {paper: [] for paper in quoted.PAPERS}
        first = next(iter(quoted.PAPERS))
        ordering[first] = ["DC", "LDR", "Mixed", "Domain mixing"]
        tied = {"Mixed": False, "LDR": False, "DC": False, "Domain mixing": True}
        with mock.patch.object(quoted, "ordering", lambda paper: ordering[paper]):
            lines = table_findings.findings(
                self.RESULTS, self.judge, "Mixed", ["Mixed", "LDR", "DC"], tied=tied
            )
        [line] = [line for line in lines if "orders these rows" in line]
        self.assertIn("orders these rows DC > LDR > Mixed > Domain mixing", line)
        # DC > LDR: the other way; DC > Mixed: no difference; LDR > Mixed: the same way; the
        # three pairs with the tied Domain mixing: no matched comparison.
        self.assertIn(
            "Of its 6 pairs, the stated test orders 1 the same way and 1 the other way, finds no"
            " difference in 1, and 3 are no matched comparison (output layers differ).",
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
