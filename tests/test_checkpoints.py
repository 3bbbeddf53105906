"""A checkpoint of another model is refused by name before anything restores it."""

import os
import types

import opennmt
import tensorflow as tf

from ldr_opennmt import checkpoints, upstream
from ldr_opennmt.errors import UserError
from ldr_opennmt.training.runner import Runner
from tests import corpus, helpers


def _checkpoint(model, prefix):
    return tf.train.Checkpoint(model=model).write(prefix)


class CheckpointCheckTest(helpers.SharedDirTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        test = types.SimpleNamespace(get_temp_dir=lambda: cls.dir)
        cls.ldr, cls.paths = helpers.build_model(test, "ldr_transformer")
        cls.mixed, _ = helpers.build_model(test, "mixed_transformer")
        cls.rnn, _ = helpers.build_model(test, "mixed_rnn")
        cls.ldr_ckpt = _checkpoint(cls.ldr, os.path.join(cls.dir, "ldr", "ckpt-1"))
        cls.mixed_ckpt = _checkpoint(cls.mixed, os.path.join(cls.dir, "mixed", "ckpt-1"))
        cls.rnn_ckpt = _checkpoint(cls.rnn, os.path.join(cls.dir, "rnn", "ckpt-1"))

    def test_own_checkpoint_passes(self):
        checkpoints.check_model_checkpoint(self.ldr, self.ldr_ckpt)
        keys = checkpoints.model_checkpoint_keys(self.ldr)
        self.assertLen(keys, len(self.ldr.variables))
        self.assertCountEqual(
            keys,
            [
                name
                for name, _ in tf.train.list_variables(self.ldr_ckpt)
                if name.startswith("model/")
            ],
        )

    def test_another_family_is_refused_by_name(self):
        # LDR embeddings (generic + domain regions) are not a Mixed model's.
        with self.assertRaisesRegex(
            UserError,
            r"^%s: not a checkpoint of this model \(MultiDomainTransformer\): model/\S+/embedding "
            r"has shape \[15, 16\] in the checkpoint and \[15, 10\] in the model" % self.mixed_ckpt,
        ):
            checkpoints.check_model_checkpoint(self.ldr, self.mixed_ckpt)
        # No variable in common (an RNN's checkpoint): refused too, never untrained weights.
        with self.assertRaisesRegex(
            UserError,
            r"^%s: not a checkpoint of this model \(MultiDomainTransformer\): it has no value "
            r"for model/\S+ \(shape \[\d+(, \d+)*\]\) nor for \d+ other variables" % self.rnn_ckpt,
        ):
            checkpoints.check_model_checkpoint(self.mixed, self.rnn_ckpt)
        # Absent variables that the caller sets itself are allowed.
        checkpoints.check_model_checkpoint(
            self.mixed, self.rnn_ckpt, absent_ok=self.mixed.variables
        )

    def test_another_vocabulary_or_size_names_the_shapes(self):
        paths = corpus.write_corpus(os.path.join(self.dir, "small_vocab"), count=4)
        model = helpers.FAMILIES["mixed_transformer"]()
        model.initialize(corpus.data_config(paths), params={"beam_width": 1})
        model.create_variables()
        with self.assertRaisesRegex(
            UserError, r"model/\S+ has shape \[20\] in the checkpoint and \[18\] in the model"
        ):
            checkpoints.check_model_checkpoint(model, self.mixed_ckpt)

    def _runner(self, family, name):
        model_dir = os.path.join(self.dir, name)
        config = {
            "model_dir": model_dir,
            "data": corpus.data_config(self.paths),
            "params": {"beam_width": 1, "maximum_decoding_length": 4},
            "infer": {"batch_size": 4},
        }
        return model_dir, config, helpers.FAMILIES[family]

    def test_runner_restore_refuses_another_models_checkpoint(self):
        _, config, family = self._runner("ldr_transformer", "runner")
        runner = Runner(family(), config)
        with self.assertRaisesRegex(UserError, "not a checkpoint of this model"):
            runner.restore(self.mixed_ckpt)
        predictions = os.path.join(self.dir, "runner.out")
        with self.assertRaisesRegex(UserError, "not a checkpoint of this model"):
            runner.infer(
                self.paths["test_src"], predictions_file=predictions, checkpoint_path=self.rnn_ckpt
            )
        self.assertFalse(os.path.exists(predictions))
        model, path = runner.restore(self.ldr_ckpt)
        self.assertEqual(path, self.ldr_ckpt)
        self.assertAllEqual(model.variables[0], self.ldr.variables[0])

    def test_stock_runner_infer_and_export_refuse_another_models_checkpoint(self):
        # What stock onmt-main runs: opennmt.Runner with the package's model, the patches
        # installed by the model definition.
        upstream.install()
        model_dir, config, family = self._runner("mixed_transformer", "stock")
        config["data"]["domains"] = None
        features = self.paths["test_src"]
        runner = opennmt.Runner(family(), config)
        with self.assertRaisesRegex(UserError, "not a checkpoint of this model"):
            runner.infer(features, checkpoint_path=self.rnn_ckpt)
        export_dir = os.path.join(self.dir, "stock_export")
        with self.assertRaisesRegex(UserError, "not a checkpoint of this model"):
            opennmt.Runner(family(), config).export(export_dir, checkpoint_path=self.ldr_ckpt)
        self.assertFalse(os.path.exists(export_dir))
        self.assertFalse(os.path.exists(model_dir))


if __name__ == "__main__":
    tf.test.main()
