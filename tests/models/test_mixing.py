"""The domain-mixing Transformer: gradient cut, equivalences, decoding, L_mix, labels."""

import math
import os
import random
import subprocess
import sys

import numpy as np
import opennmt
import pytest
import tensorflow as tf
import yaml
from opennmt.utils import misc
from parameterized import parameterized

from ldr_opennmt import models
from ldr_opennmt.errors import UserError
from ldr_opennmt.export import folding
from ldr_opennmt.layers import mixing
from tests import corpus, helpers

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SENTENCES = ["the big cell", "a host is here now", "spirit", "red cell a host"]
LABELS = ["religious", "medical", "generic", "software"]
TARGETS = [["le", "grand", "cellule"], ["un", "hote", "est", "ici"], ["esprit"], ["x"]]
PARAMS = {"beam_width": 2, "maximum_decoding_length": 6}


def _model(test, randomize=True, params=None, domains=corpus.DOMAINS, seed=7, **kwargs):
    directory = os.path.join(test.get_temp_dir(), "corpus_%s" % "_".join(domains))
    paths = corpus.write_corpus(directory, count=20, domains=domains)
    model = models.mixing_transformer(**dict(helpers.TINY, **kwargs))
    model.initialize(
        corpus.data_config(paths, domains=domains), params=dict(PARAMS, **(params or {}))
    )
    model.create_variables()
    if randomize:
        helpers.randomize_weights(model, seed)
    return model, paths


def _features(model, sentences=SENTENCES, labels=None):
    if labels is not None:
        return helpers.source_features(model, sentences, labels)
    tokens = helpers.padded_tokens([s.split() for s in sentences])
    return model.features_inputter.make_features(features=tokens)


def _labels(model, targets=TARGETS):
    return model.labels_inputter.make_features(features=helpers.padded_tokens(targets))


def _gen_loss(model, outputs, labels):
    """L_gen alone: OpenNMT-tf's loss numerator."""
    return opennmt.models.SequenceToSequence.compute_loss(model, outputs, labels, training=True)[0]


def _plain_twin(model, paths):
    """An opennmt Transformer with the same sizes, its mixed weights the average of the
    model's domain copies, every other weight copied."""
    sizes = dict(helpers.TINY)
    dropout = sizes.pop("dropout")
    plain = opennmt.models.Transformer(
        source_inputter=opennmt.inputters.WordEmbedder(sizes["num_units"]),
        target_inputter=opennmt.inputters.WordEmbedder(sizes["num_units"]),
        dropout=dropout,
        attention_dropout=dropout,
        ffn_dropout=dropout,
        share_embeddings=opennmt.models.EmbeddingsSharingLevel.TARGET,
        **sizes,
    )
    plain.initialize(corpus.data_config(paths), params=dict(PARAMS))
    plain.create_variables()
    plain.features_inputter.embedding.assign(model.features_inputter.word_inputter.embedding)
    plain.labels_inputter.embedding.assign(model.labels_inputter.embedding)
    for name in ("encoder", "decoder"):
        source = misc.get_variables_name_mapping(getattr(model, name), name)
        target = misc.get_variables_name_mapping(getattr(plain, name), name)
        mixed = {n for n in source if "domain_proportions" in n}
        assert set(source) - mixed == set(target), set(source) ^ set(target)
        for key, variable in target.items():
            value = source[key].numpy()
            if value.ndim == 3:  # [n, k, m] kernel
                value = value.mean(axis=1)
            elif value.shape != variable.shape:  # [k, m] bias
                value = value.mean(axis=0)
            variable.assign(value)
    return plain


def _assert_same_translations(test, a, b, atol=1e-4):
    test.assertAllEqual(a["length"], b["length"])
    for i in range(a["length"].shape[0]):
        for j in range(a["length"].shape[1]):
            length = a["length"][i, j]
            test.assertAllEqual(a["tokens"][i, j, :length], b["tokens"][i, j, :length])
    test.assertAllClose(a["log_probs"], b["log_probs"], atol=atol)


