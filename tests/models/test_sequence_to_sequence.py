import numpy as np
import tensorflow as tf
from parameterized import parameterized

from ldr_opennmt.errors import UserError
from tests import by_capability, helpers

SENTENCES = ["the big cell", "a host is here now", "spirit", "red cell a host"]
LABELS = ["religious", "medical", "generic", "software"]


class MultiDomainModelTest(tf.test.TestCase):
    @parameterized.expand(by_capability.families())
    def test_beam_search_batch_equals_alone(self, family):
        model, _ = helpers.build_model(self, family, params={"beam_width": 3})
        batch = model.infer(helpers.source_features(model, SENTENCES, LABELS))
        for i, (sentence, label) in enumerate(zip(SENTENCES, LABELS)):
            alone = model.infer(helpers.source_features(model, [sentence], [label]))
            length = alone["length"][0, 0]
            self.assertEqual(batch["length"][i, 0], length)
            self.assertAllEqual(batch["tokens"][i, 0, :length], alone["tokens"][0, 0, :length])
            self.assertAllClose(batch["log_probs"][i], alone["log_probs"][0], atol=1e-4)

    @parameterized.expand(by_capability.families(by_capability.labels_needed))
    def test_domain_changes_the_output(self, family):
        model, _ = helpers.build_model(self, family, params={"beam_width": 2})
        scores = [
            model.infer(helpers.source_features(model, ["the big cell"], [label]))["log_probs"]
            for label in ("medical", "religious", "generic")
        ]
        self.assertNotAllClose(scores[0], scores[1])
        self.assertNotAllClose(scores[0], scores[2])

    @parameterized.expand(by_capability.families(by_capability.labels_not_read))
    def test_the_domain_is_ignored(self, family):
        model, _ = helpers.build_model(self, family)
        scores = [
            model.infer(helpers.source_features(model, ["the big cell"], [label]))["log_probs"]
            for label in ("medical", "software")
        ]
        self.assertAllClose(scores[0], scores[1])

    def test_unknown_domain_in_features_fails(self):
        model, _ = helpers.build_model(self, "ldr_transformer")
        with self.assertRaisesRegex(tf.errors.InvalidArgumentError, "Unknown domain label 'legal'"):
            helpers.source_features(model, ["the cell"], ["legal"])

    def test_invalid_domain_training_is_a_user_error(self):
        # One line from ldr-main and onmt-main, not a traceback.
        with self.assertRaisesRegex(
            UserError, r"^params: domain_training must be one of .*, got 'both'$"
        ):
            helpers.build_model(self, "ldr_transformer", params={"domain_training": "both"})

    def test_domain_weights_listed(self):
        model, _ = helpers.build_model(self, "ldr_transformer_target")
        regions = model.domain_weights()
        self.assertEqual(sorted(regions), [0, 1, 2])
        # Source and target embedders: a region table and a fusion block each.
        self.assertLen(regions[0], 4)
        self.assertEqual(model.domains, ["medical", "religious", "software"])

    def test_evaluation_loss_depends_on_domain(self):
        model, paths = helpers.build_model(self, "ldr_transformer")
        features, labels = helpers.training_batch(model, paths)
        loss = model.evaluate(features, labels)[0]
        generic = dict(features, domain=tf.fill(tf.shape(features["domain"]), -1))
        generic_loss = model.evaluate(generic, labels)[0]
        self.assertTrue(np.isfinite(loss[0]))
        self.assertNotAllClose(loss[0], generic_loss[0])


if __name__ == "__main__":
    tf.test.main()
