import os

import opennmt
import pytest
import tensorflow as tf
from parameterized import parameterized

from ldr_opennmt.errors import UserError
from tests import helpers

SENTENCES = ["the big cell", "a host is here", "spirit"]
LABELS = ["religious", "generic", "software"]


def _serving_inputs(sentences, labels):
    tokens = [s.split() for s in sentences]
    length = max(len(t) for t in tokens)
    inputs = dict(
        tokens=tf.constant([t + [""] * (length - len(t)) for t in tokens]),
        length=tf.constant([len(t) for t in tokens], tf.int32),
    )
    if labels is not None:
        inputs["domain"] = tf.constant(labels)
    return inputs


@pytest.mark.slow
class ExportTest(tf.test.TestCase):
    @parameterized.expand([(family,) for family in helpers.FAMILIES])
    def test_saved_model_takes_domain_names(self, family):
        model, _ = helpers.build_model(self, family, params={"beam_width": 2})
        expected = model.infer(helpers.source_features(model, SENTENCES, LABELS))
        export_dir = os.path.join(self.get_temp_dir(), "export")
        model.export(export_dir)
        with open(os.path.join(export_dir, "assets.extra", "domains.txt")) as f:
            self.assertEqual(f.read().splitlines(), model.domains or [])

        serve = tf.saved_model.load(export_dir).signatures["serving_default"]
        # Models using labels for training only (domain mixing) serve without them.
        takes_labels = not getattr(model.features_inputter, "optional_labels", False)
        self.assertEqual("domain" in serve.structured_input_signature[1], takes_labels)
        outputs = serve(**_serving_inputs(SENTENCES, LABELS if takes_labels else None))
        self.assertAllEqual(outputs["tokens"], expected["tokens"])
        self.assertAllEqual(outputs["length"], expected["length"])
        self.assertAllClose(outputs["log_probs"], expected["log_probs"], atol=1e-5)
        if not takes_labels:
            with self.assertRaisesRegex(tf.errors.InvalidArgumentError, "2 in length, 3 in tokens"):
                serve(tokens=tf.constant([["cell"]] * 3), length=tf.constant([1, 1], tf.int32))
            return
        if model.domains is not None:
            with self.assertRaisesRegex(
                tf.errors.InvalidArgumentError, r"Unknown domain label .{0,2}legal"
            ):
                serve(**_serving_inputs(["cell"], ["legal"]))
        # One label for three sentences is not broadcast, two are not truncated.
        for labels in (["medical"], ["medical", "generic"], ["medical"] * 4):
            inputs = _serving_inputs(SENTENCES, labels)
            with self.assertRaisesRegex(
                tf.errors.InvalidArgumentError,
                r"Batch size mismatch \(one domain label per sentence\): "
                r"%d in domain, 3 in length, 3 in tokens" % len(labels),
            ):
                serve(**inputs)
        with self.assertRaisesRegex(tf.errors.InvalidArgumentError, "2 in length, 3 in tokens"):
            serve(
                tokens=tf.constant([["cell"]] * 3),
                length=tf.constant([1, 1], tf.int32),
                domain=tf.constant(["medical"] * 3),
            )

    def test_ctranslate2_export_is_refused(self):
        model, _ = helpers.build_model(self, "ldr_transformer")
        exporter = opennmt.utils.exporters.make_exporter("ctranslate2")
        with self.assertRaisesRegex(UserError, "CTranslate2Exporter cannot export a multi-domain"):
            model.export(os.path.join(self.get_temp_dir(), "ct2"), exporter=exporter)


if __name__ == "__main__":
    tf.test.main()