class MixingTransformerTest(tf.test.TestCase):
    def test_structure(self):
        model, _ = _model(self, randomize=False)
        self.assertEqual(model.num_domains, 3)
        self.assertEqual(model.domain_regions(), 3)
        self.assertEqual(model.domain_variables(), [])  # Trained jointly, never skipped.
        self.assertEqual(model.domain_training, "joint")
        labels = [p.label for p in model.proportion_layers()]
        self.assertEqual(labels, ["encoder/layer_0", "decoder/layer_0"])
        # Q, K, V, O + 2 FFN linears in the encoder layer; + cross Q, K, V, O in the decoder.
        self.assertLen(mixing.mixed_layers(model.encoder), 6)
        self.assertLen(mixing.mixed_layers(model.decoder), 10)
        kernels = [v for v in model.weights if v.shape.rank == 3]
        self.assertLen(kernels, 16)
        self.assertTrue(all(v.shape[1] == 3 for v in kernels))
        encoder_only, _ = _model(self, randomize=False, variant="encoder")
        self.assertLen(mixing.mixed_layers(encoder_only.decoder), 0)
        self.assertEqual([p.label for p in encoder_only.proportion_layers()], ["encoder/layer_0"])
        signature = model.serve_function().input_signature[0]
        self.assertEqual(sorted(signature), ["length", "tokens"])

    @parameterized.expand([(True,), (False,)])
    def test_gradient_cut(self, cut):
        model, paths = _model(self, cut=cut)
        features, labels = helpers.training_batch(model, paths)
        features = dict(features, domain=tf.zeros_like(features["domain"]))  # One domain.
        proportions = [layer.kernel for layer in model.proportion_layers()]
        refs = {v.ref() for v in proportions}
        translator = [v for v in model.trainable_weights if v.ref() not in refs]
        self.assertLen(translator, len(model.trainable_weights) - 2)
        with tf.GradientTape(persistent=True) as tape:
            outputs, _ = model(features, labels, training=True)
            gen = _gen_loss(model, outputs, labels)
            mix = outputs["mixing_loss"]
            loss, normalizer, _ = model.compute_loss(outputs, labels, training=True)
        self.assertAllClose(loss, gen + mix * normalizer, atol=1e-4)
        self.assertGreater(mix, 0)

        def _norms(target, variables):
            gradients = tape.gradient(target, variables)
            return [
                0.0 if g is None else float(tf.norm(tf.convert_to_tensor(g))) for g in gradients
            ]

        gen_to_proportions = _norms(gen, proportions)
        mix_to_translator = _norms(mix, translator)
        self.assertTrue(all(n > 0 for n in _norms(mix, proportions)))
        self.assertGreater(sum(_norms(gen, translator)), 0)
        # A batch of one domain trains every domain's copy (D_j >= eps / k > 0).
        kernel = mixing.mixed_layers(model.encoder)[0].kernel
        gradient = tape.gradient(gen, kernel)
        self.assertTrue(all(np.abs(gradient[:, j]).max() > 0 for j in range(3)))
        if cut:
            self.assertEqual(gen_to_proportions, [0.0] * len(proportions))
            self.assertEqual(mix_to_translator, [0.0] * len(translator))
        else:
            self.assertTrue(all(n > 0 for n in gen_to_proportions), gen_to_proportions)
            self.assertGreater(sum(mix_to_translator), 0)
            embedding = model.features_inputter.word_inputter.embedding
            self.assertGreater(_norms(mix, [embedding])[0], 0)

    def test_uniform_proportions_equal_the_averaged_transformer(self):
        """eps = 1: every word's proportions are 1/k, i.e. the average of the copies."""
        model, paths = _model(self, epsilon=1.0)
        plain = _plain_twin(model, paths)
        features = _features(model, labels=LABELS)
        plain_features = plain.features_inputter.make_features(
            features={"tokens": features["tokens"], "length": features["length"]}
        )
        labels = _labels(model)
        outputs, predictions = model(features, labels, training=False)
        plain_outputs, plain_predictions = plain(plain_features, _labels(plain), training=False)
        self.assertAllClose(outputs["logits"], plain_outputs["logits"], atol=1e-4)
        _assert_same_translations(self, predictions, plain_predictions)
        # The domain copies differ: only their average matters here.
        kernel = mixing.mixed_layers(model.encoder)[0].kernel
        self.assertNotAllClose(kernel[:, 0], kernel[:, 1])

    def test_one_domain_equals_a_plain_transformer(self):
        model, paths = _model(self, domains=["medical"])
        self.assertEqual(model.num_domains, 1)
        plain = _plain_twin(model, paths)
        features = _features(model, labels=["medical", "generic", "medical", "generic"])
        plain_features = plain.features_inputter.make_features(
            features={"tokens": features["tokens"], "length": features["length"]}
        )
        outputs, _ = model(features, _labels(model), training=False)
        plain_outputs, _ = plain(plain_features, _labels(plain), training=False)
        self.assertAllClose(outputs["logits"], plain_outputs["logits"], atol=1e-4)
        _assert_same_translations(self, model.infer(features), plain.infer(plain_features))

    def test_proportions_change_the_output(self):
        model, _ = _model(self)
        features = _features(model)
        before = model.infer(features)["log_probs"]
        layer = model.proportion_layers()[0]
        layer.kernel.assign(layer.kernel * 3.0)
        self.assertNotAllClose(model.infer(features)["log_probs"], before)

    def test_incremental_decoding_equals_the_full_decoder(self):
        """Step by step (cached keys/values) = the full decoder on the prefix."""
        model, _ = _model(self)
        features, labels = _features(model), _labels(model)
        memory, _, memory_length = model.encoder(
            model.features_inputter(features), sequence_length=features["length"]
        )
        targets = model.labels_inputter(labels)
        state = model.decoder.initial_state(memory=memory, memory_sequence_length=memory_length)
        full, _, _ = model.decoder(targets, labels["length"], state=state)

        @tf.function
        def _steps(targets):
            state = model.decoder.initial_state(memory=memory, memory_sequence_length=memory_length)
            logits = []
            for step in range(targets.shape[1]):
                step_logits, state, _ = model.decoder(
                    targets[:, step], tf.constant(step), state=state
                )
                logits.append(step_logits)
            return tf.stack(logits, axis=1)

        steps = _steps(targets)
        # Padding positions differ (the full decoder masks padded keys): compare the rest.
        for i, length in enumerate(labels["length"].numpy()):
            self.assertAllClose(steps[i, :length], full[i, :length], atol=1e-5)

    def test_beam_search_scores_equal_rescoring(self):
        """The beam's scores are the full decoder's log-likelihood of its outputs."""
        model, _ = _model(self, params={"beam_width": 3})
        # No end token: every hypothesis is a full-length prefix (OpenNMT-tf's score of
        # a finished hypothesis is not its plain log-likelihood).
        bias = model.decoder.output_layer.bias
        bias.assign(tf.tensor_scatter_nd_update(bias, [[2]], [-50.0]))
        features = _features(model)
        predictions = tf.function(model.infer)(features)
        lengths = predictions["length"][:, 0].numpy()
        self.assertAllEqual(lengths, [PARAMS["maximum_decoding_length"]] * len(SENTENCES))
        tokens = [list(t[0, :n]) for t, n in zip(predictions["tokens"].numpy(), lengths)]
        labels = _labels(model, [[t.decode() for t in row] for row in tokens])
        outputs, _ = model(features, labels, training=False)
        log_probs = tf.nn.log_softmax(outputs["logits"]).numpy()
        ids_out = labels["ids_out"].numpy()
        for i, length in enumerate(lengths):
            expected = sum(log_probs[i, t, ids_out[i, t]] for t in range(length))
            self.assertAllClose(predictions["log_probs"][i, 0], expected, atol=1e-4)

    @parameterized.expand([(1,), (3,)])
    def test_batch_equals_alone(self, beam_width):
        model, _ = _model(self, params={"beam_width": beam_width})
        batch = model.infer(_features(model))
        for i, sentence in enumerate(SENTENCES):
            alone = model.infer(_features(model, [sentence]))
            length = alone["length"][0, 0]
            self.assertEqual(batch["length"][i, 0], length)
            self.assertAllEqual(batch["tokens"][i, 0, :length], alone["tokens"][0, 0, :length])
            self.assertAllClose(batch["log_probs"][i], alone["log_probs"][0], atol=1e-4)

    def test_labels_are_ignored_at_inference(self):
        model, _ = _model(self)
        unlabelled = _features(model)
        self.assertAllEqual(unlabelled["domain"], [-1] * len(SENTENCES))
        expected = model.infer(unlabelled)
        for labels in (LABELS, ["medical"] * 4, ["software"] * 4):
            _assert_same_translations(self, model.infer(_features(model, labels=labels)), expected)

    def test_mixing_loss_ignores_padding_and_generic_sentences(self):
        model, _ = _model(self)
        features = _features(model, ["the big cell", "a host is here now"], ["medical", "generic"])
        labels = _labels(model, [["le", "grand"], ["un", "hote", "est", "ici", "maintenant"]])
        outputs, _ = model(features, labels, training=True)
        alone = _features(model, ["the big cell"], ["medical"])
        alone_outputs, _ = model(alone, _labels(model, [["le", "grand"]]), training=True)
        self.assertGreater(alone_outputs["mixing_loss"], 0)
        self.assertAllClose(outputs["mixing_loss"], alone_outputs["mixing_loss"], atol=1e-5)
        # The mean over every (word, layer) pair: 3 source words x (encoder layer +
        # decoder memory) + 3 target positions (<s> le grand) x decoder layer.
        records = model.compute_proportions(alone, _labels(model, [["le", "grand"]]))
        self.assertEqual(
            [(r.label, r.proportions.shape[1]) for r in records],
            [("encoder/layer_0", 3), ("decoder/layer_0", 3), ("decoder/layer_0/memory", 3)],
        )
        values = [-np.log(r.proportions[0, :, 0]) for r in records]  # medical = id 0
        self.assertAllClose(alone_outputs["mixing_loss"], np.mean(values), atol=1e-5)
        # Generic sentences only: L_mix is 0 and the loss is L_gen.
        generic = _features(model, ["the big cell"], ["generic"])
        labels = _labels(model, [["le", "grand"]])
        generic_outputs, _ = model(generic, labels, training=True)
        self.assertEqual(generic_outputs["mixing_loss"], 0)
        self.assertAllClose(
            model.compute_loss(generic_outputs, labels)[0],
            _gen_loss(model, generic_outputs, labels),
        )
        # Evaluation reports L_gen (a translation perplexity).
        loss, _ = model.evaluate(alone, _labels(model, [["le", "grand"]]))
        gen = opennmt.models.SequenceToSequence.compute_loss(
            model, alone_outputs, _labels(model, [["le", "grand"]]), training=False
        )
        self.assertAllClose(loss, gen, atol=1e-5)

    def test_files_without_labels(self):
        model, paths = _model(self)
        alone = next(iter(model.features_inputter.make_inference_dataset(paths["test_src"], 100)))
        self.assertAllEqual(alone["domain"], np.full(alone["length"].shape, -1))
        pair = [paths["test_src"], paths["test_domain"]]
        labelled = next(iter(model.features_inputter.make_inference_dataset(pair, 100)))
        self.assertNotAllEqual(labelled["domain"], alone["domain"])
        _assert_same_translations(self, model.infer(alone), model.infer(labelled))
        # Evaluation without labels (L_gen only): OpenNMT-tf's nested inputters need a
        # label entry in a flat file list, the constant generic label is one.
        dataset = model.examples_inputter.make_evaluation_dataset(
            [paths["test_src"], "domain:generic"], paths["test_tgt"], batch_size=8
        )
        features, labels = next(iter(dataset))
        loss, _ = model.evaluate(features, labels)
        self.assertTrue(np.isfinite(loss[0]))
        # Other multi-domain models keep their labels required everywhere.
        ldr, _ = helpers.build_model(self, "ldr_transformer")
        self.assertIn("domain", ldr.features_inputter.input_signature())
        with self.assertRaisesRegex(UserError, "expected a source file and an aligned domain"):
            ldr.features_inputter.make_inference_dataset(paths["test_src"], 100)

    def test_bad_input(self):
        for epsilon in (-0.1, 1.01):
            with self.assertRaisesRegex(UserError, r"^epsilon must be in \[0, 1\], got "):
                models.mixing_transformer(epsilon=epsilon, **helpers.TINY)
        with self.assertRaisesRegex(UserError, "unknown mixing Transformer variant 'decoder'"):
            models.mixing_transformer(variant="decoder", **helpers.TINY)
        model, paths = _model(self, randomize=False)
        for source in (paths["train_src"], [paths["train_src"]]):
            with self.assertRaisesRegex(UserError, r"^training needs domain labels \(this model"):
                model.examples_inputter.make_training_dataset(
                    source, paths["train_tgt"], batch_size=4
                )
        legal = os.path.join(self.get_temp_dir(), "legal.domain")
        corpus.write_lines(legal, ["legal"] * len(open(paths["train_src"]).readlines()))
        with self.assertRaisesRegex(UserError, r"legal.domain:1: .*'legal'"):
            model.examples_inputter.make_training_dataset(
                [paths["train_src"], legal], paths["train_tgt"], batch_size=4
            )
        with self.assertRaisesRegex(tf.errors.InvalidArgumentError, "Unknown domain label 'legal'"):
            _features(model, ["cell"], ["legal"])
        with self.assertRaisesRegex(UserError, "cannot be exported to CTranslate2: its per-domain"):
            folding.check_foldable(model)
        exporter = opennmt.utils.exporters.make_exporter("ctranslate2")
        with self.assertRaisesRegex(UserError, "cannot export the mixing Transformer"):
            model.export(os.path.join(self.get_temp_dir(), "ct2"), exporter=exporter)
        self.assertFalse(os.path.exists(os.path.join(self.get_temp_dir(), "ct2")))
        for mode in ("procedure1", "domains", "general"):
            other = models.mixing_transformer(**helpers.TINY)
            with self.assertRaisesRegex(UserError, "trains jointly .* got '%s'" % mode):
                other.initialize(corpus.data_config(paths), params={"domain_training": mode})
        other = models.mixing_transformer(**helpers.TINY)
        with self.assertRaisesRegex(UserError, "domains"):
            other.initialize({k: v for k, v in corpus.data_config(paths).items() if k != "domains"})


