"""New domains on a trained model: reserved regions, stable ids, clear refusals."""

import copy
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf
from parameterized import parameterized

from ldr_opennmt import domain_record, domains, models
from ldr_opennmt.errors import UserError
from ldr_opennmt.training.runner import Runner
from tests import corpus, helpers

BASE = {"medical": 24, "religious": 24}
NEW = "software"
PREFIX = "model/examples_inputter/features_inputter/word_inputter/"
SUFFIX = "/.ATTRIBUTES/VARIABLE_VALUE"


def _ldr():
    return models.ldr_transformer(domain_region_size=2, num_reserved_regions=1, **helpers.TINY)


def _config(directory, model_dir, sizes, names=None):
    data_dir = os.path.join(directory, "data")
    paths = corpus.write_corpus(data_dir, count=20)
    data = {
        "source_vocabulary": paths["src_vocab"],
        "target_vocabulary": paths["tgt_vocab"],
        "train_corpora": corpus.write_domain_corpora(data_dir, sizes),
    }
    if names is not None:
        data["domains"] = names
    return {
        "model_dir": model_dir,
        "data": data,
        "params": {
            "optimizer": "Adam",
            "learning_rate": 0.01,
            "beam_width": 1,
            "maximum_decoding_length": 6,
            "domain_training": "procedure1",
        },
        "train": {"batch_size": 8, "max_step": 4, "save_checkpoints_steps": 4},
        "infer": {"batch_size": 8},
    }


class CheckDomainsTest(tf.test.TestCase):
    def test_appended_domains_are_new(self):
        self.assertEqual(domain_record.check_domains(["a", "b", "c"], ["a", "b"], 3, "m"), ["c"])
        self.assertEqual(domain_record.check_domains(["a", "b"], ["a", "b"], 2, "m"), [])
        self.assertEqual(domain_record.check_domains(["a"], None, 1, "m"), ["a"])

    @parameterized.expand(
        [
            (["b", "a", "c"], "domain 'a' has id 0 in the model in m but 1 in the configuration"),
            (["a", "c"], "domain 'b' \\(id 1\\) of the model in m is missing"),
            (["a", "b", "c", "d"], r"has 3 domain regions \(a, b and 1 reserved\): no free "),
        ]
    )
    def test_refusals(self, declared, message):
        with self.assertRaisesRegex(UserError, message):
            domain_record.check_domains(declared, ["a", "b"], 3, "m")


