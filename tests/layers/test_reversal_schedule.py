"""AdvL's gradient reversal weight: Ganin and Lempitsky's ramp, in the layer and the model."""

import numpy as np
import tensorflow as tf
from parameterized import parameterized

from ldr_opennmt.errors import UserError
from ldr_opennmt.layers import adversarial
from ldr_opennmt.models import multitask
from tests.models.test_multitask import (
    LABELS,
    _classifier_gradients,
    _dense,
    _features,
    _groups,
    _labels,
    _model,
)


def _ganin_lempitsky(progress):
    """The schedule as the paper writes it: ``2 / (1 + exp(-10 p)) - 1``."""
    return 2.0 / (1.0 + np.exp(-10.0 * progress)) - 1.0


def _input_gradient(layer, x, upstream, step):
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = layer(x, step=step)
        loss = tf.reduce_sum(y * upstream)
    return y, tape.gradient(loss, x)


class RampTest(tf.test.TestCase):
    def test_ramp_is_the_papers_schedule(self):
        progress = np.linspace(0.0, 1.0, 101)
        values = adversarial.ramp(tf.constant(progress, tf.float32)).numpy()
        self.assertAllClose(values, _ganin_lempitsky(progress), atol=1e-6)
        self.assertEqual(values[0], 0.0)
        self.assertGreater(values[-1], 0.9999)
        self.assertLess(values[-1], 1.0)
        self.assertTrue(np.all(np.diff(values) > 0))

    @parameterized.expand([(1.0,), (0.5,), (2.0,)])
    def test_weight_rises_from_zero_to_the_scale(self, scale):
        ramp_steps = 1000
        steps = list(range(0, 3001, 50))
        weights = [float(adversarial.reversal_weight(s, ramp_steps, scale)) for s in steps]
        self.assertEqual(weights[0], 0.0)
        self.assertTrue(all(b > a for a, b in zip(weights, weights[1:]) if b < scale * 0.9999))
        self.assertTrue(all(b >= a for a, b in zip(weights, weights[1:])))
        self.assertAllClose(
            weights, scale * _ganin_lempitsky(np.minimum(np.array(steps) / ramp_steps, 1.0))
        )
        # Half way: 0.987 of the scale; at and after the last step of the ramp: ~ the scale.
        self.assertAllClose(
            adversarial.reversal_weight(500, ramp_steps, scale), 0.98661 * scale, atol=1e-5
        )
        for step in (1000, 3000, 10**7):
            weight = adversarial.reversal_weight(step, ramp_steps, scale)
            self.assertAllClose(weight, scale * _ganin_lempitsky(1.0))
            self.assertAllClose(weight, scale, rtol=1e-4)
        # A tensor step (the optimizer's iterations) gives the same weight.
        self.assertAllClose(
            adversarial.reversal_weight(tf.constant(250, tf.int64), ramp_steps, scale),
            scale * _ganin_lempitsky(0.25),
        )

    def test_constant_weight_without_a_ramp_or_a_step(self):
        self.assertEqual(adversarial.reversal_weight(0, 0, 0.5), 0.5)
        self.assertEqual(adversarial.reversal_weight(10**6, 0, 0.5), 0.5)
        self.assertEqual(adversarial.reversal_weight(None, 100, 0.5), 0.5)

    def test_invalid_ramp_steps(self):
        for value in (-1, 1.5, "10", True, None):
            with self.assertRaises(UserError) as context:
                adversarial.GradientReversal(1.0, ramp_steps=value)
            message = str(context.exception)
            self.assertRegex(message, r"^the gradient reversal ramp steps must be an integer >= 0")
            self.assertNotIn("\n", message)


