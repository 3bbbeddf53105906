"""The table of OpenNMT-tf's configuration keys against the installed OpenNMT-tf's sources."""

import os
import re
import unittest

import opennmt

from ldr_opennmt import onmt_keys

#: A key read from a section's configuration in OpenNMT-tf's code, e.g.
#: ``train_config.get("max_step")`` or ``params["beam_width"]``.
_READ = re.compile(
    r"\b(train_config|eval_config|infer_config|score_config|params|data_config)"
    r"(?:\.get\(|\[)\"([a-z_0-9]+)\""
)
_SECTION = {
    "train_config": "train",
    "eval_config": "eval",
    "infer_config": "infer",
    "score_config": "score",
    "params": "params",
    "data_config": "data",
}
#: Read under those names in OpenNMT-tf, but from a nested mapping (early_stopping, a
#: tokenization's or a schedule's parameters) or another dict named the same.
_NESTED = {"metric", "min_improvement", "steps", "type", "params", "vocabulary", "embedding"}


class OnmtKeysTest(unittest.TestCase):
    def test_every_key_opennmt_tf_reads_is_in_the_table(self):
        root = os.path.dirname(opennmt.__file__)
        missing = set()
        for directory, _, files in os.walk(root):
            for name in files:
                if not name.endswith(".py"):
                    continue
                with open(os.path.join(directory, name), encoding="utf-8") as f:
                    for variable, key in _READ.findall(f.read()):
                        section = _SECTION[variable]
                        if key in _NESTED and section != "data":
                            continue
                        if section == "data" and key in _NESTED:
                            continue  # An inputter's suffix, read under its prefix.
                        if section == "params" and any(
                            onmt_keys.reads(s, key) for s in ("infer", "score")
                        ):
                            continue  # print_prediction(params=...): the infer/score section.
                        if not onmt_keys.reads(section, key):
                            missing.add("%s: %s (%s)" % (section, key, name))
        self.assertEqual(sorted(missing), [], "OpenNMT-tf reads keys the table lacks")

    def test_inputter_keys(self):
        for name in ("source_vocabulary", "target_tokenization", "source_1_embedding",
                     "source_2_3_vocabulary", "source_domain_vocabulary",
                     "vocabulary"):  # fmt: skip
            self.assertTrue(onmt_keys.reads("data", name), name)
        for name in ("source_vocabluary", "sorce_vocabulary", "vocab"):
            self.assertFalse(onmt_keys.reads("data", name), name)
