"""The every-layer example (examples/domain_scale): a per-domain scale of each feed-forward
block, put into the stock layers with dense_slots and replace_dense, with a fold.

Its conformance (training modes, SavedModel, the CTranslate2 fold against the SavedModel)
is checked by ``tests/checks/test_family.py``; here, the layer and the guide's code."""

import os
import re

import numpy as np
import tensorflow as tf

from ldr_opennmt import probe, registry
from ldr_opennmt.layers import domain_scope
from ldr_opennmt.layers.replace import dense_slots
from tests import helpers

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLE = os.path.join(ROOT, "examples", "domain_scale", "domain_scale.py")
FAMILY = "domain_scale_transformer"
GUIDE = os.path.join(ROOT, "docs", "adding-a-method.md")
EXAMPLES = [EXAMPLE, os.path.join(ROOT, "examples", "domain_bias", "domain_bias.py")]


class DomainScaleFamilyTest(tf.test.TestCase):
    def test_registers_and_folds(self):
        registry.load_user_module(EXAMPLE)
        caps = probe.capabilities(FAMILY)
        self.assertEqual(caps.labels, probe.LABEL_NEEDED)
        self.assertIsNone(caps.ctranslate2)  # Checked on the built model: it folds.
        self.assertIsNone(caps.ensembles)
        self.assertEqual(caps.default_domain_training, "procedure1")

    def test_every_ffn_output_is_scaled_and_folds_exactly(self):
        registry.load_user_module(EXAMPLE)
        model, _ = helpers.build_model(self, FAMILY)
        layers = [
            getattr(parent, attribute)
            for stack in (model.encoder, model.decoder)
            for parent, attribute in dense_slots(stack)
            if attribute == "outer"
        ]
        self.assertLen(layers, 2 * registry.TINY_TRANSFORMER["num_layers"])
        self.assertTrue(all(type(layer).__name__ == "DomainScaledDense" for layer in layers))
        self.assertLen(model.domain_weights(), 3)  # One region per declared domain.
        inputs = tf.constant(np.random.RandomState(0).normal(size=[2, 3, 32]), tf.float32)
        layer = layers[0]
        for domain in (0, 2, -1):
            with domain_scope(tf.constant([domain, domain])):
                outputs = layer(inputs)
            fold = layer.fold(domain)
            expected = tf.matmul(inputs, fold["kernel"]) + fold["bias"]
            self.assertAllClose(outputs, expected, atol=1e-5)
        # generic is the unscaled projection.
        self.assertAllClose(layer.fold(-1)["kernel"], layer.kernel)


def _python_blocks(path):
    with open(path, encoding="utf-8") as f:
        return re.findall(r"```python\n(.*?)```", f.read(), re.S)


class GuideTest(tf.test.TestCase):
    def test_the_guides_code_is_the_examples_code(self):
        # Each Python block of docs/adding-a-method.md is in one example, line by line and
        # in order (the examples add docstrings and comments): the guide cannot drift from
        # the files CI checks.
        sources = []
        for path in EXAMPLES:
            with open(path, encoding="utf-8") as f:
                sources.append([line.strip() for line in f if line.strip()])
        for block in _python_blocks(GUIDE):
            lines = [line.strip() for line in block.splitlines() if line.strip()]
            found = False
            for source in sources:
                position = 0
                for line in lines:
                    try:
                        position = source.index(line, position) + 1
                    except ValueError:
                        break
                else:
                    found = True
            self.assertTrue(found, "not in an example, in this order:\n" + block)


if __name__ == "__main__":
    tf.test.main()