# A corpus whose domains differ by their context words; the other source words are
# shared, and translated per domain (as the paper's ambiguous words), so that the
# translator must carry the context into their representations.
_CONTEXT = {
    "medical": ["patient", "doctor", "dose", "fever", "clinic"],
    "religious": ["prayer", "church", "saint", "faith", "temple"],
    "software": ["file", "click", "server", "code", "install"],
}
_SHARED = ["the", "a", "big", "small", "red", "is", "here", "now", "and", "of"]


def _translate(word, domain):
    return word.upper() if word not in _SHARED else "%s_%s" % (word.upper(), domain[:3])


def _context_corpus(directory, count, seed):
    rng = random.Random(seed)
    lines = {"src": [], "tgt": [], "domain": []}
    for i in range(count):
        domain = sorted(_CONTEXT)[i % len(_CONTEXT)]
        words = [rng.choice(_CONTEXT[domain]) for _ in range(2)]
        words += [rng.choice(_SHARED) for _ in range(rng.randint(2, 4))]
        rng.shuffle(words)
        lines["src"].append(" ".join(words))
        lines["tgt"].append(" ".join(_translate(w, domain) for w in words))
        lines["domain"].append(domain)
    os.makedirs(directory, exist_ok=True)
    paths = {}
    for key, values in lines.items():
        paths[key] = os.path.join(directory, "train." + key)
        corpus.write_lines(paths[key], values)
    words = sorted(set(_SHARED).union(*_CONTEXT.values()))
    targets = sorted({_translate(w, d) for w in words for d in _CONTEXT})
    for key, vocab in (("src_vocab", words), ("tgt_vocab", targets)):
        paths[key] = os.path.join(directory, key)
        corpus.write_lines(paths[key], ["<blank>", "<s>", "</s>"] + vocab)
    return paths


