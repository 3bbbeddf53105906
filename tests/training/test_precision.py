"""Every model family trains under XLA (``--jit_compile``) and mixed precision.

``onmt-main --mixed_precision`` sets the ``mixed_float16`` policy on GPUs; on a CPU
the same code path (compute dtype != variable dtype, loss-scale optimizer) runs
with the half-precision policy this CPU has kernels for (see
``helpers.mixed_precision_policy``). Masks and one-hot domain vectors follow the
compute dtype.
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
TRANSFORMERS = helpers.TRANSFORMERS
RNNS = [f for f in helpers.FAMILIES if f not in TRANSFORMERS]
# Mixed precision and XLA are GPU paths (docs/gpu.md): on the CPU, about 10-40 s a case. By
# default one case of each runs here (LDR embeddings on both sides under mixed precision, an
# auxiliary classification loss under XLA: about 20 s); LDR_TEST_FULL=1 runs every family, as
# `bash run/gpu_check.sh` does on a GPU. The families whose mechanism the full sweep adds:
# Factorized embeddings, output layer and FFN (factorized_df), per-domain copies mixed by
# proportions (mixing_transformer), a frozen base (residual_adapters), a classifier behind a
# gradient reversal (advl_transformer), the RNNs (ldr_rnn), LDR after every layer
# (ldr_transformer_released) and per-domain attention projections (factorized_pa).
MIXED_PRECISION = ("ldr_transformer_target",)
XLA = ("ml_transformer",)
CASES = [
    (f, "mixed_precision", runs) for f, runs in helpers.sweep(helpers.FAMILIES, MIXED_PRECISION)
]
CASES += [(family, "xla", runs) for family, runs in helpers.sweep(TRANSFORMERS, XLA)]


@pytest.mark.slow
class PrecisionTest(tf.test.TestCase):
    def tearDown(self):
        misc.disable_mixed_precision()
        super().tearDown()

    @parameterized.expand(CASES)
    def test_trains(self, family, mode, runs):
        helpers.skip_unless_swept(self, runs)
        if mode != "xla":
            mode = helpers.skip_without_mixed_precision(self)
            tf.keras.mixed_precision.set_global_policy(mode)
        model, paths = helpers.build_model(self, family, params=PARAMS)
        model.set_jit_compile(mode == "xla")
        optimizer = model.get_optimizer()
        if mode != "xla":
            # What OpenNMT-tf's Runner does under --mixed_precision.
            # (Dynamic scaling; the default initial scale 2**15 overflows float16 on the
            # first steps, each overflow skipping its step: these 2 steps start lower.)
            optimizer = tf.keras.mixed_precision.LossScaleOptimizer(optimizer, initial_scale=2**7)
        if getattr(model, "requires_base", False):
            optimizer.iterations.assign(1)  # As if a trained base had been restored.
        trainer = opennmt.training.Trainer(model, optimizer)
        dataset = helpers.domain_dataset(model, self, ["medical", "religious", "software"])
        before = helpers.snapshot(model.trainable_weights)
        summary = trainer(dataset, max_step=2, accum_steps=1, report_steps=1000)
        self.assertTrue(math.isfinite(summary["last_loss"]), summary)
        moved = [not np.array_equal(v.numpy(), b) for v, b in zip(model.trainable_weights, before)]
        if getattr(model, "requires_base", False):
            # Residual adapters: the adapters move, the (frozen) base does not.
            specific = {v.ref() for v in model.domain_variables()}
            self.assertEqual([v.ref() in specific for v in model.trainable_weights], moved)
        else:
            self.assertGreater(sum(moved), len(moved) // 2)
        for variable in model.trainable_weights:
            self.assertEqual(variable.dtype, tf.float32, variable.name)
            self.assertTrue(np.all(np.isfinite(variable.numpy())), variable.name)
        if mode != "xla":
            features, _ = helpers.training_batch(model, paths)
            embedder = model.features_inputter.word_inputter
            with domain_scope(features["domain"]):
                embedded = embedder(features)
            self.assertEqual(embedded.dtype, tf.as_dtype(mode[len("mixed_") :]))

    @parameterized.expand([(family,) for family in RNNS])
    def test_rnn_refuses_xla_up_front(self, family):
        model, _ = helpers.build_model(self, family)
        with self.assertRaisesRegex(UserError, "--jit_compile is not supported by RNN models"):
            model.set_jit_compile(True)
        model.set_jit_compile(False)


if __name__ == "__main__":
    tf.test.main()
