import numpy as np
import pytest
import tensorflow as tf
from opennmt.utils import misc
from parameterized import parameterized

from tests import helpers

PARAMS = {"optimizer": "Adam", "learning_rate": 0.01}


def _train(trainer, optimizer, dataset, steps, accum_steps=2):
    max_step = int(optimizer.iterations.numpy()) + steps
    trainer(dataset, max_step=max_step, accum_steps=accum_steps, report_steps=1000)


@pytest.mark.slow
class UpdateSkippingTest(tf.test.TestCase):
    def _check_absent_domains_frozen(self, family="ldr_transformer", params=None, jit=False):
        model, _ = helpers.build_model(self, family, params=dict(PARAMS, **(params or {})))
        model.set_jit_compile(jit)
        optimizer = model.get_optimizer()
        trainer = helpers.make_trainer(model, optimizer)
        regions = model.domain_weights()
        shared_refs = {v.ref() for vs in regions.values() for v in vs}
        shared = [v for v in model.trainable_weights if v.ref() not in shared_refs]

        all_domains = helpers.domain_dataset(
            model, self, ["medical", "religious", "software"], name="all"
        )
        _train(trainer, optimizer, all_domains, steps=3)
        before = {k: helpers.snapshot(vs) for k, vs in regions.items()}
        shared_before = helpers.snapshot(shared)

        medical_only = helpers.domain_dataset(model, self, ["medical"], name="medical")
        _train(trainer, optimizer, medical_only, steps=3)

        for k in (1, 2):  # religious, software: absent from the last steps
            for variable, value in zip(regions[k], before[k]):
                self.assertAllEqual(variable.numpy(), value, msg=variable.name)
        changed = [
            not np.array_equal(variable.numpy(), value)
            for variable, value in zip(regions[0], before[0])
        ]
        self.assertTrue(all(changed))
        self.assertTrue(
            any(not np.array_equal(v.numpy(), b) for v, b in zip(shared, shared_before))
        )
        return model

    @parameterized.expand([("procedure1",), ("joint",)])
    def test_absent_domains_are_bit_identical(self, mode):
        self._check_absent_domains_frozen(params={"domain_training": mode})

    # LDR's target-side embedder and the RNN's are the same LDREmbedder whose update skipping
    # the default-size tests above check; their own trainings take 1.5-4 minutes in CI.
    @helpers.skip_unless_full("1.5-4 minutes: the target side and the RNN trained twice each")
    def test_target_side_and_rnn(self):
        self._check_absent_domains_frozen("ldr_transformer_target")
        self._check_absent_domains_frozen("ldr_rnn")

    def test_plain_adam_would_move_absent_domains(self):
        # The control experiment: without update skipping, momentum moves them.
        model, _ = helpers.build_model(self, "ldr_transformer", params=PARAMS)
        optimizer = tf.keras.optimizers.legacy.Adam(0.01)
        trainer = helpers.make_trainer(model, optimizer)
        _train(trainer, optimizer, helpers.domain_dataset(model, self, ["religious"], name="r"), 2)
        before = helpers.snapshot(model.domain_weights()[1])
        _train(trainer, optimizer, helpers.domain_dataset(model, self, ["medical"], name="m"), 2)
        after = helpers.snapshot(model.domain_weights()[1])
        self.assertFalse(all(np.array_equal(a, b) for a, b in zip(before, after)))

    # Update skipping under XLA and mixed precision: GPU paths (docs/gpu.md), 20-25 s each on
    # the CPU; run by `bash run/gpu_check.sh` and LDR_TEST_FULL=1.
    @helpers.skip_unless_full("a GPU path (XLA), about 25 s on the CPU")
    def test_xla(self):
        self._check_absent_domains_frozen(jit=True)

    @helpers.skip_unless_full("a GPU path (mixed precision), about 20 s on the CPU")
    def test_mixed_precision(self):
        # onmt-main --mixed_precision enables mixed_float16 on GPUs only; on a CPU the
        # same path runs with the half-precision policy its kernels support (see
        # helpers.mixed_precision_policy): the trainer still wraps the optimizer in a
        # LossScaleOptimizer.
        policy = helpers.skip_without_mixed_precision(self)
        tf.keras.mixed_precision.set_global_policy(policy)
        try:
            self.assertTrue(misc.mixed_precision_enabled())
            model = self._check_absent_domains_frozen()
            self.assertEqual(
                model.features_inputter.word_inputter.compute_dtype, policy[len("mixed_") :]
            )
        finally:
            misc.disable_mixed_precision()


if __name__ == "__main__":
    tf.test.main()
