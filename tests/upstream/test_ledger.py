"""The coupling to OpenNMT-tf: fails loudly, naming the upstream name, when it changes."""

import ast
import logging
import os
import sys

import numpy as np
import opennmt
import tensorflow as tf
from opennmt import runner as runner_module
from opennmt.bin import main as onmt_main

from ldr_opennmt.training.evaluator import MultiDomainEvaluator
from ldr_opennmt.training.runner import Runner
from ldr_opennmt.upstream import ledger
from ldr_opennmt.upstream import onmt_main as ldr_onmt_main
from tests import corpus, helpers


class LedgerTest(tf.test.TestCase):
    def test_pinned_version(self):
        self.assertEqual(opennmt.__version__, ledger.PINNED_OPENNMT)

    def test_every_upstream_name_exists(self):
        self.assertEqual(ledger.missing_upstream_names(), [])

    def test_the_ledger_covers_the_onmt_main_module(self):
        # Every name of opennmt.bin.main that ldr_opennmt.upstream.onmt_main reads or patches is
        # listed in the ledger (one list for whoever upgrades OpenNMT-tf).
        with open(ldr_onmt_main.__file__, encoding="utf-8") as f:
            tree = ast.parse(f.read())
        used = {
            node.attr
            for node in ast.walk(tree)
            if isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "stock_main"
        }
        listed = {name for owner, name, _ in ledger.UPSTREAM_NAMES if owner is onmt_main}
        self.assertEqual(used, {"Runner", "config_util", "main", "_initialize_logging"})
        self.assertLessEqual(used, listed)
        self.assertEqual(os.path.basename(ldr_onmt_main.__file__), "onmt_main.py")

    def test_instance_attributes(self):
        model, paths = helpers.build_model(self)
        runner = Runner(
            model, {"model_dir": self.get_temp_dir(), "data": corpus.data_config(paths)}
        )
        for name in ledger.RUNNER_INSTANCE_NAMES:
            self.assertTrue(hasattr(runner, name), "opennmt.Runner has no %s" % name)
        evaluator = MultiDomainEvaluator(
            model, [paths["test_src"], paths["test_domain"]], paths["test_tgt"], batch_size=4
        )
        for name in ledger.EVALUATOR_INSTANCE_NAMES:
            self.assertTrue(hasattr(evaluator, name), "opennmt Evaluator has no %s" % name)
        trainer = opennmt.training.Trainer(model, tf.keras.optimizers.legacy.Adam())
        for name in ledger.TRAINER_INSTANCE_NAMES:
            self.assertTrue(hasattr(trainer, name), "opennmt Trainer has no %s" % name)
        checkpoint = opennmt.utils.checkpoint.Checkpoint(model, model_dir=self.get_temp_dir())
        for name in ledger.CHECKPOINT_INSTANCE_NAMES:
            self.assertTrue(hasattr(checkpoint, name), "opennmt Checkpoint has no %s" % name)
        loss, _ = evaluator.eval_step(*model.split_features_labels(next(iter(evaluator.dataset))))
        self.assertTrue(all(tf.math.is_finite(x) for x in tf.nest.flatten(loss)))

    def test_a_missing_name_is_reported(self):
        names = ledger.UPSTREAM_NAMES
        ledger.UPSTREAM_NAMES = names + ((onmt_main, "_no_such_function", "a feature"),)
        try:
            self.assertEqual(
                ledger.missing_upstream_names(),
                ["opennmt.bin.main._no_such_function (used by a feature)"],
            )
            version = opennmt.__version__
            opennmt.__version__ = "9.9.9"
            try:
                with self.assertLogs(tf.get_logger(), logging.WARNING) as logs:
                    ledger.check_upstream()
            finally:
                opennmt.__version__ = version
            self.assertRegex(
                logs.output[0], "pinned to OpenNMT-tf 2.32.0, found 9.9.9: missing opennmt.bin"
            )
        finally:
            ledger.UPSTREAM_NAMES = names

    def test_patches_are_undone(self):
        argv = list(sys.argv)
        setter = tf.config.threading.set_intra_op_parallelism_threads
        with self.assertRaises(SystemExit):
            ldr_onmt_main.run_onmt_main(["--help"], Runner)
        self.assertIs(onmt_main.Runner, opennmt.Runner)
        self.assertIs(onmt_main.config_util, opennmt.config)
        self.assertIs(tf.config.threading.set_intra_op_parallelism_threads, setter)
        self.assertEqual(sys.argv, argv)
        original = runner_module.evaluation
        with ledger.evaluator_class(MultiDomainEvaluator):
            self.assertIs(runner_module.evaluation.Evaluator, MultiDomainEvaluator)
        self.assertIs(runner_module.evaluation, original)

    def test_optimizer_mixin_keeps_the_instance(self):
        optimizer = tf.keras.optimizers.legacy.Adam(learning_rate=0.25)
        same = ledger.add_optimizer_mixin(optimizer, ledger.ConditionalUpdateMixin)
        self.assertIs(same, optimizer)
        self.assertIsInstance(optimizer, ledger.ConditionalUpdateMixin)
        self.assertIsInstance(optimizer, tf.keras.optimizers.legacy.Adam)
        self.assertEqual(optimizer.get_config()["learning_rate"], 0.25)
        variable = tf.Variable([1.0, 2.0])
        optimizer.apply_gradients([(tf.constant([1.0, 1.0]), variable)])
        self.assertTrue(np.all(variable.numpy() < [1.0, 2.0]))  # Unconditional by default.


if __name__ == "__main__":
    tf.test.main()
