"""The domain classifier: trained on per-domain corpora, it labels text for LDR_pred."""

import os

import pytest
import tensorflow as tf
import yaml

from ldr_opennmt import domains
from ldr_opennmt.cli import main as cli
from tests import builds, corpus, helpers

SIZES = dict.fromkeys(builds.CLASSIFIER_CUES, 60)


@pytest.mark.slow
class DomainClassifierTest(helpers.SharedDirTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        data_dir = os.path.join(cls.dir, "data")
        os.makedirs(data_dir)
        cls.paths = corpus.write_corpus(data_dir, count=10)
        cls.test, _ = builds.write_classifier_data(data_dir, "test", 10, seed=1)
        # The classifier the serving tests use too, trained once per session (80 steps).
        cls.config, _ = builds.trained_classifier()
        cls.config_path = os.path.join(cls.dir, "classifier.yml")
        with open(cls.config_path, "w") as f:
            yaml.safe_dump(cls.config, f)

    def _predict(self, *extra, error=None):
        out = os.path.join(self.dir, "pred")
        features = [self.test[d][0] for d in SIZES]
        labels = [os.path.join(self.dir, "data", "test.%s.domain" % d) for d in SIZES]
        argv = ["--config", self.config_path, "predict_domains", "--output_dir", out]
        argv += ["--features_file", *features, "--labels_file", *labels, *extra]
        if error is None:
            self.assertEqual(cli.main(argv), 0)
        else:
            helpers.assert_cli_error(self, cli.main, argv, error)
        return out

    def test_learns_the_domains_and_writes_label_files(self):
        out = self._predict()
        # The synthetic domains differ by vocabulary: the classifier separates them.
        predicted = []
        for domain in SIZES:
            path = os.path.join(out, "test.%s.pred" % domain)
            with open(path) as f:
                lines = f.read().splitlines()
            self.assertLen(lines, 10)
            self.assertContainsSubset(set(lines), set(SIZES))
            predicted += lines
        with open(os.path.join(out, "classification.json")) as f:
            scores = yaml.safe_load(f)
        references = [d for d in SIZES for _ in range(10)]
        accuracy = sum(r == p for r, p in zip(references, predicted)) / len(references)
        self.assertAllClose(scores["accuracy"], accuracy)
        self.assertGreaterEqual(accuracy, 0.8)
        self.assertTrue(os.path.exists(os.path.join(out, "classification.md")))
        # The label files are what the translation models read.
        ids = domains.read_label_file(
            os.path.join(out, "test.medical.pred"), list(SIZES), expected_lines=10
        )
        self.assertLen(ids, 10)

    def test_posteriors_are_ens_soft_labels(self):
        from ldr_opennmt import ensembles
        from ldr_opennmt.evaluation import evaluate, open_domain

        classifier = evaluate.System("clf", [self.config_path])
        output = os.path.join(self.dir, "medical.soft")
        labels = open_domain.soft_labels(classifier, self.test["medical"][0], output, self.dir)
        self.assertLen(labels, 10)
        hits = 0
        for number, label in enumerate(labels, start=1):
            weights = ensembles.parse_label(label, list(SIZES), where="line %d" % number)
            self.assertEqual(weights[-1], 0.0)  # The known domains only: generic gets none.
            hits += weights.index(max(weights)) == 0
        self.assertGreaterEqual(hits, 8)
        # A translation model with other domains cannot take these posteriors.
        other = os.path.join(self.dir, "mt_other.yml")
        with open(other, "w") as f:
            yaml.safe_dump(
                {"model_dir": self.config["model_dir"], "data": {"domains": ["medical", "legal"]}},
                f,
            )
        with self.assertRaisesRegex(
            Exception, r"ens-soft: the classifier clf was trained on the domains \['medical', "
        ):
            open_domain.check_classifier(classifier, evaluate.System("MT", [other]))

    def test_domain_list_must_match_the_translation_model(self):
        other = os.path.join(self.dir, "mt.yml")
        with open(other, "w") as f:
            yaml.safe_dump({"data": {"domains": ["medical", "religious", "legal"]}}, f)
        self._predict(
            "--model_config",
            other,
            error=r"the classifier's domains \(medical, religious, software\) differ from those "
            r"of .*mt.yml \(medical, religious, legal\)",
        )

    def test_only_for_classifiers(self):
        config = dict(self.config, model_dir=os.path.join(self.dir, "mt"))
        config["data"] = dict(
            config["data"],
            source_vocabulary=self.paths["src_vocab"],
            target_vocabulary=self.paths["tgt_vocab"],
        )
        path = os.path.join(self.dir, "mt_run.yml")
        with open(path, "w") as f:
            yaml.safe_dump(config, f)
        helpers.assert_cli_error(
            self,
            cli.main,
            ["--config", path, "--model", "model_defs/small/ldr_transformer.py"]
            + ["predict_domains", "--features_file", "x", "--output_dir", self.dir],
            "needs a domain classifier",
        )


if __name__ == "__main__":
    tf.test.main()