class RampedReversalTest(tf.test.TestCase):
    def test_gradient_is_reversed_with_the_weight_of_the_step(self):
        layer = adversarial.GradientReversal(0.5, ramp_steps=100)
        self.assertEqual(layer.get_config()["ramp_steps"], 100)
        x = tf.constant(np.random.RandomState(0).normal(size=[3, 4]), tf.float32)
        upstream = tf.constant(np.random.RandomState(1).normal(size=[3, 4]), tf.float32)
        for step in (0, 1, 10, 50, 100, 400):
            y, gradient = _input_gradient(layer, x, upstream, step)
            self.assertAllEqual(y, x)
            weight = 0.5 * _ganin_lempitsky(min(step / 100, 1.0))
            self.assertAllClose(gradient, -weight * upstream.numpy(), atol=1e-7)
        _, gradient = _input_gradient(layer, x, upstream, 0)
        self.assertFalse(np.any(gradient.numpy()))

    def test_one_trace_follows_the_step_variable(self):
        # The trainer traces its step once and passes the optimizer's iterations, a
        # variable: the weight is read from it at every step, not frozen at tracing.
        layer = adversarial.GradientReversal(1.0, ramp_steps=10)
        step = tf.Variable(0, dtype=tf.int64)
        x = tf.constant([[1.0, -2.0]])

        @tf.function
        def _grad(v):
            with tf.GradientTape() as tape:
                tape.watch(v)
                y = tf.reduce_sum(layer(v, step=step))
            return tape.gradient(y, v)

        for value in (0, 3, 7, 10, 20):
            step.assign(value)
            expected = -_ganin_lempitsky(min(value / 10, 1.0)) * np.ones([1, 2])
            self.assertAllClose(_grad(x), expected, atol=1e-6)
        self.assertEqual(_grad.experimental_get_tracing_count(), 1)

    def test_half_precision_gradient(self):
        # The weight is float32; the gradient keeps the dtype of its input.
        weight = adversarial.reversal_weight(tf.constant(5, tf.int64), 10)
        x = tf.constant([[1.0, 2.0]], tf.float16)
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = tf.reduce_sum(adversarial.gradient_reversal(x, weight))
        gradient = tape.gradient(y, x)
        self.assertEqual(gradient.dtype, tf.float16)
        self.assertAllClose(gradient, [[-_ganin_lempitsky(0.5)] * 2], atol=1e-3)

    def test_classifier_head_reverses_with_the_ramped_weight(self):
        plain = adversarial.DomainClassifierHead(8, num_domains=3)
        ramped = adversarial.DomainClassifierHead(
            8, num_domains=3, reversal_scale=1.0, reversal_ramp_steps=20
        )
        inputs = tf.constant(np.random.RandomState(0).normal(size=[2, 4, 6]), tf.float32)
        length = tf.constant([4, 2])
        plain(inputs, length)
        ramped(inputs, length)
        for a, b in zip(plain.weights, ramped.weights, strict=True):
            b.assign(a)
        domain = tf.constant([0, 2])

        def _gradients(head, step):
            with tf.GradientTape() as tape:
                tape.watch(inputs)
                logits = head(inputs, length, step=step)
                total, count = adversarial.classification_loss(logits, domain)
                loss = total / count
            return tape.gradient(loss, [inputs] + head.trainable_weights)

        plain_input, *plain_head = _gradients(plain, None)
        for step in (0, 5, 20):
            ramped_input, *ramped_head = _gradients(ramped, step)
            weight = _ganin_lempitsky(min(step / 20, 1.0))
            self.assertAllClose(ramped_input, -weight * plain_input.numpy(), atol=1e-6)
            # The head itself always gets the plain gradient.
            for a, b in zip(plain_head, ramped_head, strict=True):
                self.assertAllClose(a, b, atol=1e-6)


class AdvLScheduleTest(tf.test.TestCase):
    def test_default_and_configured_ramp(self):
        advl, _ = _model(self, adversarial=True)
        self.assertEqual(advl.reversal_ramp_steps, multitask.DEFAULT_RAMP_STEPS)
        self.assertEqual(advl.domain_classifier.reversal.ramp_steps, 10000)
        self.assertEqual(float(advl.reversal_weight(0)), 0.0)
        self.assertAllClose(advl.reversal_weight(5000), _ganin_lempitsky(0.5))
        self.assertEqual(advl.reversal_weight(None), 1.0)
        advl, _ = _model(self, adversarial=True, params={multitask.RAMP_PARAM: 40})
        self.assertEqual(advl.domain_classifier.reversal.ramp_steps, 40)
        self.assertAllClose(advl.reversal_weight(10), _ganin_lempitsky(0.25))
        # The constant weight of the ablation: the params key, or the model's argument.
        advl, _ = _model(self, adversarial=True, params={multitask.RAMP_PARAM: 0})
        self.assertEqual(advl.reversal_weight(0), 1.0)
        advl, _ = _model(self, adversarial=True, reversal_scale=0.5, reversal_ramp_steps=0)
        self.assertEqual(advl.reversal_weight(0), 0.5)
        ml, _ = _model(self, adversarial=False)
        self.assertIsNone(ml.reversal_weight(0))

    def test_invalid_ramp_steps_are_refused_in_one_line(self):
        with self.assertRaises(UserError) as context:
            _model(self, adversarial=True, params={multitask.RAMP_PARAM: -1})
        self.assertRegex(str(context.exception), r"^params: gradient_reversal_steps must be >= 0")
        with self.assertRaises(UserError) as context:
            multitask.advl_transformer(reversal_ramp_steps=2.5)
        self.assertRegex(
            str(context.exception), r"^reversal_ramp_steps must be an integer >= 0, got 2.5$"
        )

    def test_training_gradient_follows_the_optimizer_step(self):
        """Through compute_gradients (the trainer's hook, step = the optimizer's
        iterations): the encoder gets ``-lambda_p`` times ML's classifier gradient."""
        ml, _ = _model(self, adversarial=False)
        features = _features(ml, labels=LABELS)
        labels = _labels(ml)
        _, cls_grads = _classifier_gradients(ml, features, labels)
        groups = _groups(ml)
        ramp_steps = 100
        for step in (0, 30, 100):
            optimizer = tf.keras.optimizers.legacy.SGD(1.0)
            optimizer.iterations.assign(step)
            gradients = {}
            for weight in (0.0, 2.0):
                model, _ = _model(
                    self,
                    adversarial=True,
                    params={multitask.WEIGHT_PARAM: weight, multitask.RAMP_PARAM: ramp_steps},
                    weights_from=ml,
                )
                _, grads = model.compute_gradients(features, labels, optimizer)
                gradients[weight] = _dense(grads)
            reversal = _ganin_lempitsky(step / ramp_steps)
            for i in groups["source"]:
                difference = gradients[2.0][i] - gradients[0.0][i]
                self.assertAllClose(difference, -reversal * 2.0 * cls_grads[i], atol=1e-5)
                if step == 0:
                    self.assertFalse(np.any(difference))
            for i in groups["head"]:
                self.assertAllClose(gradients[2.0][i], 2.0 * cls_grads[i], atol=1e-5)


if __name__ == "__main__":
    tf.test.main()
