"""The benchmark's targets: resolved to a run's rows and checked (no measurement is run)."""

import unittest

from ldr_experiments.benchmarks import rows, targets
from tests.experiments.benchmarks import fixtures

#: The domain counts of the domain-mixing rows (catalog: mix_k2, mix_k3, mix_k6).
MIXING_KS = (2, 3, 6)


class TargetsTest(unittest.TestCase):
    def test_ratio(self):
        self.assertEqual(targets.ratio(3.0, 2.0), 1.5)
        self.assertIsNone(targets.ratio(None, 2.0))
        self.assertIsNone(targets.ratio(1.0, 0.0))

    def test_check(self):
        self.assertEqual(targets.check(0.95, ">=", 0.95), "PASS")
        self.assertEqual(targets.check(0.94, ">=", 0.95), "MISS")
        self.assertEqual(targets.check(2.05, "<=", 2.05), "PASS")
        self.assertEqual(targets.check(2.06, "<=", 2.05), "MISS")
        self.assertEqual(targets.check(None, ">=", 3.0), "n/a")
        with self.assertRaises(ValueError):
            targets.check(1.0, ">", 1.0)

    def test_targets(self):
        checks = targets.check_targets(fixtures.results())
        self.assertEqual(len(checks), len(targets.TARGETS))
        # DC's CTranslate2 model was not measured.
        self.assertEqual([c[4] for c in checks[:5]], ["PASS", "PASS", "PASS", "PASS", "n/a"])
        # The Factorized systems were not measured.
        self.assertEqual({c[4] for c in checks[5:]}, {"n/a"})
        self.assertAlmostEqual(checks[0][1], 0.96)
        self.assertAlmostEqual(checks[1][1], 2.0)
        self.assertAlmostEqual(checks[3][1], 3.1)

    def test_targets_missed(self):
        checks = targets.check_targets(
            fixtures.results(
                ldr_tokens=94.0, procedure1_ms=210.0, ldr_tf=9.0, ldr_ct2=26.0, dc_ct2=29.0
            )
        )
        self.assertEqual([c[4] for c in checks[:5]], ["MISS"] * 5)

    def test_factorized_targets(self):
        results = fixtures.results()
        results["train"]["vanilla"]["peak_rss_mib"] = 1000.0
        results["infer"]["tf:vanilla"]["ms_per_sentence"] = 100.0
        for design, step, rss, beam in (("sf", 115.0, 1300.0, 130.0), ("pa", 121.0, 900.0, 170.0)):
            results["train"]["fact_" + design] = {"ms_per_step": step, "peak_rss_mib": rss}
            results["infer"]["tf:fact_" + design] = {"ms_per_sentence": beam}
        checks = {c[0]: c for c in targets.check_targets(results)}
        sf = [c for name, c in checks.items() if name.startswith("Factorized SF")]
        self.assertEqual([c[4] for c in sf], ["PASS", "PASS", "PASS"])
        pa = [c for name, c in checks.items() if name.startswith("Factorized PA")]
        self.assertEqual([c[4] for c in pa], ["MISS", "PASS", "MISS"])
        self.assertAlmostEqual(pa[2][1], 1.7)
        df = [c for name, c in checks.items() if name.startswith("Factorized DF")]
        self.assertEqual([c[4] for c in df], ["n/a"] * 3)

    def test_mixing_flops_and_targets(self):
        config = fixtures.config()
        self.assertAlmostEqual(targets.mixing_flop_ratios(config, 1)[0], 1.0, delta=0.02)
        ratios = [targets.mixing_flop_ratios(config, k) for k in MIXING_KS]
        self.assertEqual(ratios, sorted(ratios))
        for train, decode in ratios:
            self.assertGreater(train, 1.0)
            self.assertGreater(decode, 1.0)
        results = fixtures.results()
        results["train"]["vanilla"]["ms_per_step"] = 100.0
        train2 = ratios[0][0]
        results["train"]["mix_k2"] = {"ms_per_step": 100.0 * train2 / 0.8 - 1}
        results["train"]["mix_k3"] = {"ms_per_step": 100.0 * ratios[1][0] / 0.8 + 1}
        checks = targets.check_targets(results, config)
        self.assertEqual(len(checks), len(targets.TARGETS) + 2 * len(MIXING_KS))
        mixing = {c[0]: c[4] for c in checks[len(targets.TARGETS) :]}
        self.assertEqual(
            [status for name, status in mixing.items() if "training" in name],
            ["PASS", "MISS", "n/a"],
        )
        self.assertEqual(rows.find_row(config, "mix_k6").domains, ["d%d" % i for i in range(6)])
        self.assertIsNone(rows.find_row(config, "vanilla").domains)
        # Without the domain-mixing rows, no domain-mixing target.
        config["rows"] = [row for row in config["rows"] if not row["name"].startswith("mix")]
        self.assertEqual(len(targets.check_targets(results, config)), len(targets.TARGETS))

    def test_failed_measurement_is_not_checked(self):
        results = fixtures.results()
        results["train"]["vanilla"] = {"error": "boom"}
        checks = targets.check_targets(results)
        self.assertEqual([c[4] for c in checks[:2]], ["n/a", "n/a"])
        self.assertIsNone(checks[0][1])


if __name__ == "__main__":
    unittest.main()
