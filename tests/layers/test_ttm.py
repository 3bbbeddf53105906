"""The first decoding step of Target Token Mixing: labelled rows emit their token."""

import numpy as np
import tensorflow as tf

from ldr_opennmt.layers import ttm
from ldr_opennmt.layers.context import domain_scope

LOGITS = np.log(np.array([[0.1, 0.2, 0.3, 0.4]] * 3, np.float32))
DOMAIN = [1, -1, 0]  # domain 0 forces id 3, domain 1 id 2; -1 is generic
TOKEN_IDS = (3, 2)


class ForceFirstTokenTest(tf.test.TestCase):
    def test_step_zero_keeps_only_the_domain_token(self):
        logits = ttm.force_first_token(LOGITS, tf.constant(0), DOMAIN, TOKEN_IDS).numpy()
        self.assertAllEqual(np.isinf(logits[0]), [True, True, False, True])
        self.assertEqual(logits[0, 2], LOGITS[0, 2])
        self.assertAllEqual(logits[1], LOGITS[1])  # generic: the model decides
        self.assertAllEqual(np.isinf(logits[2]), [True, True, True, False])
        log_probs = tf.nn.log_softmax(logits).numpy()
        self.assertAllClose(log_probs[[0, 2], [2, 3]], [0.0, 0.0])

    def test_later_steps_are_unchanged(self):
        logits = ttm.force_first_token(LOGITS, tf.constant(1), DOMAIN, TOKEN_IDS)
        self.assertAllEqual(logits, LOGITS)


class _Decoder(tf.keras.layers.Layer):
    """Returns the same logits at every step, like a decoder's ``call``."""

    def call(
        self,
        inputs,
        length_or_step=None,
        state=None,
        input_fn=None,
        sampling_probability=None,
        training=None,
    ):
        logits = tf.tile(LOGITS[:1], [tf.shape(inputs)[0], 1])
        if inputs.shape.ndims == 3:
            logits = tf.tile(logits[:, tf.newaxis], [1, tf.shape(inputs)[1], 1])
        return logits, state, None


class _ForcingDecoder(ttm.FirstTokenForcing, _Decoder):
    first_token_ids = TOKEN_IDS


class FirstTokenForcingTest(tf.test.TestCase):
    def test_only_step_by_step_decoding_is_forced(self):
        decoder = _ForcingDecoder()
        with domain_scope(DOMAIN):
            step, _, _ = decoder(tf.zeros([3, 2]), tf.constant(0))
            full, _, _ = decoder(tf.zeros([3, 5, 2]), tf.constant([5, 5, 5]))
        self.assertEqual(int(np.argmax(step[0])), 2)
        self.assertEqual(int(np.argmax(step[1])), 3)
        self.assertTrue(np.isinf(step[0, 3]))
        self.assertAllEqual(full, np.tile(LOGITS[:1, np.newaxis], [3, 5, 1]))
