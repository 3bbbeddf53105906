import numpy as np
import tensorflow as tf
from parameterized import parameterized

from ldr_opennmt.errors import UserError
from ldr_opennmt.models import procedure
from tests import by_capability, helpers


def _procedure1(caps):
    """A family Procedure 1 trains: it has domain-specific parameters to route."""
    return procedure.PROCEDURE1 in caps.domain_training and caps.domain_parameters


def _procedure1_without_domain_parameters(caps):
    """A family that accepts Procedure 1 (Mixed models) but has nothing to route."""
    return procedure.PROCEDURE1 in caps.domain_training and not caps.domain_parameters


def _split(model):
    specific = {v.ref() for v in model.domain_variables()}
    shared = [v for v in model.trainable_weights if v.ref() not in specific]
    return shared, [v for v in model.trainable_weights if v.ref() in specific]


def _reference_gradients(model, features, labels, variables):
    with tf.GradientTape() as tape:
        outputs, _ = model(features, labels, training=True)
        loss = model.compute_loss(outputs, labels, training=True)[0]
    return tape.gradient(loss, variables)


def _with_domain(features, domain_id):
    return dict(features, domain=tf.fill(tf.shape(features["domain"]), domain_id))


class ProcedureTest(tf.test.TestCase):
    @parameterized.expand(by_capability.families(_procedure1))
    def test_procedure1_routes_gradients(self, family):
        model, paths = helpers.build_model(self, family)
        features, labels = helpers.training_batch(model, paths, size=8)
        optimizer = tf.keras.optimizers.legacy.Adam()
        loss, gradients, sample_size = procedure.compute_gradients(
            model, features, labels, optimizer, procedure.PROCEDURE1, normalize_loss=False
        )
        by_ref = dict(zip((v.ref() for v in model.trainable_weights), gradients))
        shared, specific = _split(model)
        # Shared parameters: gradients of the pass with every label set to generic.
        expected = _reference_gradients(model, _with_domain(features, -1), labels, shared)
        for variable, grad in zip(shared, expected):
            self.assertAllClose(
                tf.convert_to_tensor(by_ref[variable.ref()]), tf.convert_to_tensor(grad), atol=1e-5
            )
        # Domain parameters: gradients of the pass with the true labels.
        expected = _reference_gradients(model, features, labels, specific)
        for variable, grad in zip(specific, expected):
            self.assertAllClose(
                tf.convert_to_tensor(by_ref[variable.ref()]), tf.convert_to_tensor(grad), atol=1e-5
            )
        # The reported loss is the loss with the true labels.
        outputs, _ = model(features, labels, training=True)
        true_loss, true_size, _ = model.compute_loss(outputs, labels, training=True)
        self.assertAllClose(loss, true_loss, atol=1e-4)
        self.assertAllClose(sample_size, true_size)

    def test_procedure1_shared_gradients_ignore_labels(self):
        model, paths = helpers.build_model(self, "ldr_transformer")
        features, labels = helpers.training_batch(model, paths, size=8)
        optimizer = tf.keras.optimizers.legacy.Adam()
        shared, specific = _split(model)
        index = [
            i for i, v in enumerate(model.trainable_weights) if v.ref() in {s.ref() for s in shared}
        ]
        _, a = procedure.compute_gradients(
            model, _with_domain(features, 0), labels, optimizer, procedure.PROCEDURE1
        )
        _, b = procedure.compute_gradients(
            model, _with_domain(features, 2), labels, optimizer, procedure.PROCEDURE1
        )
        for i in index:
            self.assertAllClose(tf.convert_to_tensor(a[i]), tf.convert_to_tensor(b[i]), atol=1e-6)
        # Only domain 0's parameters receive a gradient when every sentence is domain 0.
        regions = model.domain_weights()
        by_ref = dict(zip((v.ref() for v in model.trainable_weights), a))
        self.assertTrue(
            any(np.any(tf.convert_to_tensor(by_ref[v.ref()]).numpy() != 0) for v in regions[0])
        )
        for k in (1, 2):
            for variable in regions[k]:
                self.assertAllEqual(
                    tf.convert_to_tensor(by_ref[variable.ref()]), tf.zeros_like(variable)
                )

    def test_joint_updates_everything_with_true_labels(self):
        model, paths = helpers.build_model(self, "ldr_transformer")
        features, labels = helpers.training_batch(model, paths, size=8)
        optimizer = tf.keras.optimizers.legacy.Adam()
        _, gradients, _ = procedure.compute_gradients(
            model, features, labels, optimizer, procedure.JOINT, normalize_loss=False
        )
        expected = _reference_gradients(model, features, labels, model.trainable_weights)
        for grad, ref in zip(gradients, expected):
            self.assertAllClose(tf.convert_to_tensor(grad), tf.convert_to_tensor(ref), atol=1e-5)

    @parameterized.expand(by_capability.families(_procedure1_without_domain_parameters))
    def test_procedure1_and_summed_need_domain_parameters(self, family):
        model, paths = helpers.build_model(self, family)
        features, labels = helpers.training_batch(model, paths)
        for mode in (procedure.PROCEDURE1, procedure.SUMMED):
            with self.assertRaisesRegex(ValueError, "needs domain-specific parameters"):
                procedure.compute_gradients(
                    model, features, labels, tf.keras.optimizers.legacy.Adam(), mode
                )

    def _summed_reference(self, model, features, labels, domain_weight, generic_weights):
        """Gradients and true-label loss of ``w_d L_domain + sum_i w_i L_generic,i``."""
        generic = _with_domain(features, -1)
        weights = tf.gather(tf.constant(generic_weights), features["domain"] + 1)
        with tf.GradientTape() as tape:
            outputs, _ = model(features, labels, training=True)
            true_loss, true_size, _ = model.compute_loss(outputs, labels, training=True)
            outputs, _ = model(generic, labels, training=True)
            generic_loss = model.compute_loss(outputs, dict(labels, weight=weights), training=True)
            total = domain_weight * true_loss + generic_loss[0]
        return tape.gradient(total, model.trainable_weights), true_loss, true_size

    @parameterized.expand(by_capability.families(_procedure1))
    def test_summed_updates_everything_with_both_losses(self, family):
        # The LDR authors' generic+domain_training: 0.5 L_domain + 0.5 L_generic, every
        # variable (shared and domain-specific) gets the gradient of the sum.
        model, paths = helpers.build_model(self, family, params={"domain_training": "summed"})
        features, labels = helpers.training_batch(model, paths, size=8)
        loss, gradients, sample_size = procedure.compute_gradients(
            model,
            features,
            labels,
            tf.keras.optimizers.legacy.Adam(),
            procedure.SUMMED,
            normalize_loss=False,
        )
        expected, true_loss, true_size = self._summed_reference(
            model, features, labels, 0.5, [0.5] * (len(model.domains) + 1)
        )
        for grad, ref in zip(gradients, expected):
            self.assertAllClose(tf.convert_to_tensor(grad), tf.convert_to_tensor(ref), atol=1e-5)
        self.assertAllClose(loss, true_loss, atol=1e-4)  # Reported: the true-label loss.
        self.assertAllClose(sample_size, true_size)

    def test_summed_weighted_by_corpus_share(self):
        # domain_weighted_loss: L_domain + p(d) L_generic, p(d) each sentence's domain share
        # of the training files (read from the label file the batch came from).
        model, paths = helpers.build_model(
            self, params={"domain_training": "summed", "summed_generic_weight": "corpus_share"}
        )
        features, labels = helpers.training_batch(model, paths, size=8)
        labels_read = [line.strip() for line in open(paths["train_domain"], encoding="utf-8")]
        shares = [0.0] + [labels_read.count(d) / len(labels_read) for d in model.domains]
        self.assertAllClose(model.examples_inputter.domain_shares(), shares)
        self.assertNotIn(0.0, shares[1:])  # Every domain has a weight of its own.
        _, gradients = procedure.compute_gradients(
            model,
            features,
            labels,
            tf.keras.optimizers.legacy.Adam(),
            procedure.SUMMED,
            normalize_loss=False,
        )[:2]
        expected, _, _ = self._summed_reference(model, features, labels, 1.0, shares)
        for grad, ref in zip(gradients, expected):
            self.assertAllClose(tf.convert_to_tensor(grad), tf.convert_to_tensor(ref), atol=1e-5)

    def test_summed_weight_mapping_and_refusals(self):
        domains = ["a", "b"]
        self.assertEqual(procedure.summed_weights({}, domains), (0.5, [0.5, 0.5, 0.5]))
        self.assertEqual(
            procedure.summed_weights({"summed_generic_weight": 0.2}, domains)[1], [0.2] * 3
        )
        self.assertEqual(
            procedure.summed_weights({"summed_generic_weight": {"a": 0.3, "b": 0.7}}, domains),
            (1.0, [0.0, 0.3, 0.7]),
        )
        for value, message in (
            (1.5, "must be a number in \\[0, 1\\]"),
            ("half", "got 'half'"),
            ({"a": 0.3}, "no weight for 'b'"),
            ({"a": 0.3, "b": 0.1, "c": 0.2}, "unknown domain 'c'"),
        ):
            with self.assertRaisesRegex(UserError, message):
                procedure.summed_weights({"summed_generic_weight": value}, domains)
        # Checked when the model is initialized, before anything is trained.
        with self.assertRaisesRegex(UserError, "summed_generic_weight"):
            helpers.build_model(
                self, params={"domain_training": "summed", "summed_generic_weight": -1}
            )

    def test_corpus_share_without_training_files_is_one_line(self):
        model, _ = helpers.build_model(
            self, params={"domain_training": "summed", "summed_generic_weight": "corpus_share"}
        )
        with self.assertRaisesRegex(UserError, "corpus_share reads the domain shares"):
            model.examples_inputter.domain_shares()

    def test_invalid_mode(self):
        with self.assertRaisesRegex(ValueError, "domain_training must be one of"):
            helpers.build_model(self, "ldr_transformer", params={"domain_training": "both"})


if __name__ == "__main__":
    tf.test.main()
