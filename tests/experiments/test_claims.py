import tensorflow as tf

from ldr_experiments import claims
from tests.experiments.test_tables import DOMAINS, _scores

CONTROLS = {"LDR": "Mixed", "DC": "Mixed", "Domain mixing": "Mixed (tied)", "ML": "Mixed"}
SPREADS = {"Mixed": 0.5, "Mixed (tied)": 1.0}


def _claim(what):
    [claim] = [claim for claim in claims.CLAIMS if claim.what == what]
    return claim


class JudgeTest(tf.test.TestCase):
    AVERAGES = {
        "Mixed": 24.0,
        "Mixed (tied)": 20.0,
        "LDR": 25.0,  # +1.0 on Mixed: beyond 0.5
        "LDR (oracle)": 25.0,
        "LDR (generic)": 24.2,  # -0.8 on LDR: not "about nothing"
        "LDR (wrong)": 24.8,  # -0.2 on LDR: within the spread
        "DC": 24.9,
        "Domain mixing": 20.8,  # +0.8 on the tied Mixed: within its 1.0
        "FT": 28.0,
    }

    def judge(self, what, flagged=()):
        return claims.judge(_claim(what), self.AVERAGES, CONTROLS, SPREADS, "Mixed", flagged)

    def test_a_claim_is_judged_against_the_rows_matched_control_and_its_spread(self):
        verdict, ours, why = self.judge("LDR with the true label beats Mixed")
        self.assertEqual(verdict, claims.REPRODUCED)
        self.assertAlmostEqual(ours, 1.0)
        self.assertEqual(why, "LDR 25.0 against Mixed 24.0, spread 0.5")
        # Domain mixing's control is the tied Mixed, whose seeds are 1.0 apart.
        verdict, ours, why = self.judge("domain mixing beats Mixed")
        self.assertEqual(verdict, claims.NOT_REPRODUCED)
        self.assertAlmostEqual(ours, 0.8)
        self.assertIn("against Mixed (tied) 20.0, spread 1.0", why)

    def test_equal_claims_hold_within_the_spread(self):
        verdict, ours, _ = self.judge(
            "LDR's generic label costs about nothing against its true label"
        )
        self.assertEqual(verdict, claims.NOT_REPRODUCED)
        self.assertAlmostEqual(ours, -0.8)
        # A wrong label within the spread: the claim that it costs is not reproduced.
        self.assertEqual(self.judge("a wrong label costs LDR something")[0], claims.NOT_REPRODUCED)
        self.assertEqual(self.judge("FT stays above LDR")[0], claims.REPRODUCED)

    def test_missing_and_defective_rows_make_a_claim_not_testable(self):
        verdict, ours, why = self.judge("predicted labels do as well as true ones")
        self.assertEqual((verdict, ours, why), (claims.NOT_TESTABLE, None, "no LDR (pred) row"))
        verdict, _, why = self.judge("domain mixing beats AdvL", flagged={"AdvL": "collapsed"})
        self.assertEqual((verdict, why), (claims.NOT_TESTABLE, "AdvL is a defect (below)"))

    def test_the_section_quotes_the_papers_figure_and_counts_the_verdicts(self):
        lines = claims.claim_lines(self.AVERAGES, CONTROLS, SPREADS, "Mixed")
        text = "\n".join(lines)
        # The LDR paper's Table 2 (English-French): LDR 55.3, Mixed 52.9.
        self.assertIn(
            "| Pham et al., 2019 (IWSLT) | LDR with the true label beats Mixed | +2.4 | +1.0 |"
            " reproduced |",
            text,
        )
        counts = [line for line in lines if line.endswith("not testable here.")]
        self.assertEqual(len(counts), 1)
        total = sum(int(word) for word in counts[0].replace(",", "").split() if word.isdigit())
        self.assertEqual(total, len(claims.CLAIMS))


class GoalTest(tf.test.TestCase):
    def test_both_goals_are_judged_with_their_figures(self):
        results = {
            "domains": DOMAINS,
            "rows": [
                ("Mixed", _scores(30.0, 10.0, 20.0)),
                ("LDR (joint) (oracle)", _scores(33.0, 12.0, 23.0)),  # 60% of FT's gain, least
                ("LDR (joint) (generic)", _scores(30.0, 10.2, 19.9)),  # within 0.5
                ("DC (oracle)", _scores(34.0, 10.5, 21.0)),  # 20% on software
                ("FT_medical", _scores(35.0, 0.0, 0.0)),
                ("FT_religious", _scores(0.0, 12.0, 0.0)),
                ("FT_software", _scores(0.0, 0.0, 25.0)),
            ],
        }
        averages = {
            "Mixed": 20.0,
            "LDR (joint) (oracle)": 22.67,
            "LDR (joint) (generic)": 20.03,
            "DC (oracle)": 21.83,
        }
        lines = claims.goal_lines(
            results,
            averages,
            {"LDR (joint)": "Mixed"},
            {"Mixed": 0.5},
            "Mixed",
            ["Mixed", "LDR (joint)", "DC"],
        )
        text = "\n".join(lines)
        self.assertIn(
            "LDR (joint): true label +2.7, generic +0.0 on Mixed (spread 0.5; the label adds"
            " +2.6): met",
            text,
        )
        self.assertIn(
            "LDR (joint) (oracle), whose least share is 60% (medical 60%, religious 100%,"
            " software 60%): met.",
            text,
        )
        # Without a row recovering half of the gain everywhere: not met.
        results["rows"] = [row for row in results["rows"] if "LDR" not in row[0]]
        text = "\n".join(
            claims.goal_lines(results, averages, {}, {"Mixed": 0.5}, "Mixed", ["Mixed", "DC"])
        )
        self.assertIn("DC (oracle), whose least share is 20%", text)
        self.assertIn(": not met.", text)

    def test_a_domain_ft_does_not_improve_asks_nothing(self):
        # FT_religious no better than the base: the least share is over the other domains.
        results = {
            "domains": DOMAINS,
            "rows": [
                ("Mixed", _scores(30.0, 12.3, 20.0)),
                ("LDR (summed) (oracle)", _scores(35.0, 14.7, 24.0)),
                ("FT_medical", _scores(40.0, 0.0, 0.0)),
                ("FT_religious", _scores(0.0, 12.2, 0.0)),
                ("FT_software", _scores(0.0, 0.0, 28.0)),
            ],
        }
        text = "\n".join(claims.goal_lines(results, {}, {}, {}, "Mixed", ["Mixed", "LDR (summed)"]))
        self.assertIn(
            "LDR (summed) (oracle), whose least share is 50% (medical 50%, religious: FT gains"
            " nothing over Mixed, nothing to recover, software 50%): met.",
            text,
        )

    def test_what_falls_short_of_reading_the_label_is_said(self):
        self.assertEqual(claims._label_verdict(2.0, 0.1, 0.3), "met")
        self.assertIn("true label does not beat it", claims._label_verdict(0.2, 0.0, 0.3))
        self.assertIn("generic label falls below it", claims._label_verdict(2.0, -2.2, 0.3))
        self.assertIn("generic label is above the spread", claims._label_verdict(4.0, 1.8, 0.3))
