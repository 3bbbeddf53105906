import os

import opennmt
import tensorflow as tf
from parameterized import parameterized

from ldr_opennmt.domains import DomainError
from tests import helpers

SENTENCES = ["the big cell", "a host is here", "spirit"]
LABELS = ["religious", "generic", "software"]


class ExportTest(tf.test.TestCase):
    @parameterized.expand([("ldr_transformer",), ("dc_rnn",)])
    def test_saved_model_takes_domain_names(self, family):
        model, _ = helpers.build_model(self, family, params={"beam_width": 2})
        expected = model.infer(helpers.source_features(model, SENTENCES, LABELS))
        export_dir = os.path.join(self.get_temp_dir(), "export")
        model.export(export_dir)

        serve = tf.saved_model.load(export_dir).signatures["serving_default"]
        tokens = [s.split() for s in SENTENCES]
        length = max(len(t) for t in tokens)
        outputs = serve(
            tokens=tf.constant([t + [""] * (length - len(t)) for t in tokens]),
            length=tf.constant([len(t) for t in tokens], tf.int32),
            domain=tf.constant(LABELS),
        )
        self.assertAllEqual(outputs["tokens"], expected["tokens"])
        self.assertAllClose(outputs["log_probs"], expected["log_probs"], atol=1e-5)
        with self.assertRaisesRegex(
            tf.errors.InvalidArgumentError, r"Unknown domain label .{0,2}legal"
        ):
            serve(
                tokens=tf.constant([["cell"]]),
                length=tf.constant([1], tf.int32),
                domain=tf.constant(["legal"]),
            )

    def test_ctranslate2_export_is_refused(self):
        model, _ = helpers.build_model(self, "ldr_transformer")
        exporter = opennmt.utils.exporters.make_exporter("ctranslate2")
        with self.assertRaisesRegex(
            DomainError, "CTranslate2Exporter cannot export a multi-domain"
        ):
            model.export(os.path.join(self.get_temp_dir(), "ct2"), exporter=exporter)


if __name__ == "__main__":
    tf.test.main()
