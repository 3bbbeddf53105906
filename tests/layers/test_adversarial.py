"""Gradient reversal, masked mean pooling, the domain classifier head and its loss."""

import numpy as np
import tensorflow as tf
from parameterized import parameterized

from ldr_opennmt.errors import UserError
from ldr_opennmt.layers import adversarial


def _gradient(fn, x, upstream):
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = fn(x)
        loss = tf.reduce_sum(y * upstream)
    return y, tape.gradient(loss, x)


class GradientReversalTest(tf.test.TestCase):
    @parameterized.expand([(1.0,), (0.5,), (2.0,), (0.0,)])
    def test_identity_forward_reversed_gradient(self, scale):
        x = tf.constant(np.random.RandomState(0).normal(size=[3, 4]), tf.float32)
        upstream = tf.constant(np.random.RandomState(1).normal(size=[3, 4]), tf.float32)
        functions = (lambda v: adversarial.gradient_reversal(v, scale),)
        for fn in functions + (adversarial.GradientReversal(scale),):
            y, gradient = _gradient(fn, x, upstream)
            self.assertAllEqual(y, x)
            self.assertAllClose(gradient, -scale * upstream.numpy())
        # Without reversal the gradient is the upstream one: the sign is the layer's.
        _, plain = _gradient(tf.identity, x, upstream)
        self.assertAllClose(plain, upstream)

    def test_reversal_inside_a_function_and_through_other_ops(self):
        layer = adversarial.GradientReversal(3.0)
        x = tf.constant([[1.0, -2.0]])

        @tf.function
        def _grad(v):
            with tf.GradientTape() as tape:
                tape.watch(v)
                y = tf.reduce_sum(tf.square(layer(v)))
            return tape.gradient(y, v)

        self.assertAllClose(_grad(x), -3.0 * 2.0 * x.numpy())

    def test_invalid_scale(self):
        for scale in (-1.0, -1e-6, float("nan"), float("inf"), "1", True):
            with self.assertRaises(UserError) as context:
                adversarial.GradientReversal(scale)
            self.assertRegex(str(context.exception), r"^the gradient reversal scale \(lambda\)")
            self.assertNotIn("\n", str(context.exception))


class PoolingAndLossTest(tf.test.TestCase):
    def test_masked_mean_ignores_padding(self):
        inputs = tf.constant(
            [[[1.0, 2.0], [3.0, 4.0], [100.0, 100.0]], [[5.0, 6.0], [-7.0, 7.0], [9.0, 9.0]]]
        )
        pooled = adversarial.masked_mean(inputs, tf.constant([2, 1]))
        self.assertAllClose(pooled, [[2.0, 3.0], [5.0, 6.0]])
        pooled = adversarial.masked_mean(inputs, tf.constant([0, 3]))
        self.assertAllClose(pooled, [[0.0, 0.0], [7 / 3, 22 / 3]])

    def test_loss_leaves_generic_sentences_out(self):
        logits = tf.constant([[2.0, 0.0, -1.0], [0.0, 5.0, 0.0], [1.0, 1.0, 1.0]])
        total, count = adversarial.classification_loss(logits, tf.constant([0, -1, 2]))
        log_softmax = tf.nn.log_softmax(logits).numpy()
        self.assertAllClose(total, -(log_softmax[0, 0] + log_softmax[2, 2]))
        self.assertEqual(count, 2.0)
        total, count = adversarial.classification_loss(logits, tf.constant([-1, -1, -1]))
        self.assertEqual(total, 0.0)
        self.assertEqual(count, 0.0)


class DomainClassifierHeadTest(tf.test.TestCase):
    def _heads(self, scale):
        plain = adversarial.DomainClassifierHead(8, num_domains=3)
        reversed_ = adversarial.DomainClassifierHead(8, num_domains=3, reversal_scale=scale)
        inputs = tf.constant(np.random.RandomState(0).normal(size=[2, 4, 6]), tf.float32)
        length = tf.constant([4, 2])
        plain(inputs, length)
        reversed_(inputs, length)
        for a, b in zip(plain.weights, reversed_.weights):
            b.assign(a)
        return plain, reversed_, inputs, length

    def _gradients(self, head, inputs, length, domain):
        with tf.GradientTape() as tape:
            tape.watch(inputs)
            logits = head(inputs, length)
            total, count = adversarial.classification_loss(logits, domain)
            loss = total / count
        return logits, tape.gradient(loss, [inputs] + head.trainable_weights)

    @parameterized.expand([(1.0,), (0.5,)])
    def test_reversal_flips_only_the_input_gradient(self, scale):
        plain, reversed_, inputs, length = self._heads(scale)
        self.assertFalse(plain.adversarial)
        self.assertTrue(reversed_.adversarial)
        self.assertEqual([w.shape for w in plain.weights], [[6, 8], [8], [8, 3], [3]])
        domain = tf.constant([0, 2])
        logits, (input_grad, *head_grads) = self._gradients(plain, inputs, length, domain)
        rev_logits, (rev_input_grad, *rev_head_grads) = self._gradients(
            reversed_, inputs, length, domain
        )
        self.assertAllEqual(logits, rev_logits)
        self.assertEqual(logits.shape, [2, 3])
        self.assertGreater(np.abs(input_grad.numpy()).sum(), 0)
        self.assertAllClose(rev_input_grad, -scale * input_grad.numpy())
        for a, b in zip(head_grads, rev_head_grads):
            self.assertAllClose(a, b)
        # Padding gets no gradient: the mean is over the real positions.
        self.assertAllEqual(input_grad[1, 2:], tf.zeros([2, 6]))

    def test_regions_and_build(self):
        head = adversarial.DomainClassifierHead(4)
        with self.assertRaisesRegex(ValueError, "set the number of domains before build"):
            head(tf.zeros([1, 2, 3]), tf.constant([2]))
        head.set_num_domains(5)
        self.assertEqual(head.num_regions, 5)
        self.assertEqual(head.domain_weights(), {})
        self.assertEqual(head(tf.zeros([1, 2, 3]), tf.constant([2])).shape, [1, 5])
        with self.assertRaisesRegex(UserError, "at least one domain"):
            adversarial.DomainClassifierHead(4, num_domains=0)


if __name__ == "__main__":
    tf.test.main()
