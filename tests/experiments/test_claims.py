import os
import types

import tensorflow as tf

from ldr_experiments import claims
from ldr_experiments.demo import Run
from tests.experiments.test_table_verdicts import make_judge

CONTROLS = {"LDR": "Mixed", "DC": "Mixed", "Domain mixing": "Mixed (tied)", "ML": "Mixed"}
TIED = {"Mixed": False, "Mixed (tied)": True, "LDR": False, "DC": False, "Domain mixing": True}

#: Made-up translations: the share of sentences each row translates as its reference.
QUALITIES = {
    "Mixed": 0.5,
    "Mixed (tied)": 0.4,
    "LDR (oracle)": 0.9,  # beats Mixed
    "LDR (generic)": 0.5,  # below its true label
    "LDR (wrong)": 0.9,  # costs nothing: the same translations as its true label
    "DC (oracle)": 0.5,
    "Domain mixing": 0.4,  # the tied Mixed's translations
    "ML": 0.5,
    "FT_medical": 1.0,
    "FT_religious": 1.0,
    "FT_software": 1.0,
}


def _claim(what):
    [claim] = [claim for claim in claims.CLAIMS if claim.what == what]
    return claim


class JudgeTest(tf.test.TestCase):
    def setUp(self):
        super().setUp()
        os.makedirs(os.path.join(self.get_temp_dir(), "passes"), exist_ok=True)
        self.verdict_judge = make_judge(self.get_temp_dir(), QUALITIES)

    def judge(self, what, flagged=()):
        return claims.judge(_claim(what), self.verdict_judge, CONTROLS, TIED, "Mixed", flagged)

    def test_a_claim_is_judged_by_the_stated_test_against_the_matched_control(self):
        verdict, ours, why = self.judge("LDR with the true label beats Mixed")
        self.assertEqual(verdict, claims.REPRODUCED)
        self.assertGreater(ours, 0)
        self.assertIn("LDR against Mixed, seeds 1: +", why)
        self.assertIn(": beats", why)
        # Domain mixing's control is the tied Mixed, whose translations are its own.
        verdict, ours, why = self.judge("domain mixing beats Mixed")
        self.assertEqual((verdict, ours), (claims.NOT_REPRODUCED, 0.0))
        self.assertIn("against Mixed (tied)", why)
        self.assertIn("no difference found", why)

    def test_equal_claims_hold_when_no_difference_is_found(self):
        verdict, ours, _ = self.judge(
            "LDR's generic label costs about nothing against its true label"
        )
        self.assertEqual(verdict, claims.NOT_REPRODUCED)
        self.assertLess(ours, 0)
        self.assertEqual(self.judge("a wrong label costs LDR something")[0], claims.NOT_REPRODUCED)
        self.assertEqual(self.judge("FT stays above LDR")[0], claims.REPRODUCED)
        self.assertEqual(self.judge("LDR beats DC")[0], claims.REPRODUCED)

    def test_as_well_as_is_decided_by_an_equivalence_test(self):
        # Issue 73: "as well as" was read from "no difference found".
        what = "LDR's generic label costs about nothing against its true label"
        for generic, expected in ((0.9, claims.REPRODUCED), (0.89, claims.NOT_DECIDED)):
            directory = os.path.join(self.get_temp_dir(), "equal%s" % generic)
            os.makedirs(directory, exist_ok=True)
            verdict_judge = make_judge(directory, dict(QUALITIES, **{"LDR (generic)": generic}))
            verdict, _, why = claims.judge(_claim(what), verdict_judge, CONTROLS, TIED, "Mixed")
            self.assertEqual(verdict, expected, why)
            if expected == claims.NOT_DECIDED:
                self.assertIn("no difference found", why)
        lines = claims.claim_lines(self.verdict_judge, CONTROLS, TIED, "Mixed")
        self.assertIn("equivalence test", "\n".join(lines))

    def test_beating_mixed_also_needs_the_control_of_the_same_compute(self):
        qualities = dict(QUALITIES, **{"Mixed (equal passes)": 0.9})
        verdict_judge = make_judge(os.path.join(self.get_temp_dir(), "passes"), qualities)
        equal = {"LDR": "Mixed (equal passes)"}
        verdict, _, why = claims.judge(
            _claim("LDR with the true label beats Mixed"),
            verdict_judge,
            CONTROLS,
            TIED,
            "Mixed",
            equal_controls=equal,
        )
        self.assertEqual(verdict, claims.NOT_REPRODUCED)  # Mixed of the same compute is as good
        self.assertIn("; against Mixed (equal passes) (the same compute), seeds 1:", why)
        self.assertIn("no difference found", why)
        verdict, _, why = claims.judge(
            _claim("LDR with the true label beats Mixed"),
            verdict_judge,
            CONTROLS,
            TIED,
            "Mixed",
            flagged={"Mixed (equal passes)": "collapsed"},
            equal_controls=equal,
        )
        self.assertEqual(verdict, claims.NOT_TESTABLE)

    def test_unmatched_missing_and_defective_rows_make_a_claim_not_testable(self):
        verdict, ours, why = self.judge("predicted labels do as well as true ones")
        self.assertEqual((verdict, ours), (claims.NOT_TESTABLE, None))
        self.assertIn("no LDR (pred) or LDR translations of a common seed", why)
        verdict, _, why = self.judge("domain mixing beats AdvL", flagged={"AdvL": "collapsed"})
        self.assertEqual((verdict, why), (claims.NOT_TESTABLE, "AdvL is a defect (below)"))
        # A tied row against an untied one: no matched comparison (issue 59 item 3).
        verdict, _, why = self.judge("domain mixing beats ML")
        self.assertEqual(verdict, claims.NOT_TESTABLE)
        self.assertEqual(why, "output layers differ (Domain mixing tied, ML own)")

    def test_the_section_quotes_the_papers_figure_and_counts_the_verdicts(self):
        lines = claims.claim_lines(self.verdict_judge, CONTROLS, TIED, "Mixed")
        text = "\n".join(lines)
        # The LDR paper's Table 2 (English-French): LDR 55.3, Mixed 52.9.
        [line] = [
            line for line in lines if "| LDR with the true label beats Mixed | +2.4 |" in line
        ]
        self.assertIn("| reproduced |", line)
        counts = [line for line in lines if line.endswith("not testable here.")]
        self.assertEqual(len(counts), 1)
        total = sum(int(word) for word in counts[0].replace(",", "").split() if word.isdigit())
        self.assertEqual(total, len(claims.CLAIMS))
        self.assertIn("stated test", text)