@pytest.mark.slow
class MixingLearningTest(tf.test.TestCase):
    def test_proportions_learn_the_domain(self):
        tf.random.set_seed(1)
        paths = _context_corpus(os.path.join(self.get_temp_dir(), "context"), 300, seed=0)
        model = models.mixing_transformer(
            num_layers=2, num_units=32, num_heads=2, ffn_inner_dim=64, dropout=0.0
        )
        model.initialize(
            {
                "domains": sorted(_CONTEXT),
                "source_vocabulary": paths["src_vocab"],
                "target_vocabulary": paths["tgt_vocab"],
            },
            params={"beam_width": 1},
        )
        model.create_variables()
        dataset = model.examples_inputter.make_training_dataset(
            [paths["src"], paths["domain"]],
            paths["tgt"],
            batch_size=32,
            batch_type="examples",
            shuffle_buffer_size=1000,
        )
        optimizer = tf.keras.optimizers.Adam(0.01)

        @tf.function
        def _step(features, labels):
            loss, gradients = model.compute_gradients(features, labels, optimizer)
            optimizer.apply_gradients(zip(gradients, model.trainable_weights))
            return loss

        for step, (features, labels) in enumerate(dataset):
            loss = _step(features, labels)
            if step == 100:
                break
        self.assertTrue(math.isfinite(float(loss)))

        test = _context_corpus(os.path.join(self.get_temp_dir(), "test"), 60, seed=1)
        data = model.examples_inputter.make_evaluation_dataset(
            [test["src"], test["domain"]], test["tgt"], batch_size=60
        )
        features, labels = next(iter(data))
        domain = features["domain"].numpy()
        lengths = {"source": features["length"].numpy(), "target": labels["length"].numpy()}
        accuracy = {}
        for record in model.compute_proportions(features, labels):
            predicted = np.argmax(record.proportions.numpy(), axis=-1)
            hits = [
                predicted[i, t] == domain[i]
                for i in range(len(domain))
                for t in range(lengths[record.side][i])
            ]
            accuracy[record.label] = np.mean(hits)
        chance = 1 / len(_CONTEXT)
        # The first layers see words (and positions) alone: the context words give the
        # domain away, the shared ones cannot. The upper layers see the context.
        self.assertLen(accuracy, 6)
        for value in accuracy.values():
            self.assertGreater(value, chance + 0.2, accuracy)
        # Encoder layer 1 sees the context: well above chance (0.33), though W^O is mixed too
        # (section 3.2), so that its input is a mixture of per-domain projections learnt from
        # fewer updates per copy in these 100 steps. The two training stacks start from other
        # random weights and batches (TensorFlow's generators differ): 0.78 to 0.83 measured.
        self.assertGreater(accuracy["encoder/layer_1"], chance + 0.4, accuracy)
        self.assertGreater(np.mean(list(accuracy.values())), chance + 0.4, accuracy)


