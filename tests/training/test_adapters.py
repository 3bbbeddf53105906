"""Residual adapters trained by ``ldr-main`` on a frozen Mixed model."""

import copy
import os

import numpy as np
import pytest
import tensorflow as tf

from ldr_opennmt import models
from ldr_opennmt.errors import UserError
from ldr_opennmt.training.runner import Runner
from tests import helpers

SENTENCES = ["the big cell", "a host is here", "spirit"]


def _adapters(**sizes):
    return models.residual_adapter_transformer(adapter_dim=8, **dict(helpers.TINY, **sizes))


def _mixed():
    return models.mixed_transformer(**helpers.TINY)


def _adapter_region(name):
    """The region of an adapter variable's checkpoint name, or None."""
    leaf = name.split("/")[-3]
    if "/adapter/" not in name or not leaf.startswith("domain_"):
        return None
    return int(leaf.split("_")[1])


def _translate(runner, labels):
    model, _ = runner.restore()
    model.params["beam_width"] = 1
    return model.infer(helpers.source_features(model, SENTENCES, labels))


@pytest.mark.slow
class ResidualAdapterTrainingTest(helpers.SharedDirTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.base = os.path.join(cls.dir, "mixed")
        cls.config = helpers.corpora_config(cls.dir, cls.base)
        Runner(_mixed, copy.deepcopy(cls.config), seed=2).train()

    def _adapter_config(self, name, **finetune):
        config = copy.deepcopy(self.config)
        config["model_dir"] = os.path.join(self.dir, name)
        config["finetune"] = dict({"base": self.base, "steps": 3}, **finetune)
        return config

    def test_base_stays_bit_identical_and_adapters_learn(self):
        config = self._adapter_config("adapters")
        runner = Runner(_adapters, config, seed=3)
        runner.train()
        self.assertTrue(tf.train.latest_checkpoint(config["model_dir"]).endswith("ckpt-7"))
        base = helpers.checkpoint_values(self.base)
        grafted = helpers.checkpoint_values(config["model_dir"], step=4)
        final = helpers.checkpoint_values(config["model_dir"])
        regions = set()
        for name, value in final.items():
            region = _adapter_region(name)
            if region is None:
                # Every base variable, after 3 steps with the base's Adam state restored.
                self.assertAllEqual(value, base[name], msg=name)
            else:
                self.assertNotIn(name, base)
                if "up_" in name:  # The adapters start as the identity.
                    self.assertFalse(np.any(grafted[name]), name)
                if not np.array_equal(value, grafted[name]):
                    regions.add(region)
        self.assertTrue(regions)
        # Generic (no adapter) translates exactly as the base model.
        base_runner = Runner(_mixed, copy.deepcopy(self.config))
        expected = _translate(base_runner, ["generic"] * 3)
        generic = _translate(runner, ["generic"] * 3)
        self.assertAllEqual(generic["tokens"], expected["tokens"])
        self.assertAllClose(generic["log_probs"], expected["log_probs"], atol=1e-5)
        # A finished run is not trained again.
        Runner(_adapters, copy.deepcopy(config)).train()
        self.assertTrue(tf.train.latest_checkpoint(config["model_dir"]).endswith("ckpt-7"))

    def test_one_domain_moves_only_its_adapters(self):
        config = self._adapter_config("adapters_religious", domain="religious")
        Runner(_adapters, config, seed=4).train()
        grafted = helpers.checkpoint_values(config["model_dir"], step=4)
        final = helpers.checkpoint_values(config["model_dir"])
        moved = {
            _adapter_region(name)
            for name, value in final.items()
            if not np.array_equal(value, grafted[name])
        }
        self.assertEqual(moved, {1})  # religious is domain 1

    def test_refusals_write_nothing(self):
        # No base.
        config = copy.deepcopy(self.config)
        config["model_dir"] = os.path.join(self.dir, "adapters_no_base")
        with self.assertRaisesRegex(UserError, "trains on top of a trained base model"):
            Runner(_adapters, config).train()
        # The base's weights without its step (the step-0 check would fail later).
        with self.assertRaisesRegex(UserError, "add --continue_from_checkpoint"):
            Runner(_adapters, copy.deepcopy(config)).train(checkpoint_path=self.base)
        # A base of another size, a base that is not a plain Transformer.
        cases = {
            "adapters_wider": (lambda: _adapters(ffn_inner_dim=48), self.base),
            "adapters_tied": (lambda: _adapters(share_target_embeddings=True), self.base),
        }
        for name, (model, base) in cases.items():
            config = self._adapter_config(name, base=base)
            with self.assertRaisesRegex(
                UserError, "not a checkpoint .*residual adapters go on a Mixed model"
            ):
                Runner(model, config).train()
        ldr_dir = os.path.join(self.dir, "ldr")
        config = copy.deepcopy(self.config)
        config["model_dir"] = ldr_dir
        config["train"]["max_step"] = 1
        Runner(lambda: models.ldr_transformer(domain_region_size=2, **helpers.TINY), config).train()
        config = self._adapter_config("adapters_on_ldr", base=ldr_dir)
        with self.assertRaisesRegex(UserError, "not a checkpoint of this model .*shape"):
            Runner(_adapters, config).train()
        for name in ("adapters_no_base", "adapters_on_ldr") + tuple(cases):
            self.assertFalse(os.path.exists(os.path.join(self.dir, name)), name)


if __name__ == "__main__":
    tf.test.main()
