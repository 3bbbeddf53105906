"""``ldr-experiments serve-quality``'s measurements on the tiny export with a guard and a
confidence (:func:`tests.builds.tiny_ldr_ct2_quality`): each figure recomputed another way."""

import json
import os

import numpy as np
import tensorflow as tf
import yaml
from sklearn.metrics import roc_auc_score

from ldr_experiments import serve_quality
from ldr_opennmt.evaluation import scoring
from ldr_opennmt.export import quality
from tests import builds

KNOWN, UNSEEN = ["medical", "religious"], "software"


class ServeQualityTest(tf.test.TestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.export, cls.corpus = builds.tiny_ldr_ct2_quality()
        with open(os.path.join(cls.corpus, "corpus.json")) as f:
            cls.info = json.load(f)
        cls.measured = serve_quality.Measured(cls.export, cls.corpus, cls.info, 15)

    def test_the_known_domains_configuration_is_the_demos_without_the_unseen_domain(self):
        info = dict(self.info, domains=KNOWN + [UNSEEN])
        path = os.path.join(self.get_temp_dir(), "data_known.yml")
        _, known = serve_quality.known_data_config("corpus", info, UNSEEN, path)
        self.assertEqual(known, KNOWN)
        with open(path) as f:
            config = yaml.safe_load(f)
        self.assertEqual(config["data"]["domains"], KNOWN)
        self.assertEqual(sorted(config["data"]["train_corpora"]), KNOWN)
        self.assertEqual(sorted(config["data"]["eval_corpora"]), KNOWN)
        self.assertEqual(config["data"]["train_corpora"]["medical"][0], "corpus/train.medical.en")
        # The demo's training section: no gradient accumulation (auto_config's 25,000 tokens
        # would make every step 25 batches).
        self.assertIn("effective_batch_size", config["train"])
        self.assertIsNone(config["train"]["effective_batch_size"])

    def test_the_cost_of_a_wrong_label(self):
        costs = serve_quality.label_costs(self.measured, KNOWN)
        self.assertEqual(sorted(costs), KNOWN)
        references = self.measured.test["medical"][1]
        translate = self.measured.translate
        self.assertEqual(
            costs["medical"],
            {
                "true": scoring.score(translate("medical", "medical")[0], references)["bleu"],
                "generic": scoring.score(translate("medical", "generic")[0], references)["bleu"],
                "wrong": scoring.score(translate("medical", "religious")[0], references)["bleu"],
            },
        )

    def test_the_confidence_figures(self):
        figures = serve_quality.confidence_figures(self.measured, KNOWN)
        medical = figures["medical"]
        self.assertEqual(medical["sentences"], 15)
        self.assertEqual(sum(count for _, _, count in medical["reliability"]), 15)
        hypotheses, lengths, outputs = self.measured.translate("medical", "medical")
        chrf = np.asarray(quality.sentence_chrf(hypotheses, self.measured.test["medical"][1]))
        median = self.measured.summary["confidence"]["medical"]["dev_median_chrf"]["medical"]
        scored = self.measured.confidence.score("medical", lengths, outputs)
        sure = np.asarray([p for p, _ in scored])
        good = chrf >= median
        if 0 < good.sum() < len(good):
            self.assertAlmostEqual(medical["auroc"], roc_auc_score(good, sure))
        else:
            self.assertIsNone(medical["auroc"])
        self.assertAlmostEqual(medical["flagged"], np.mean([low for _, low in scored]))
        self.assertAlmostEqual(medical["good"], good.mean())

    def test_the_guard_figures_and_the_mixed_test_set(self):
        figures = serve_quality.guard_figures(self.measured, KNOWN, UNSEEN)
        picks = [c[0] for c in self.measured.guard.choose(self.measured.test["religious"][0])]
        self.assertEqual(
            figures["per_domain"]["religious"]["accuracy"], picks.count("religious") / 15
        )
        self.assertIsNone(figures["per_domain"][UNSEEN]["accuracy"])
        # 30 known lines and 10% unseen ones: 30 * 0.1 / 0.9 = 3.3, so 3.
        self.assertEqual((figures["mixed_lines"], figures["unseen_lines"]), (33, 3))
        self.assertEqual(
            set(figures["routed_vs_generic"]),
            {"difference", "interval", "p_value", "words", "interval90"},
        )
        self.assertAlmostEqual(
            figures["routed_vs_generic"]["difference"],
            figures["bleu"]["routed"] - figures["bleu"]["generic"],
            places=6,
        )

    def test_holm_over_the_families(self):
        verdict = {"difference": 1.0, "interval": [0.5, 1.5], "words": "beats", "interval90": None}
        results = {
            "A": {"guard": {"routed_vs_generic": dict(verdict, p_value=0.03)}},
            "B": {"guard": {"routed_vs_generic": dict(verdict, p_value=0.01)}},
        }
        serve_quality.adjust_verdicts(results)
        self.assertEqual(
            [
                (
                    r["guard"]["routed_vs_generic"]["p_value"],
                    r["guard"]["routed_vs_generic"]["words"],
                )
                for r in results.values()
            ],
            [(0.03, "beats"), (0.02, "beats")],
        )
        results["A"]["guard"]["routed_vs_generic"]["p_value"] = 0.04
        results["B"]["guard"]["routed_vs_generic"]["p_value"] = 0.04
        serve_quality.adjust_verdicts(results)
        self.assertEqual(results["A"]["guard"]["routed_vs_generic"]["words"], "no difference found")

    def test_the_report_and_the_plot(self):
        results = {
            "LDR": {
                "labels": serve_quality.label_costs(self.measured, KNOWN),
                "confidence": serve_quality.confidence_figures(self.measured, KNOWN),
                "guard": serve_quality.guard_figures(self.measured, KNOWN, UNSEEN),
            }
        }
        budget = dict(serve_quality.BUDGETS["quick"], sentences=15)
        text = "\n".join(serve_quality.report(results, KNOWN, UNSEEN, "quick", budget))
        for heading in ("## The cost of a wrong label", "## The confidence", "## The guard"):
            self.assertIn(heading, text)
        self.assertIn("| LDR, medical |", text)
        self.assertIn("| LDR, software (unseen) |", text)
        path = os.path.join(self.get_temp_dir(), "reliability.png")
        serve_quality.plot_reliability(results, path)
        with open(path, "rb") as f:
            self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")
