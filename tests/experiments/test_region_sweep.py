import os

import tensorflow as tf

from ldr_experiments import region_sweep
from ldr_opennmt.layers import LDREmbedder


class RegionSweepTest(tf.test.TestCase):
    def test_sizes_must_leave_a_generic_region(self):
        region_sweep.check_sizes([4, 8, 16], 64, 3)
        with self.assertRaisesRegex(SystemExit, "regions of 32, 64 cells do not fit"):
            region_sweep.check_sizes([4, 32, 64], 64, 3)
        region_sweep.check_sizes([4, 8, 16, 32, 64], 512, 6)

    def test_model_definition_builds_the_size(self):
        path = os.path.join(self.get_temp_dir(), "cells16.py")
        with open(path, "w") as f:
            f.write(region_sweep.model_definition("small", 16))
        scope = {}
        exec(compile(open(path).read(), path, "exec"), scope)
        model = scope["model"]()
        embedder = model.features_inputter.word_inputter
        self.assertIsInstance(embedder, LDREmbedder)
        self.assertEqual(embedder.domain_region_size, 16)
        self.assertEqual(embedder.embedding_size, 64)


if __name__ == "__main__":
    tf.test.main()
