"""Every model family trains under XLA (``--jit_compile``) and mixed precision.

``onmt-main --mixed_precision`` sets the ``mixed_float16`` policy on GPUs; this
CPU's oneDNN kernels have no float16 LayerNorm, so the same code path (compute
dtype != variable dtype, loss-scale optimizer) is exercised with
``mixed_bfloat16``. Masks and one-hot domain vectors follow the compute dtype.
"""

import math

import numpy as np
import opennmt
import pytest
import tensorflow as tf
from opennmt.utils import misc
from parameterized import parameterized

from ldr_opennmt.errors import UserError
from ldr_opennmt.layers import domain_scope
from tests import helpers

PARAMS = {"optimizer": "Adam", "learning_rate": 0.01}
TRANSFORMERS = [f for f in helpers.FAMILIES if f.endswith(("transformer", "transformer_target"))]
RNNS = [f for f in helpers.FAMILIES if f not in TRANSFORMERS]
CASES = [(family, "mixed_bfloat16") for family in helpers.FAMILIES]
CASES += [(family, "xla") for family in TRANSFORMERS]


@pytest.mark.slow
class PrecisionTest(tf.test.TestCase):
    def tearDown(self):
        misc.disable_mixed_precision()
        super().tearDown()

    @parameterized.expand(CASES)
    def test_trains(self, family, mode):
        if mode != "xla":
            tf.keras.mixed_precision.set_global_policy(mode)
        model, paths = helpers.build_model(self, family, params=PARAMS)
        model.set_jit_compile(mode == "xla")
        optimizer = model.get_optimizer()
        if mode != "xla":
            # What OpenNMT-tf's Runner does under --mixed_precision.
            optimizer = tf.keras.mixed_precision.LossScaleOptimizer(optimizer)
        trainer = opennmt.training.Trainer(model, optimizer)
        dataset = helpers.domain_dataset(model, self, ["medical", "religious", "software"])
        before = helpers.snapshot(model.trainable_weights)
        summary = trainer(dataset, max_step=2, accum_steps=1, report_steps=1000)
        self.assertTrue(math.isfinite(summary["last_loss"]), summary)
        moved = [not np.array_equal(v.numpy(), b) for v, b in zip(model.trainable_weights, before)]
        self.assertGreater(sum(moved), len(moved) // 2)
        for variable in model.trainable_weights:
            self.assertEqual(variable.dtype, tf.float32, variable.name)
            self.assertTrue(np.all(np.isfinite(variable.numpy())), variable.name)
        if mode != "xla":
            features, _ = helpers.training_batch(model, paths)
            embedder = model.features_inputter.word_inputter
            with domain_scope(features["domain"]):
                embedded = embedder(features)
            self.assertEqual(embedded.dtype, tf.bfloat16)

    @parameterized.expand([(family,) for family in RNNS])
    def test_rnn_refuses_xla_up_front(self, family):
        model, _ = helpers.build_model(self, family)
        with self.assertRaisesRegex(UserError, "--jit_compile is not supported by RNN models"):
            model.set_jit_compile(True)
        model.set_jit_compile(False)


if __name__ == "__main__":
    tf.test.main()