class GoalTest(tf.test.TestCase):
    def _plan(self, *runs):
        return types.SimpleNamespace(runs_by_name={run.name: run for run in runs})

    def test_the_goal_is_judged_against_the_equal_compute_control_and_generic(self):
        os.makedirs(os.path.join(self.get_temp_dir(), "again"))
        qualities = {
            "Mixed": 0.5,
            "Mixed (equal passes)": 0.7,
            "LDR (summed) (oracle)": 0.9,
            "LDR (summed) (generic)": 0.6,
            "LDR (oracle)": 0.6,
            "LDR (generic)": 0.6,
        }
        judge = make_judge(self.get_temp_dir(), qualities)
        plan = self._plan(
            Run("ldr_transformer", suffix=" (summed)", control="Mixed (equal passes)"),
            Run("ldr_transformer", control="Mixed (equal passes)"),
        )
        text = "\n".join(claims.goal_lines(judge, plan, {}, "Mixed"))
        self.assertIn("model: met by LDR (summed).", text)
        self.assertIn("LDR (summed): true label +", text)
        self.assertIn("on Mixed (equal passes) (p ", text)
        # LDR (Procedure 1) is below its equal-compute Mixed, and its label adds nothing.
        self.assertIn("LDR: true label -", text)
        self.assertIn("no difference found", text)
        qualities["LDR (summed) (oracle)"] = 0.6
        judge = make_judge(os.path.join(self.get_temp_dir(), "again"), qualities)
        text = "\n".join(claims.goal_lines(judge, plan, {}, "Mixed"))
        self.assertIn("model: not met.", text)