@pytest.mark.slow
class NewDomainTest(helpers.SharedDirTestCase):
    """A model trained on medical and religious with one reserved region takes software."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.base_dir = os.path.join(cls.dir, "base")
        cls.base_config = _config(cls.dir, cls.base_dir, BASE)
        Runner(_ldr, copy.deepcopy(cls.base_config), seed=3).train()

    def _new_config(self, model_dir, names=None, **kwargs):
        config = _config(self.dir, model_dir, dict(BASE, **{NEW: 24}), names=names)
        config.update(kwargs)
        return config

    def test_base_model_records_its_domains_and_regions(self):
        self.assertEqual(domain_record.read_record(self.base_dir), (list(BASE), 3))
        # Without the record (stock onmt-main), the layers tell which regions the
        # checkpoint holds: a model built with the base domains + software has 4
        # regions, the checkpoint the first 3.
        checkpoint = tf.train.latest_checkpoint(self.base_dir)
        runner = Runner(_ldr, self._new_config(os.path.join(self.dir, "unused")))
        model = runner.new_model(runner.finalized_config())
        model.create_variables()
        self.assertEqual(model.domain_regions(), 4)
        self.assertEqual(domain_record.checkpoint_regions(model, checkpoint), 3)

    def test_model_without_record(self):
        """A model directory without domains.json (trained by stock onmt-main)."""
        stock_dir = os.path.join(self.dir, "stock")
        shutil.copytree(self.base_dir, stock_dir)
        os.remove(os.path.join(stock_dir, domain_record.RECORD))
        runner = Runner(_ldr, self._new_config(stock_dir))
        self.assertEqual(runner.finalized_config()["data"]["domain_regions"], 3)

    def test_new_domain_falls_back_to_generic_before_training(self):
        config = self._new_config(self.base_dir)
        config["infer"]["with_scores"] = True  # Short-trained: compare scores too.
        runner = Runner(_ldr, config)
        self.assertEqual(runner.finalized_config()["data"]["domain_regions"], 3)
        self.assertNotIn("domain_regions", runner.config["data"])  # Not the user's.
        source = os.path.join(self.dir, "data", "train.%s.src" % NEW)
        outputs = {}
        for label in (NEW, domains.GENERIC, "medical"):
            labels = os.path.join(self.dir, "%s.labels" % label)
            corpus.write_lines(labels, [label] * domains.count_lines(source))
            output = os.path.join(self.dir, "%s.out" % label)
            runner.infer([source, labels], predictions_file=output)
            with open(output) as f:
                outputs[label] = f.read()
        self.assertEqual(outputs[NEW], outputs[domains.GENERIC])
        self.assertNotEqual(outputs["medical"], outputs[domains.GENERIC])
        # Evaluating does not change what the model is recorded to be trained with.
        self.assertEqual(domain_record.read_record(self.base_dir), (list(BASE), 3))

    def test_continue_on_the_new_domain(self):
        model_dir = os.path.join(self.dir, "added")
        config = self._new_config(
            model_dir, finetune={"base": self.base_dir, "domain": NEW, "steps": 2}
        )
        Runner(_ldr, config, seed=5).train()
        self.assertTrue(tf.train.latest_checkpoint(model_dir).endswith("ckpt-6"))
        # Ids are stable: the old domains keep theirs, the new one is appended.
        self.assertEqual(domain_record.read_record(model_dir), (list(BASE) + [NEW], 3))
        base = tf.train.load_checkpoint(self.base_dir)
        added = tf.train.load_checkpoint(model_dir)
        for region, moved in ((0, False), (1, False), (2, True)):
            for name in ("embedding", "fusion_kernel"):
                key = "%sdomain_%d_%s%s" % (PREFIX, region, name, SUFFIX)
                before, after = base.get_tensor(key), added.get_tensor(key)
                if moved:
                    self.assertGreater(np.abs(after - before).max(), 0, key)
                else:
                    self.assertAllEqual(after, before, msg=key)
        # The reserved region's fusion block started at zero (the generic output).
        self.assertAllEqual(
            base.get_tensor("%sdomain_2_fusion_kernel%s" % (PREFIX, SUFFIX)),
            np.zeros([2, helpers.TINY["num_units"]], np.float32),
        )

    @parameterized.expand(
        [
            (["religious", "medical", NEW], "domain 'medical' has id 0 in the model in .*base"),
            (["medical", NEW], "domain 'religious' \\(id 1\\) of the model in .*base.* missing"),
            (["medical", "religious", NEW, "legal"], "has 3 domain regions .*no free region"),
            (["medical", "religious", "medical"], "domain 'medical' is declared twice"),
            (["medical", "religious", "generic"], "'generic' is reserved"),
        ]
    )
    def test_refusals(self, names, message):
        config = self._new_config(self.base_dir, names=names)
        corpora = config["data"]["train_corpora"]
        config["data"]["train_corpora"] = {d: corpora[d] for d in corpora if d in names}
        with self.assertRaisesRegex(UserError, message):
            Runner(_ldr, config)

    def test_model_without_reserved_region_refuses(self):
        model_dir = os.path.join(self.dir, "full")
        config = _config(self.dir, model_dir, BASE)
        config["train"]["max_step"] = 1

        def full():
            return models.ldr_transformer(domain_region_size=2, **helpers.TINY)

        Runner(full, config).train()
        with self.assertRaisesRegex(
            UserError,
            r"has 2 domain regions \(medical, religious and 0 reserved\): no free region for "
            "software",
        ):
            Runner(full, self._new_config(model_dir))


if __name__ == "__main__":
    tf.test.main()
