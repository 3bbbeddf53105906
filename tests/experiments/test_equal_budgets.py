import math

import tensorflow as tf
from parameterized import parameterized

from ldr_experiments import equal_budgets

#: The default corpus's training sentences (data/default/corpus.json, stats.*.train.pairs).
DEFAULT_SIZES = {"medical": 10083, "religious": 29683, "software": 2509}
#: A skewed corpus: one huge domain, one tiny.
SKEWED_SIZES = {"news": 2000000, "legal": 40000, "poetry": 300}


def _info(sizes):
    return {
        "domains": list(sizes),
        "stats": {d: {"train": {"pairs": n}, "dev": {"pairs": 5}} for d, n in sizes.items()},
    }


class Stage2StepsTest(tf.test.TestCase):
    """Every domain's blocks see at least FT_<domain>'s batches of that domain."""

    def _assert_rule(self, budget, sizes):
        stage2 = equal_budgets.Stage2Budget(sizes, budget)
        ft = budget["finetune_steps"]
        for domain, p in stage2.probabilities.items():
            mean = stage2.steps * p
            sigma = math.sqrt(stage2.steps * p * (1 - p))
            # The expected batches of the domain, less two standard deviations, are FT's.
            self.assertGreaterEqual(mean - 2 * sigma, ft - 1e-9, domain)
        # The fewest such steps (or the budget's floor).
        if stage2.steps > budget["stage2_steps"]:
            least = min(stage2.probabilities.values())
            self.assertLess(equal_budgets.expected_batches(stage2.steps - 1, least), ft)
        self.assertGreaterEqual(stage2.steps, budget["stage2_steps"])
        return stage2

    @parameterized.expand(
        [
            ("default_uniform", DEFAULT_SIZES, 0.0),
            ("default_alpha_half", DEFAULT_SIZES, 0.5),
            ("skewed_uniform", SKEWED_SIZES, 0.0),
            ("skewed_alpha_half", SKEWED_SIZES, 0.5),
            ("skewed_natural", SKEWED_SIZES, 1.0),
        ]
    )
    def test_the_rule_holds(self, _, sizes, alpha):
        for ft, floor in ((250, 400), (10, 10), (20000, 50000)):
            budget = {"finetune_steps": ft, "stage2_steps": floor, "stage2_alpha": alpha}
            self._assert_rule(budget, sizes)

    def test_the_default_table(self):
        # The table's budget (FT 250 steps, stage 2 at least 400) on the default corpus: uniform
        # sampling, 832 steps (3 x 250 = 750 on average, plus the margin).
        budget = {"finetune_steps": 250, "stage2_steps": 400}
        stage2 = self._assert_rule(budget, equal_budgets.corpus_sizes(_info(DEFAULT_SIZES)))
        self.assertEqual(stage2.alpha, 0.0)
        self.assertEqual(stage2.steps, 832)
        for value in stage2.probabilities.values():
            self.assertAlmostEqual(value, 1 / 3)
        # The mixed batches' probabilities at alpha 0.5 would need twice as many steps, and
        # still fewer sentences of software than FT_software's: its p is 0.155.
        half = equal_budgets.Stage2Budget(DEFAULT_SIZES, dict(budget, stage2_alpha=0.5))
        self.assertAlmostEqual(half.probabilities["software"], 0.155, places=3)
        self.assertGreater(half.steps, 2 * stage2.steps - 100)
        self.assertIn("832 steps", stage2.rule())
        self.assertIn("software 0.333", stage2.rule())

    def test_a_skewed_corpus_is_bound_by_its_rarest_domain(self):
        budget = {"finetune_steps": 250, "stage2_steps": 400, "stage2_alpha": 0.5}
        stage2 = self._assert_rule(budget, SKEWED_SIZES)
        least = stage2.probabilities["poetry"]
        self.assertEqual(least, min(stage2.probabilities.values()))
        self.assertGreater(stage2.steps, 250 / least)
        # Uniform sampling ignores the skew.
        uniform = equal_budgets.Stage2Budget(SKEWED_SIZES, dict(budget, stage2_alpha=0))
        self.assertEqual(uniform.steps, 832)

    def test_the_budget_is_a_floor(self):
        budget = {"finetune_steps": 10, "stage2_steps": 1000}
        stage2 = equal_budgets.Stage2Budget(DEFAULT_SIZES, budget)
        self.assertEqual(stage2.steps, 1000)
        self.assertIn("are the floor", stage2.rule())

    def test_the_config_trains_one_domain_per_batch(self):
        stage2 = equal_budgets.Stage2Budget(DEFAULT_SIZES, {"finetune_steps": 5, "stage2_steps": 1})
        base = {
            "data": {"domain_batches": False},
            "train": {"batch_size": 1024, "domain_sampling_alpha": 0.5},
            "finetune": {"steps": 3},
        }
        config = stage2.config(base)
        self.assertEqual(config["data"], {"domain_batches": True})
        self.assertEqual(config["train"], {"batch_size": 1024, "domain_sampling_alpha": 0.0})
        self.assertEqual(base["data"], {"domain_batches": False})  # not changed in place
