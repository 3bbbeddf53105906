"""Beam search over ensembles of domain views."""

import os
import re

import numpy as np
import tensorflow as tf
from parameterized import parameterized

from ldr_opennmt import ensembles
from ldr_opennmt.errors import UserError
from tests import by_capability, helpers

SENTENCES = ["the big cell", "a host is here now", "spirit"]
#: The families that translate ensembles of their domain views (the registry's).
VIEW_FAMILIES = by_capability.families(by_capability.with_views)
# Each of these labels puts all its weight on one view.
ONE_HOT = {"medical": "medical:1", "religious": "religious:1.0", "generic": "generic:1"}


def _infer(model, sentences, labels):
    return model.infer(helpers.source_features(model, sentences, labels))


def _assert_same_translations(test, first, second, rows):
    for i in rows:
        length = first["length"][i, 0]
        test.assertEqual(second["length"][i, 0], length)
        test.assertAllEqual(first["tokens"][i, 0, :length], second["tokens"][i, 0, :length])
        test.assertAllClose(first["log_probs"][i], second["log_probs"][i], atol=1e-4)


class EnsembleDecodingTest(tf.test.TestCase):
    @parameterized.expand(VIEW_FAMILIES)
    def test_one_hot_weights_translate_as_the_domain(self, family):
        # The extra sentence with ens-uniform sends the whole batch through the ensemble
        # branch; the one-hot rows must still be the plain translations of their view.
        model, _ = helpers.build_model(self, family, params={"beam_width": 3})
        for view, label in ONE_HOT.items():
            plain = _infer(model, SENTENCES, [view] * 3)
            mixed = _infer(model, SENTENCES + ["cell"], [label] * 3 + ["ens-uniform"])
            _assert_same_translations(self, plain, mixed, range(3))

    @parameterized.expand([("ldr_transformer_target",), ("dc_transformer",)])
    def test_identical_views_ensemble_to_any_view(self, family):
        # Domain parameters at zero: every view is the generic model (as right after a
        # Factorized unfolding); any weights then give the generic translation.
        model, _ = helpers.build_model(self, family, params={"beam_width": 3})
        for variable in model.domain_variables():
            variable.assign(tf.zeros_like(variable))
        plain = _infer(model, SENTENCES, ["generic"] * 3)
        for label in ("ens-uniform", "medical:0.3 software:0.7"):
            _assert_same_translations(self, plain, _infer(model, SENTENCES, [label] * 3), range(3))

    def test_mixture_of_distributions_not_of_logits(self):
        # Greedy, one step: the first word is the argmax of sum_k w_k softmax(logits_k),
        # and its log-probability is the log of that sum.
        model, _ = helpers.build_model(
            self, "ldr_transformer_target", params={"maximum_decoding_length": 1}
        )
        weights = {"medical": 0.3, "software": 0.2, "generic": 0.5}
        features = helpers.source_features(model, ["a host is here"], ["medical"])
        probs = 0
        for view, weight in weights.items():
            view_features = helpers.source_features(model, ["a host is here"], [view])
            labels = {"ids": tf.constant([[1]]), "length": tf.constant([1])}  # <s>
            outputs, _ = model(view_features, labels=labels, training=False)
            probs += weight * tf.nn.softmax(outputs["logits"][0, 0]).numpy()
        label = " ".join("%s:%s" % item for item in weights.items())
        mixed = _infer(model, ["a host is here"], [label])
        del features
        first = model.labels_inputter.tokens_to_ids.lookup(mixed["tokens"][0, 0, 0]).numpy()
        self.assertEqual(first, int(np.argmax(probs)))
        self.assertAllClose(mixed["log_probs"][0, 0], np.log(np.max(probs)), atol=1e-5)

    def test_mixture_differs_from_its_views(self):
        model, _ = helpers.build_model(self, "factorized_pa", params={"beam_width": 2})
        mixed = _infer(model, SENTENCES, ["medical:0.5 religious:0.5"] * 3)["log_probs"]
        for view in ("medical", "religious"):
            self.assertNotAllClose(mixed, _infer(model, SENTENCES, [view] * 3)["log_probs"])

    def test_ensemble_in_a_compiled_function(self):
        model, paths = helpers.build_model(self, "ldr_transformer", params={"beam_width": 2})
        labels = os.path.join(self.get_temp_dir(), "labels")
        with open(paths["test_src"]) as f:
            count = len(f.read().splitlines())
        cycle = ["ens-uniform", "medical:0.5 generic:0.5", "medical", "generic"]
        with open(labels, "w") as f:
            f.write("".join(cycle[i % 4] + "\n" for i in range(count)))
        dataset = model.examples_inputter.make_inference_dataset([paths["test_src"], labels], 4)
        infer = tf.function(model.infer)
        batches = [infer(batch) for batch in dataset]
        self.assertEqual(sum(b["tokens"].shape[0] for b in batches), count)
        eager = [model.infer(batch) for batch in dataset]
        for compiled, expected in zip(batches, eager):
            self.assertAllEqual(compiled["tokens"], expected["tokens"])


