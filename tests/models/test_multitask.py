"""Multitask (ML) and adversarial (AdvL) domain learning: loss, gradients, labels, export."""

import importlib.util
import os

import numpy as np
import opennmt
import pytest
import tensorflow as tf
from opennmt.utils import misc
from parameterized import parameterized

from ldr_opennmt.errors import UserError
from ldr_opennmt.export import folding
from ldr_opennmt.models import multitask
from tests import corpus, helpers

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SENTENCES = ["the big cell", "a host is here now", "spirit", "red cell a host"]
LABELS = ["religious", "medical", "generic", "software"]
TARGETS = [["le", "grand", "cellule"], ["un", "hote", "est", "ici"], ["esprit"], ["x"]]
PARAMS = {"beam_width": 2, "maximum_decoding_length": 6}
BUILDERS = {False: multitask.ml_transformer, True: multitask.advl_transformer}


def _paths(test):
    return corpus.write_corpus(os.path.join(test.get_temp_dir(), "corpus"), count=20)


def _model(test, adversarial=False, params=None, seed=7, weights_from=None, **kwargs):
    """A tiny ML or AdvL model; random weights (:obj:`seed`), or those of another model."""
    paths = _paths(test)
    model = BUILDERS[adversarial](**dict(helpers.TINY, **kwargs))
    model.initialize(corpus.data_config(paths), params=dict(PARAMS, **(params or {})))
    model.create_variables()
    if weights_from is not None:
        for source, target in zip(weights_from.weights, model.weights, strict=True):
            test.assertEqual(source.shape, target.shape)
            target.assign(source)
    elif seed is not None:
        helpers.randomize_weights(model, seed)
    return model, paths


def _features(model, sentences=SENTENCES, labels=None):
    if labels is not None:
        return helpers.source_features(model, sentences, labels)
    tokens = helpers.padded_tokens([s.split() for s in sentences])
    return model.features_inputter.make_features(features=tokens)


def _labels(model, targets=TARGETS):
    return model.labels_inputter.make_features(features=helpers.padded_tokens(targets))


def _translation_loss(model, outputs, labels, training):
    """OpenNMT-tf's translation loss alone."""
    return opennmt.models.SequenceToSequence.compute_loss(model, outputs, labels, training=training)


def _classifier_gradients(model, features, labels):
    """The gradients of L_cls alone, aligned with ``model.trainable_weights``."""
    with tf.GradientTape() as tape:
        outputs, _ = model(features, labels, training=True)
        loss = outputs["classification_loss"]
    return loss, _dense(tape.gradient(loss, model.trainable_weights))


def _dense(gradients):
    """Gradients as dense arrays (embedding gradients are ``IndexedSlices``)."""
    return [None if g is None else tf.convert_to_tensor(g).numpy() for g in gradients]


def _groups(model):
    """Indices of ``trainable_weights``: source side (encoder and source embedding),
    classifier head, target side (decoder and target embedding)."""
    refs = {v.ref(): i for i, v in enumerate(model.trainable_weights)}
    source = model.encoder.trainable_weights + model.features_inputter.trainable_weights
    head = model.domain_classifier.trainable_weights
    groups = {
        "source": sorted(refs[v.ref()] for v in source),
        "head": sorted(refs[v.ref()] for v in head),
    }
    taken = set(groups["source"]) | set(groups["head"])
    groups["target"] = [i for i in range(len(refs)) if i not in taken]
    return groups


def _plain_twin(test, model, paths):
    """An opennmt Transformer with the same sizes and the model's translation weights."""
    sizes = dict(helpers.TINY)
    dropout = sizes.pop("dropout")
    plain = opennmt.models.Transformer(
        source_inputter=opennmt.inputters.WordEmbedder(sizes["num_units"]),
        target_inputter=opennmt.inputters.WordEmbedder(sizes["num_units"]),
        dropout=dropout,
        attention_dropout=dropout,
        ffn_dropout=dropout,
        **sizes,
    )
    plain.initialize(corpus.data_config(paths), params=dict(PARAMS))
    plain.create_variables()
    plain.features_inputter.embedding.assign(model.features_inputter.word_inputter.embedding)
    plain.labels_inputter.embedding.assign(model.labels_inputter.embedding)
    for name in ("encoder", "decoder"):
        source = misc.get_variables_name_mapping(getattr(model, name), name)
        target = misc.get_variables_name_mapping(getattr(plain, name), name)
        test.assertEqual(set(source), set(target))
        for key, variable in target.items():
            variable.assign(source[key])
    return plain


