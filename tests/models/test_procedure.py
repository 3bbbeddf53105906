import numpy as np
import tensorflow as tf
from parameterized import parameterized

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
    def test_procedure1_needs_domain_parameters(self, family):
        model, paths = helpers.build_model(self, family)
        features, labels = helpers.training_batch(model, paths)
        with self.assertRaisesRegex(ValueError, "needs domain-specific parameters"):
            procedure.compute_gradients(
                model, features, labels, tf.keras.optimizers.legacy.Adam(), procedure.PROCEDURE1
            )

    def test_invalid_mode(self):
        with self.assertRaisesRegex(ValueError, "domain_training must be one of"):
            helpers.build_model(self, "ldr_transformer", params={"domain_training": "both"})


if __name__ == "__main__":
    tf.test.main()