class EnsembleRefusalTest(tf.test.TestCase):
    @parameterized.expand(by_capability.families(by_capability.without_views))
    def test_models_without_views_refuse_ensemble_labels(self, family):
        model, paths = helpers.build_model(self, family)
        # The model's own reason: unless its class states one, the class, then no
        # domain-specific parameters (Mixed, TTM) or a translation that reads no label
        # (domain mixing, ML, AdvL).
        reason = by_capability.capabilities(family).ensembles
        if not model.ensemble_refusal:
            self.assertRegex(
                reason,
                "^%s (has no domain-specific parameters|translates without reading the domain)"
                % type(model).__name__,
            )
        reason = re.escape(reason)
        labels = os.path.join(self.get_temp_dir(), "labels")
        with open(paths["test_src"]) as f:
            count = len(f.read().splitlines())
        with open(labels, "w") as f:
            f.write("medical\n" * (count - 1) + "ens-uniform\n")
        with self.assertRaisesRegex(
            UserError, "^%s:%d: ensemble label 'ens-uniform': %s" % (labels, count, reason)
        ):
            model.examples_inputter.make_inference_dataset([paths["test_src"], labels], 4)
        with self.assertRaisesRegex(UserError, "ensemble label 'ens-uniform': %s" % reason):
            model.examples_inputter.make_inference_dataset(
                [paths["test_src"], "domain:ens-uniform"], 4
            )

    def test_training_files_refuse_ensemble_labels(self):
        model, paths = helpers.build_model(self, "ldr_transformer")
        labels = os.path.join(self.get_temp_dir(), "labels")
        with open(paths["train_src"]) as f:
            count = len(f.read().splitlines())
        with open(labels, "w") as f:
            f.write("ens-uniform\n" * count)
        with self.assertRaisesRegex(UserError, "are for translation, not training"):
            model.examples_inputter.make_training_dataset(
                [paths["train_src"], labels], paths["train_tgt"], 4
            )

    def test_scoring_files_refuse_ensemble_labels(self):
        # Forced decoding runs one view per sentence: an ensemble label would be scored as
        # its largest-weight view.
        model, paths = helpers.build_model(self, "ldr_transformer")
        labels = os.path.join(self.get_temp_dir(), "labels")
        with open(paths["test_src"]) as f:
            count = len(f.read().splitlines())
        with open(labels, "w") as f:
            f.write("medical\n" + "ens-uniform\n" * (count - 1))
        with self.assertRaisesRegex(UserError, "^%s:2: .*not for scoring or evaluation" % labels):
            model.examples_inputter.make_evaluation_dataset(
                [paths["test_src"], labels], paths["test_tgt"], 4
            )
        # The same file translates.
        model.examples_inputter.make_inference_dataset([paths["test_src"], labels], 4)

    def test_learned_weights_from_the_configuration(self):
        model, _ = helpers.build_model(self, "ldr_transformer")
        inputter = model.features_inputter.domain_inputter
        self.assertIsNone(inputter.learned_weights)
        with self.assertRaisesRegex(tf.errors.InvalidArgumentError, "not fitted for this model"):
            helpers.source_features(model, ["cell"], ["ens-learned"])
        from tests import corpus

        config = dict(corpus.data_config(corpus.write_corpus(self.get_temp_dir(), count=5)))
        config[ensembles.CONFIG_KEY] = {"medical": 0.25, "generic": 0.75}
        inputter.initialize(config)
        self.assertAllClose(inputter.learned_weights, [0.25, 0, 0, 0.75])
        features = helpers.source_features(model, ["cell"], ["ens-learned"])
        self.assertAllClose(features[ensembles.WEIGHTS_FEATURE], [[0.25, 0, 0, 0.75]])
        config[ensembles.CONFIG_KEY] = [0.5, 0.5]
        with self.assertRaisesRegex(UserError, "one value per view"):
            inputter.initialize(config)


if __name__ == "__main__":
    tf.test.main()
