import os
import types
from unittest import mock

import opennmt
import pytest
import tensorflow as tf
from parameterized import parameterized

from ldr_opennmt.errors import UserError
from tests import helpers

SENTENCES = ["the big cell", "a host is here", "spirit"]
LABELS = ["religious", "generic", "software"]


def _serving_inputs(sentences, labels):
    inputs = helpers.padded_tokens([s.split() for s in sentences])
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
        self._check_empty_batch_and_lengths(serve, takes_labels, outputs)
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
        # A [batch, 1] (or scalar) domain tensor is named in graph, not an opaque binding error.
        for domain in ([["medical"]] * 3, "medical"):
            with self.assertRaisesRegex(
                tf.errors.InvalidArgumentError,
                r"Invalid domain input of rank %d \(one label per sentence"
                % (2 if domain != "medical" else 0),
            ):
                serve(
                    tokens=tf.constant([["cell"]] * 3),
                    length=tf.constant([1, 1, 1], tf.int32),
                    domain=tf.constant(domain),
                )

    def _check_empty_batch_and_lengths(self, serve, takes_labels, outputs):
        """An empty batch gives empty outputs; a length outside [1, width of tokens] is
        refused in graph."""

        def _call(tokens, length):
            inputs = dict(
                tokens=tf.constant(
                    tokens, tf.string, shape=[len(tokens), len(tokens[0]) if tokens else 0]
                ),
                length=tf.constant(length, tf.int32, shape=[len(length)]),
            )
            if takes_labels:
                inputs["domain"] = tf.constant(["generic"] * len(length), tf.string, [len(length)])
            return serve(**inputs)

        empty = _call([], [])  # tokens of shape [0, 0]
        self.assertEqual(sorted(empty), sorted(outputs))
        for name, value in empty.items():
            self.assertEqual(value.shape[0], 0, name)
            self.assertEqual(value.dtype, outputs[name].dtype, name)
        cases = (
            (
                [["cell", "host"]],
                [0],
                r"Invalid length 0 at index 0 \(each length must be in \[1, 2\]",
            ),
            ([["cell", "host"], ["a", ""]], [2, -1], "Invalid length -1 at index 1"),
            ([["cell", ""], ["a", "host"]], [1, 3], r"Invalid length 3 at index 1 .*\[1, 2\]"),
        )
        for tokens, length, message in cases:
            with self.assertRaisesRegex(tf.errors.InvalidArgumentError, message):
                _call(tokens, length)

    def test_saved_model_translates_ensembles_of_domain_views(self):
        model, _ = helpers.build_model(self, "factorized_pa", params={"beam_width": 2})
        labels = ["ens-uniform", "medical:1", "religious:0.25 generic:0.75"]
        expected = model.infer(helpers.source_features(model, SENTENCES, labels))
        export_dir = os.path.join(self.get_temp_dir(), "export")
        model.export(export_dir)
        serve = tf.saved_model.load(export_dir).signatures["serving_default"]
        outputs = serve(**_serving_inputs(SENTENCES, labels))
        self.assertAllEqual(outputs["tokens"], expected["tokens"])
        self.assertAllClose(outputs["log_probs"], expected["log_probs"], atol=1e-5)
        # Plain labels in the same SavedModel: the single-view beam search.
        plain = serve(**_serving_inputs(SENTENCES, ["medical"] * 3))
        alone = model.infer(helpers.source_features(model, SENTENCES, ["medical"] * 3))
        self.assertAllEqual(plain["tokens"], alone["tokens"])
        self.assertAllEqual(outputs["tokens"][1], plain["tokens"][1])
        with self.assertRaisesRegex(
            tf.errors.InvalidArgumentError, r"Invalid ensemble label .{0,2}medical:0.9 generic:0.9"
        ):
            serve(**_serving_inputs(["cell"], ["medical:0.9 generic:0.9"]))

    def test_ctranslate2_export_is_refused(self):
        model, _ = helpers.build_model(self, "ldr_transformer")
        exporter = opennmt.utils.exporters.make_exporter("ctranslate2")
        with self.assertRaisesRegex(UserError, "CTranslate2Exporter cannot export a multi-domain"):
            model.export(os.path.join(self.get_temp_dir(), "ct2"), exporter=exporter)


class ExportDirectoryTest(helpers.SharedDirTestCase):
    """An export is built under a temporary name and renamed when complete."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.model, _ = helpers.build_model(
            types.SimpleNamespace(get_temp_dir=lambda: cls.dir), "mixed_transformer"
        )

    def _parent(self, name):
        parent = os.path.join(self.dir, name)
        os.makedirs(parent)
        return parent

    def test_interrupted_export_leaves_nothing(self):
        parent = self._parent("interrupted")
        export_dir = os.path.join(parent, "export")
        # The SavedModel is written, then the export stops before assets.extra/.
        with mock.patch.object(
            type(self.model), "export_assets", side_effect=RuntimeError("killed")
        ):
            with self.assertRaisesRegex(RuntimeError, "killed"):
                self.model.export(export_dir)
        self.assertEqual(os.listdir(parent), [])

    def test_export_replaces_an_earlier_export_only(self):
        parent = self._parent("again")
        export_dir = os.path.join(parent, "export")
        self.model.export(export_dir)
        stale = os.path.join(export_dir, "stale.txt")
        with open(stale, "w") as f:
            f.write("from an earlier export\n")
        self.model.export(export_dir)
        self.assertFalse(os.path.exists(stale))
        self.assertTrue(os.path.isfile(os.path.join(export_dir, "assets.extra", "domains.txt")))
        self.assertEqual(os.listdir(parent), ["export"])
        # Any other non-empty directory is refused, not replaced.
        other = self._parent("other")
        with open(os.path.join(other, "notes.txt"), "w") as f:
            f.write("keep me\n")
        with self.assertRaisesRegex(UserError, "not empty and not an export made by"):
            self.model.export(other)
        self.assertEqual(os.listdir(other), ["notes.txt"])
        # A SavedModel the package did not make (no mark) is not replaced; nor a link.
        foreign = self._parent("foreign")
        with open(os.path.join(foreign, "saved_model.pb"), "wb") as f:
            f.write(b"someone else's")
        with self.assertRaisesRegex(UserError, "not an export made by ldr-opennmt"):
            self.model.export(foreign)
        self.assertEqual(os.listdir(foreign), ["saved_model.pb"])
        link = os.path.join(parent, "link")
        os.symlink(export_dir, link)
        with self.assertRaisesRegex(UserError, "a symbolic link"):
            self.model.export(link)
        self.assertTrue(os.path.islink(link))
        os.remove(link)


if __name__ == "__main__":
    tf.test.main()