@pytest.mark.slow
class MixingRunnerTest(tf.test.TestCase):
    def test_ldr_main_runner_with_train_corpora(self):
        """ldr-main's Runner gives the labels of per-domain corpora to L_mix."""
        from ldr_opennmt.training.runner import Runner

        directory = self.get_temp_dir()
        paths = corpus.write_corpus(os.path.join(directory, "data"), count=20)
        sizes = {"medical": 16, "religious": 16, "software": 16}
        config = {
            "model_dir": os.path.join(directory, "mixing"),
            "data": {
                "source_vocabulary": paths["src_vocab"],
                "target_vocabulary": paths["tgt_vocab"],
                "train_corpora": corpus.write_domain_corpora(
                    os.path.join(directory, "data"), sizes
                ),
            },
            "params": {"optimizer": "Adam", "learning_rate": 0.01},
            "train": {"batch_size": 8, "max_step": 2, "save_checkpoints_steps": 2},
        }
        runner = Runner(lambda: models.mixing_transformer(**helpers.TINY), config, seed=1)
        runner.train()
        self.assertTrue(tf.train.latest_checkpoint(config["model_dir"]).endswith("ckpt-2"))
        with open(os.path.join(config["model_dir"], "domains.json")) as f:
            self.assertIn("medical", f.read())