def _assert_same_translations(test, actual, expected):
    test.assertAllEqual(actual["tokens"], expected["tokens"])
    test.assertAllEqual(actual["length"], expected["length"])
    test.assertAllClose(actual["log_probs"], expected["log_probs"], atol=1e-5)


def _one_line_error(test, context, regex):
    message = str(context.exception)
    test.assertNotIn("\n", message)
    test.assertRegex(message, regex)


class MultitaskTransformerTest(tf.test.TestCase):
    def test_advl_classifier_gradient_is_the_reversed_ml_gradient(self):
        ml, _ = _model(self, adversarial=False)
        advl, _ = _model(self, adversarial=True, reversal_scale=0.5, weights_from=ml)
        features = _features(ml, labels=LABELS)
        labels = _labels(ml)
        ml_loss, ml_grads = _classifier_gradients(ml, features, labels)
        advl_loss, advl_grads = _classifier_gradients(advl, features, labels)
        self.assertAllClose(ml_loss, advl_loss)
        self.assertGreater(ml_loss, 0)
        groups = _groups(ml)
        self.assertEqual(groups, _groups(advl))
        self.assertLen(groups["head"], 4)
        for i in groups["source"]:
            self.assertGreater(np.abs(ml_grads[i]).sum(), 0, ml.trainable_weights[i].name)
            self.assertAllClose(advl_grads[i], -0.5 * ml_grads[i], atol=1e-6)
        for i in groups["head"]:
            self.assertGreater(np.abs(ml_grads[i]).sum(), 0)
            self.assertAllClose(advl_grads[i], ml_grads[i], atol=1e-6)
        for i in groups["target"]:
            self.assertIsNone(ml_grads[i], ml.trainable_weights[i].name)
            self.assertIsNone(advl_grads[i], advl.trainable_weights[i].name)

    def test_the_reversal_scale_is_a_params_key(self):
        # params: gradient_reversal_scale overrides the model's lambda (the tables' AdvL grid
        # sets it): the encoder's classifier gradient is -lambda times ML's.
        ml, _ = _model(self, adversarial=False)
        params = {multitask.SCALE_PARAM: 0.25, multitask.RAMP_PARAM: 0}
        advl, _ = _model(self, adversarial=True, params=params, weights_from=ml)
        self.assertEqual(advl.reversal_scale, 0.25)
        self.assertEqual(advl.reversal_weight(), 0.25)
        self.assertIsNone(ml.reversal_scale)
        features, labels = _features(ml, labels=LABELS), _labels(ml)
        _, ml_grads = _classifier_gradients(ml, features, labels)
        _, advl_grads = _classifier_gradients(advl, features, labels)
        for i in _groups(ml)["source"]:
            self.assertAllClose(advl_grads[i], -0.25 * ml_grads[i], atol=1e-6)
        # Without the key, the model's argument.
        self.assertEqual(_model(self, adversarial=True, reversal_scale=0.5)[0].reversal_scale, 0.5)
        with self.assertRaises(UserError) as context:
            multitask.advl_transformer(**helpers.TINY).initialize(
                corpus.data_config(_paths(self)), params={multitask.SCALE_PARAM: -1}
            )
        _one_line_error(
            self, context, r"^params: gradient_reversal_scale must be .*, got -1(\.0)?$"
        )

    @parameterized.expand([(False,), (True,)])
    def test_training_gradient_is_translation_plus_weighted_classifier(self, adversarial):
        """compute_gradients (the trainer's hook): ``grad(L_gen + w L_cls)``, normalized."""
        reference, _ = _model(self, adversarial=False)
        features = _features(reference, labels=LABELS)
        labels = _labels(reference)
        _, cls_grads = _classifier_gradients(reference, features, labels)
        optimizer = tf.keras.optimizers.legacy.SGD(1.0)
        gradients = {}
        for weight in (0.0, 2.0):
            model, _ = _model(
                self,
                adversarial=adversarial,
                # A constant lambda (1): the reversal's ramp is tested in
                # tests/layers/test_reversal_schedule.py.
                params={multitask.WEIGHT_PARAM: weight, multitask.RAMP_PARAM: 0},
                weights_from=reference,
            )
            self.assertEqual(model.classifier_loss_weight, weight)
            _, grads = model.compute_gradients(features, labels, optimizer)
            gradients[weight] = _dense(grads)
        groups = _groups(reference)
        sign = -1.0 if adversarial else 1.0
        for i in groups["source"]:
            difference = gradients[2.0][i] - gradients[0.0][i]
            self.assertAllClose(difference, sign * 2.0 * cls_grads[i], atol=1e-5)
        for i in groups["head"]:
            self.assertFalse(np.any(gradients[0.0][i]))
            self.assertAllClose(gradients[2.0][i], 2.0 * cls_grads[i], atol=1e-5)
        for i in groups["target"]:
            self.assertAllClose(gradients[2.0][i], gradients[0.0][i], atol=1e-6)

    def test_generic_sentences_do_not_count(self):
        model, _ = _model(self)
        features = _features(model, ["the big cell", "a host is here now"], ["medical", "generic"])
        labels = _labels(model, [["le", "grand"], ["un", "hote", "est", "ici", "maintenant"]])
        outputs, _ = model(features, labels, training=True)
        alone = _features(model, ["the big cell"], ["medical"])
        alone_outputs, _ = model(alone, _labels(model, [["le", "grand"]]), training=True)
        expected = -tf.nn.log_softmax(alone_outputs["domain_logits"][0])[0]  # medical: id 0
        self.assertGreater(expected, 0)
        self.assertAllClose(alone_outputs["classification_loss"], expected, atol=1e-6)
        self.assertAllClose(outputs["classification_loss"], expected, atol=1e-5)
        # Generic sentences only: L_cls is 0, the head gets no gradient, the training
        # loss is the translation loss.
        generic = _features(model, ["the big cell"], ["generic"])
        labels = _labels(model, [["le", "grand"]])
        with tf.GradientTape() as tape:
            generic_outputs, _ = model(generic, labels, training=True)
            loss = model.compute_loss(generic_outputs, labels)[0]
        self.assertEqual(generic_outputs["classification_loss"], 0)
        self.assertAllClose(loss, _translation_loss(model, generic_outputs, labels, True)[0])
        head = tape.gradient(loss, model.domain_classifier.trainable_weights)
        self.assertTrue(all(g is None or not np.any(g.numpy()) for g in head))

    @parameterized.expand([(False,), (True,)])
    def test_evaluation_loss_is_the_translation_loss(self, adversarial):
        model, paths = _model(self, adversarial=adversarial)
        features = _features(model, labels=LABELS)
        labels = _labels(model)
        outputs, _ = model(features, labels, training=True)
        self.assertGreater(outputs["classification_loss"], 0.1)
        training = model.compute_loss(outputs, labels, training=True)
        gen = _translation_loss(model, outputs, labels, training=True)
        self.assertAllClose(
            training[0], gen[0] + outputs["classification_loss"] * gen[1], atol=1e-4
        )
        loss, predictions = model.evaluate(features, labels)
        plain = _plain_twin(self, model, paths)
        plain_features = plain.features_inputter.make_features(
            features={k: v for k, v in features.items() if k in ("tokens", "length")}
        )
        plain_loss, plain_predictions = plain.evaluate(plain_features, labels)
        self.assertAllClose(loss, plain_loss, atol=1e-5)
        self.assertAllClose(
            loss, _translation_loss(model, outputs, labels, training=False), atol=1e-5
        )
        self.assertAllEqual(predictions["tokens"], plain_predictions["tokens"])
        # The classifier's accuracy on the labelled sentences (generic left out).
        metrics = model.get_metrics()
        model.update_metrics(metrics, predictions, labels)
        ids = features["domain"].numpy()
        hits = [p == d for p, d in zip(predictions["predicted_domain"].numpy(), ids) if d >= 0]
        self.assertLen(hits, 3)
        self.assertAllClose(metrics[multitask.ACCURACY_METRIC].result(), np.mean(hits))

    def test_labels_are_ignored_at_inference(self):
        model, paths = _model(self, adversarial=False)
        unlabelled = _features(model)
        self.assertAllEqual(unlabelled["domain"], [-1] * len(SENTENCES))
        expected = model.infer(unlabelled)
        for labels in (LABELS, ["medical"] * 4, ["software"] * 4):
            _assert_same_translations(self, model.infer(_features(model, labels=labels)), expected)
        plain = _plain_twin(self, model, paths)
        _assert_same_translations(self, plain.infer(_features(plain)), expected)
        # Files: a source alone, or with a label file (checked, then ignored).
        alone = next(iter(model.features_inputter.make_inference_dataset(paths["test_src"], 100)))
        self.assertAllEqual(alone["domain"], np.full(alone["length"].shape, -1))
        pair = [paths["test_src"], paths["test_domain"]]
        labelled = next(iter(model.features_inputter.make_inference_dataset(pair, 100)))
        self.assertNotAllEqual(labelled["domain"], alone["domain"])
        _assert_same_translations(self, model.infer(labelled), model.infer(alone))
        with self.assertRaisesRegex(tf.errors.InvalidArgumentError, "Unknown domain label 'legal'"):
            _features(model, ["cell"], ["legal"])
        # Training needs the labels.
        with self.assertRaisesRegex(UserError, r"^training needs domain labels"):
            model.examples_inputter.make_training_dataset(
                paths["train_src"], paths["train_tgt"], batch_size=4
            )

    @pytest.mark.slow
    def test_saved_model_serves_without_labels(self):
        # AdvL (its gradient reversal is the op a SavedModel could trip on); ML serves
        # the same plain Transformer.
        model, _ = _model(self, adversarial=True)
        expected = model.infer(_features(model))
        export_dir = os.path.join(self.get_temp_dir(), "export")
        model.export(export_dir)
        serve = tf.saved_model.load(export_dir).signatures["serving_default"]
        self.assertEqual(sorted(serve.structured_input_signature[1]), ["length", "tokens"])
        outputs = serve(**helpers.padded_tokens([s.split() for s in SENTENCES]))
        _assert_same_translations(self, outputs, expected)
        self.assertNotIn("predicted_domain", outputs)

    def test_other_exports_are_refused(self):
        model, _ = _model(self)
        exporter = opennmt.utils.exporters.make_exporter("ctranslate2")
        export_dir = os.path.join(self.get_temp_dir(), "ct2")
        with self.assertRaises(UserError) as context:
            model.export(export_dir, exporter=exporter)
        _one_line_error(
            self,
            context,
            "^CTranslate2Exporter cannot export DomainClassifierTransformer: the ML/AdvL exports",
        )
        self.assertFalse(os.path.exists(export_dir))
        with self.assertRaisesRegex(UserError, "cannot be exported to CTranslate2: the ML/AdvL"):
            folding.check_foldable(model)

    def test_invalid_configuration(self):
        for value in (-1.0, -1e-9, float("nan"), "1"):
            for builder in BUILDERS.values():
                with self.assertRaises(UserError) as context:
                    builder(classifier_loss_weight=value, **helpers.TINY)
                _one_line_error(self, context, "^classifier_loss_weight must be a")
        with self.assertRaises(UserError) as context:
            multitask.advl_transformer(reversal_scale=-1, **helpers.TINY)
        _one_line_error(self, context, "^reversal_scale must be a finite number >= 0, got -1")
        paths = _paths(self)
        with self.assertRaises(UserError) as context:
            multitask.ml_transformer(**helpers.TINY).initialize(
                corpus.data_config(paths), params={multitask.WEIGHT_PARAM: -0.5}
            )
        _one_line_error(
            self, context, r"^params: domain_classifier_loss_weight must be .*, got -0.5$"
        )
        for adversarial, name in ((False, "ML"), (True, "AdvL")):
            for mode in ("procedure1", "domains", "general", "nonsense"):
                with self.assertRaises(UserError) as context:
                    BUILDERS[adversarial](**helpers.TINY).initialize(
                        corpus.data_config(paths), params={"domain_training": mode}
                    )
                if mode == "nonsense":  # Not a mode at all: the list of modes.
                    regex = "^params: domain_training must be one of .*, got 'nonsense'$"
                else:
                    regex = "^the %s Transformer trains jointly .* got '%s'$" % (name, mode)
                _one_line_error(self, context, regex)
        data = {k: v for k, v in corpus.data_config(paths).items() if k != "domains"}
        with self.assertRaisesRegex(UserError, "domains"):
            multitask.ml_transformer(**helpers.TINY).initialize(data)

    def test_model_definitions(self):
        expected = {
            "ml_transformer.py": (False, 6, 512),
            "advl_transformer.py": (True, 6, 512),
            "small/ml_transformer.py": (False, 2, 64),
            "small/advl_transformer.py": (True, 2, 64),
        }
        for name, (adversarial, num_layers, num_units) in expected.items():
            path = os.path.join(ROOT, "model_defs", name)
            spec = importlib.util.spec_from_file_location("model_def", path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            model = module.model()
            self.assertIsInstance(model, multitask.DomainClassifierTransformer, name)
            self.assertEqual(model.adversarial, adversarial, name)
            self.assertLen(model.encoder.layers, num_layers)
            self.assertEqual(model.domain_classifier.hidden_units, num_units)


def _separable_batch(model):
    """Sentences whose domain is given away by one source word; any targets."""
    words = {"medical": "cell", "religious": "host", "software": "spirit"}
    shared = ["the", "a", "big", "small", "red", "is", "here", "now"]
    rng = np.random.RandomState(0)
    sentences, labels, targets = [], [], []
    for i in range(18):
        domain = corpus.DOMAINS[i % 3]
        sentence = list(rng.choice(shared, size=rng.randint(1, 4)))
        sentence.insert(rng.randint(0, len(sentence) + 1), words[domain])
        sentences.append(" ".join(sentence))
        labels.append(domain)
        targets.append(["le", "grand"])
    return _features(model, sentences, labels), _labels(model, targets)


@pytest.mark.slow
class MultitaskLearningTest(tf.test.TestCase):
    def _train(self, adversarial, head_only=False, steps=40):
        """Trains a tiny model on the separable batch; returns the classifier loss before
        and after, and the model."""
        tf.random.set_seed(3)
        # AdvL's reversal weight ramps from 0 to 1 over the first quarter of the steps.
        params = {multitask.RAMP_PARAM: steps // 4}
        model, _ = _model(self, adversarial=adversarial, params=params, seed=None)
        features, labels = _separable_batch(model)
        optimizer = tf.keras.optimizers.legacy.Adam(0.01)
        head = {v.ref() for v in model.domain_classifier.trainable_weights}

        @tf.function
        def _step():
            loss, gradients = model.compute_gradients(features, labels, optimizer)
            pairs = zip(gradients, model.trainable_weights)
            if head_only:
                pairs = [(g, v) for g, v in pairs if v.ref() in head]
            optimizer.apply_gradients(pairs)
            return loss

        def _classification_loss():
            outputs, _ = model(features, labels, training=True)
            return float(outputs["classification_loss"])

        initial = _classification_loss()
        for _ in range(steps):
            _step()
        return initial, _classification_loss(), model, features, labels

    def test_ml_classifier_learns_to_classify(self):
        initial, final, model, features, labels = self._train(adversarial=False)
        self.assertGreater(initial, 0.5)
        self.assertLess(final, 0.2 * initial)
        _, predictions = model.evaluate(features, labels)
        self.assertAllEqual(predictions["predicted_domain"], features["domain"])

    def test_advl_classifier_learns_and_the_encoder_defeats_it(self):
        # AdvL's head gets the plain gradient: trained alone on the encoder's output, it
        # learns to classify as ML's does.
        initial, final, model, features, labels = self._train(adversarial=True, head_only=True)
        self.assertGreater(initial, 0.5)
        self.assertLess(final, 0.2 * initial)
        _, predictions = model.evaluate(features, labels)
        self.assertAllEqual(predictions["predicted_domain"], features["domain"])
        # Trained whole, the encoder gets the reversed gradient and hides the domain:
        # the classifier ends far worse than ML's after the same steps.
        _, ml_final, _, _, _ = self._train(adversarial=False)
        _, advl_final, _, _, _ = self._train(adversarial=True)
        self.assertGreater(advl_final, 0.5)
        self.assertGreater(advl_final, 3 * ml_final)
