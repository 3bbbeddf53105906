"""The Factorized Transformer's curriculum: stage 1, unfold, stage 2 with real freezing."""

import copy
import json
import os

import numpy as np
import pytest
import tensorflow as tf

from ldr_opennmt import models
from ldr_opennmt.errors import UserError
from ldr_opennmt.training.runner import Runner
from tests import helpers


def _sf():
    return models.factorized_transformer("sf", **helpers.TINY)


def _pa():
    return models.factorized_transformer("pa", **helpers.TINY)


def _region(name):
    """(general copy name, region) of a region variable name, or None."""
    parts = name.split("/")
    leaf = parts[-3]
    if not leaf.startswith("domain_"):
        return None
    region, base = leaf[len("domain_") :].split("_", 1)
    return "/".join(parts[:-3] + [base] + parts[-2:]), int(region)


@pytest.mark.slow
class CurriculumTest(helpers.SharedDirTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.stage1 = os.path.join(cls.dir, "stage1")
        cls.config = helpers.corpora_config(cls.dir, cls.stage1, domain_training="general")
        Runner(_sf, copy.deepcopy(cls.config), seed=2).train()

    def _stage2(self, name, **finetune):
        config = copy.deepcopy(self.config)
        config["model_dir"] = os.path.join(self.dir, name)
        del config["params"]["domain_training"]
        config["finetune"] = dict({"base": self.stage1, "steps": 2, "unfold": True}, **finetune)
        return config

    def test_stage1_trains_the_general_copies_only(self):
        values = helpers.checkpoint_values(self.stage1)
        initial = helpers.checkpoint_values(self.stage1, step=2)
        moved_general = moved_region = 0
        for name, value in values.items():
            region = _region(name)
            if region is None:
                moved_general += int(not np.array_equal(value, initial[name]))
            else:
                moved_region += int(not np.array_equal(value, initial[name]))
        self.assertGreater(moved_general, 0)
        self.assertEqual(moved_region, 0)

    def test_unfold_then_stage2_freezes_what_is_shared(self):
        config = self._stage2("stage2")
        runner = Runner(_sf, config, seed=3)
        self.assertEqual(runner.config["params"]["domain_training"], "domains")
        runner.train()
        stage1 = helpers.checkpoint_values(self.stage1)
        unfolded = helpers.checkpoint_values(config["model_dir"], step=4)
        final = helpers.checkpoint_values(config["model_dir"])
        self.assertTrue(tf.train.latest_checkpoint(config["model_dir"]).endswith("ckpt-6"))
        for name, value in final.items():
            region = _region(name)
            if region is None:
                # Shared variables and general copies: bit-identical to stage 1's.
                self.assertAllEqual(value, stage1[name], msg=name)
            else:
                # Right after unfolding every region equals its general copy.
                self.assertAllEqual(unfolded[name], stage1[region[0]], msg=name)
        moved = [n for n in final if _region(n) and not np.array_equal(final[n], unfolded[n])]
        self.assertTrue(moved)
        with open(os.path.join(config["model_dir"], "finetune.json")) as f:
            self.assertTrue(json.load(f)["unfold"])
        # A finished stage is not trained again; an unfolded model is not unfolded twice.
        Runner(_sf, copy.deepcopy(config)).train()
        self.assertTrue(tf.train.latest_checkpoint(config["model_dir"]).endswith("ckpt-6"))
        again = self._stage2("stage3", base=config["model_dir"])
        with self.assertRaisesRegex(UserError, "already unfolded"):
            Runner(_sf, again).train()
        self.assertFalse(os.path.exists(again["model_dir"]))

    def test_stage2_on_one_domain_moves_only_its_blocks(self):
        config = self._stage2("stage2_medical", domain="medical")
        Runner(_sf, config, seed=4).train()
        unfolded = helpers.checkpoint_values(config["model_dir"], step=4)
        final = helpers.checkpoint_values(config["model_dir"])
        moved = {
            _region(n)[1] for n in final if _region(n) and not np.array_equal(final[n], unfolded[n])
        }
        self.assertEqual(moved, {0})  # medical is domain 0

    def test_base_of_another_design_is_refused(self):
        config = self._stage2("stage2_pa")
        with self.assertRaisesRegex(UserError, "is not a checkpoint of this model"):
            Runner(_pa, config).train()
        self.assertFalse(os.path.exists(config["model_dir"]))

    def test_stage2_from_a_plain_transformer(self):
        # The Mixed baseline as PA's stage 1: its weights become the general copies.
        mixed_dir = os.path.join(self.dir, "mixed")
        config = copy.deepcopy(self.config)
        config["model_dir"] = mixed_dir
        del config["params"]["domain_training"]
        tied = dict(helpers.TINY, share_target_embeddings=True)
        Runner(lambda: models.mixed_transformer(**tied), config, seed=5).train()
        stage2 = self._stage2("stage2_from_mixed", base=mixed_dir, steps=1)
        Runner(_pa, stage2, seed=6).train()
        mixed = helpers.checkpoint_values(mixed_dir)
        unfolded = helpers.checkpoint_values(stage2["model_dir"], step=4)
        self.assertTrue(tf.train.latest_checkpoint(stage2["model_dir"]).endswith("ckpt-5"))
        for name, value in mixed.items():
            self.assertAllEqual(unfolded[name], value, msg=name)
        regions = 0
        for name, value in unfolded.items():
            region = _region(name)
            if region is not None:  # Every region starts as its general copy.
                self.assertAllEqual(value, unfolded[region[0]], msg=name)
                regions += 1
            else:
                self.assertIn(name, mixed)
        self.assertGreater(regions, 0)
        # Adam's moments too: every region's slots are its general copy's (trained, not
        # zero), so stage 2 does not start with inflated steps.
        reader = tf.train.load_checkpoint(os.path.join(stage2["model_dir"], "ckpt-4"))
        slots = {
            name: reader.get_tensor(name)
            for name in reader.get_variable_to_shape_map()
            if "/.OPTIMIZER_SLOT/" in name
        }
        checked = 0
        for name, value in slots.items():
            variable, slot = name.split("/.OPTIMIZER_SLOT/")
            region = _region(variable + "/.ATTRIBUTES/VARIABLE_VALUE")
            if region is not None:
                general = region[0].replace("/.ATTRIBUTES/VARIABLE_VALUE", "")
                self.assertAllEqual(value, slots["%s/.OPTIMIZER_SLOT/%s" % (general, slot)])
                checked += 1
        self.assertGreater(checked, 0)
        self.assertTrue(any(np.abs(v).max() > 0 for n, v in slots.items() if "domain_" in n))

        # Another size, and SF (multi-query attention: no plain Transformer fits it), are
        # refused, nothing written.
        def wider():
            return models.factorized_transformer("pa", **dict(helpers.TINY, ffn_inner_dim=48))

        for name, model in (("stage2_wider", wider), ("stage2_sf_from_mixed", _sf)):
            config = self._stage2(name, base=mixed_dir)
            with self.assertRaisesRegex(UserError, "a plain Transformer fits PA only"):
                Runner(model, config).train()
            self.assertFalse(os.path.exists(config["model_dir"]))
        # A Transformer with its own output layer: PA (tied) would drop it.
        untied_dir = os.path.join(self.dir, "mixed_untied")
        config = copy.deepcopy(self.config)
        config["model_dir"] = untied_dir
        del config["params"]["domain_training"]
        config["train"]["max_step"] = 1
        Runner(lambda: models.mixed_transformer(**helpers.TINY), config).train()
        config = self._stage2("stage2_from_untied", base=untied_dir)
        with self.assertRaisesRegex(UserError, "took .*a plain base needs share_target_embed"):
            Runner(_pa, config).train()
        self.assertFalse(os.path.exists(config["model_dir"]))

    def test_stage2_refusals(self):
        config = self._stage2("stage2_general")
        config["params"]["domain_training"] = "general"
        with self.assertRaisesRegex(UserError, "general .stage 1's mode. cannot follow it"):
            Runner(_sf, config).train()
        config = self._stage2("stage2_legal", domain="legal")
        with self.assertRaisesRegex(UserError, "domain 'legal' is not declared"):
            Runner(_sf, config).train()
        # Declared (a reserved domain) but without a corpus to train its blocks on.
        config["data"]["domains"] = sorted(helpers.CORPUS_SIZES) + ["legal"]
        with self.assertRaisesRegex(UserError, "domain .legal. has no corpus"):
            Runner(_sf, config).train()
        for name in ("stage2_general", "stage2_legal"):
            self.assertFalse(os.path.exists(os.path.join(self.dir, name)))


if __name__ == "__main__":
    tf.test.main()