@pytest.mark.e2e
class MixingOnmtMainTest(tf.test.TestCase):
    # A per-family run of stock onmt-main, which tests/upstream/test_onmt_main.py runs with
    # LDR; a file without labels, and labels ignored, are tested in process above
    # (MixingTransformerTest).
    @helpers.skip_unless_full("about 30 s: two onmt-main inference runs of the mixing family")
    def test_translate_without_labels(self):
        # Stock onmt-main translates a file without labels with a family that reads none, and
        # the same with labels. The checkpoint is made in process (the family's training is
        # tested in process above, onmt-main's training with LDR in tests/upstream/
        # test_onmt_main.py): what is tested is onmt-main's two inference runs. The tiny size
        # (one layer of 16 units; model_defs/small/mixing_transformer.py is checked in
        # tests/experiments/test_systems.py).
        directory = self.get_temp_dir()
        paths = corpus.write_corpus(os.path.join(directory, "data"), count=30)
        model_dir = os.path.join(directory, "mixing")
        model, _ = helpers.build_model(self, "mixing_transformer")
        opennmt.utils.checkpoint.Checkpoint(model, model_dir=model_dir).save(step=4)
        with open(os.path.join(model_dir, "model_description.py"), "w") as f:
            f.write(
                "from ldr_opennmt import registry\n"
                "model = registry.get('mixing_transformer').build_tiny\n"
            )
        config = {
            "model_dir": model_dir,
            "data": corpus.data_config(paths),
            # Random weights: a short length limit, as the in-process tests decode.
            "params": {"beam_width": 2, "maximum_decoding_length": 6},
            "infer": {"batch_size": 8},
        }
        path = os.path.join(directory, "mixing.yml")
        with open(path, "w") as f:
            yaml.safe_dump(config, f)
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONWARNINGS="ignore")
        onmt_main = os.path.join(os.path.dirname(sys.executable), "onmt-main")

        def _infer(*features):
            return subprocess.run(
                [onmt_main, "--config", path, "--auto_config", "infer", "--features_file"]
                + list(features),
                capture_output=True,
                text=True,
                cwd=ROOT,
                env=env,
            )

        alone = _infer(paths["test_src"])
        self.assertEqual(alone.returncode, 0, alone.stderr[-3000:])
        self.assertIn("Restored checkpoint %s/ckpt-4" % model_dir, alone.stderr)
        with open(paths["test_src"]) as f:
            self.assertLen(alone.stdout.splitlines(), len(f.read().splitlines()))
        labelled = _infer(paths["test_src"], paths["test_domain"])
        self.assertEqual(labelled.returncode, 0, labelled.stderr[-3000:])
        self.assertEqual(labelled.stdout, alone.stdout)


if __name__ == "__main__":
    tf.test.main()
