"""Target Token Mixing: the domain token in the targets, forced or predicted, stripped."""

import os

import numpy as np
import opennmt
import pytest
import tensorflow as tf
from parameterized import parameterized

from ldr_opennmt.errors import UserError
from ldr_opennmt.models import ttm
from ldr_opennmt.training.runner import Runner
from tests import corpus, helpers

DOMAINS = corpus.DOMAINS  # medical, religious, software
MEDICAL, RELIGIOUS, SOFTWARE = ttm.domain_tokens(DOMAINS)
SENTENCES = ["the big cell", "a host is here", "spirit"]


def _corpus(test, tokens=tuple(ttm.domain_tokens(DOMAINS)), name="corpus"):
    """The tiny corpus, its target vocabulary ending with :obj:`tokens`."""
    paths = corpus.write_corpus(os.path.join(test.get_temp_dir(), name), count=10)
    with open(paths["tgt_vocab"], "a", encoding="utf-8") as f:
        f.writelines(token + "\n" for token in tokens)
    return paths


def _model(test, params=None, strip=True, seed=7):
    paths = _corpus(test)
    model = ttm.TTMTransformer(strip_domain_tokens=strip, **helpers.TINY)
    model.initialize(
        corpus.data_config(paths),
        params=dict({"beam_width": 1, "maximum_decoding_length": 6}, **(params or {})),
    )
    model.create_variables()
    helpers.randomize_weights(model, seed)
    return model, paths


def _token_id(model, token):
    return int(model.labels_inputter.tokens_to_ids.lookup(tf.constant(token)))


def _constant_output(model, biases):
    """Makes the decoder's logits the same at every step: zero output kernel, the
    given ``{token: bias}`` (0 for the other tokens)."""
    layer = model.decoder.output_layer
    layer.kernel.assign(tf.zeros_like(layer.kernel))
    bias = np.zeros(layer.bias.shape, np.float32)
    for token, value in biases.items():
        bias[_token_id(model, token)] = value
    layer.bias.assign(bias)
    return tf.nn.log_softmax(bias).numpy()


def _texts(predictions, hypothesis=0):
    tokens = predictions["tokens"].numpy()[:, hypothesis]
    length = predictions["length"].numpy()[:, hypothesis]
    return [[t.decode() for t in row[:n]] for row, n in zip(tokens, length)]


def _write_examples(directory, examples):
    """Writes (source, target, label) triples; returns [src, domain], tgt paths."""
    os.makedirs(directory, exist_ok=True)
    files = []
    for i, ext in enumerate(("src", "tgt", "domain")):
        path = os.path.join(directory, "data." + ext)
        corpus.write_lines(path, [example[i] for example in examples])
        files.append(path)
    return [files[0], files[2]], files[1]


EXAMPLES = [
    ("the big cell", "le grand cellule", "medical"),
    ("a host", "un hote", "generic"),
    ("spirit", "esprit", "software"),
    ("cell", "", "religious"),  # An empty target: its domain token is no word.
    ("host", "", "generic"),
]


class TTMTrainingFeaturesTest(tf.test.TestCase):
    def test_domain_tokens(self):
        self.assertEqual(ttm.domain_tokens(["medical", "it"]), ["<domain:medical>", "<domain:it>"])

    def test_labelled_targets_start_with_their_domain_token(self):
        model, _ = _model(self)
        features_files, target = _write_examples(self.get_temp_dir(), EXAMPLES)
        dataset = model.examples_inputter.make_evaluation_dataset(
            features_files, target, batch_size=1
        )
        start, end = _token_id(model, "<s>"), _token_id(model, "</s>")
        seen = 0
        for (features, labels), (_, words, label) in zip(dataset, EXAMPLES):
            words = words.split()
            prefix = [] if label == "generic" else [ttm.domain_token(label)]
            ids = [_token_id(model, t) for t in prefix + words]
            self.assertEqual([t.decode() for t in labels["tokens"].numpy()[0]], prefix + words)
            self.assertAllEqual(labels["ids"][0], [start] + ids)
            self.assertAllEqual(labels["ids_out"][0], ids + [end])
            self.assertEqual(int(labels["length"][0]), len(ids) + 1)
            seen += 1
        self.assertEqual(seen, len(EXAMPLES))

    def test_training_drops_empty_targets_despite_the_token(self):
        model, _ = _model(self)
        features_files, target = _write_examples(self.get_temp_dir(), EXAMPLES)
        dataset = model.examples_inputter.make_training_dataset(
            features_files, target, batch_size=8, shuffle_buffer_size=1, single_pass=True
        )
        _, labels = next(iter(dataset))
        first = sorted(t.decode() for t in labels["tokens"].numpy()[:, 0])
        self.assertEqual(first, [MEDICAL, SOFTWARE, "un"])

    def test_training_needs_labels(self):
        model, paths = _model(self)
        with self.assertRaisesRegex(UserError, "needs domain labels for training"):
            model.examples_inputter.make_training_dataset(
                paths["train_src"], paths["train_tgt"], batch_size=4
            )

    def test_missing_vocabulary_tokens_are_named_in_one_line(self):
        paths = _corpus(self, tokens=[RELIGIOUS], name="partial")
        model = ttm.ttm_transformer(**helpers.TINY)
        with self.assertRaises(UserError) as context:
            model.initialize(corpus.data_config(paths))
        message = str(context.exception)
        self.assertNotIn("\n", message)
        self.assertTrue(message.startswith(paths["tgt_vocab"] + ": "), message)
        self.assertIn("%s %s" % (MEDICAL, SOFTWARE), message)
        self.assertNotIn(RELIGIOUS, message)
        self.assertIn("append them to the vocabulary file, one token per line", message)

    def test_only_joint_training(self):
        paths = _corpus(self)
        model = ttm.ttm_transformer(**helpers.TINY)
        with self.assertRaisesRegex(UserError, "domain_training must be joint"):
            model.initialize(corpus.data_config(paths), params={"domain_training": "procedure1"})

    def test_undeclared_labels_fail_with_the_label_file_error(self):
        model, _ = _model(self)
        examples = [("cell", "cellule", "medical"), ("host", "hote", "legal")]
        features_files, _ = _write_examples(self.get_temp_dir(), examples)
        with self.assertRaises(UserError) as context:
            model.features_inputter.make_inference_dataset(features_files, batch_size=2)
        message = str(context.exception)
        self.assertNotIn("\n", message)
        self.assertRegex(message, r"^%s:2: .*'legal'" % features_files[1])


class StripTokensTest(tf.test.TestCase):
    def test_every_domain_token_is_removed(self):
        rows = [
            [MEDICAL, "le", "grand", "</s>", "</s>"],
            ["le", SOFTWARE, "grand", MEDICAL, "</s>"],
            [RELIGIOUS, RELIGIOUS, "esprit", "</s>", "</s>"],
            ["esprit", "</s>", MEDICAL, "</s>", "</s>"],  # After the length: untouched.
            [SOFTWARE, SOFTWARE, SOFTWARE, SOFTWARE, SOFTWARE],
        ]
        length = [3, 4, 3, 1, 5]
        alignment = np.arange(5 * 4 * 2, dtype=np.float32).reshape([5, 1, 4, 2])
        predictions = ttm.strip_tokens(
            {
                "tokens": tf.constant([[row] for row in rows]),
                "length": tf.constant([[n] for n in length], tf.int32),
                "log_probs": tf.constant([[-1.0]] * 5),
                "alignment": tf.constant(alignment),
            },
            ttm.domain_tokens(DOMAINS),
        )
        self.assertEqual(
            _texts(predictions), [["le", "grand"], ["le", "grand"], ["esprit"], ["esprit"], []]
        )
        self.assertAllEqual(predictions["length"], [[2], [2], [1], [1], [0]])
        self.assertAllEqual(predictions["tokens"][0, 0, 2:], ["</s>"] * 3)
        self.assertAllEqual(predictions["log_probs"], [[-1.0]] * 5)
        # The alignment rows follow their tokens.
        self.assertAllEqual(predictions["alignment"][0, 0, :2], alignment[0, 0, 1:3])
        self.assertAllEqual(predictions["alignment"][1, 0, :2], alignment[1, 0, [0, 2]])
        self.assertAllEqual(predictions["alignment"][2, 0, :1], alignment[2, 0, 2:3])


class TTMDecodingTest(tf.test.TestCase):
    @parameterized.expand([(1,), (2,)])
    def test_generic_predicts_labelled_forces_the_first_token(self, beam_width):
        params = {"beam_width": beam_width, "num_hypotheses": beam_width}
        raw_model, _ = _model(self, params=params, strip=False)
        model, _ = _model(self, params=params)
        for m in (raw_model, model):
            # The software token wins every step unless forced.
            _constant_output(m, {SOFTWARE: 8.0, "cellule": 4.0, "</s>": 2.0})
        labels = ["generic", "medical", "religious"]
        features = helpers.source_features(model, SENTENCES, labels)
        raw = raw_model.infer(features)
        stripped = model.infer(features)
        texts = _texts(raw)
        self.assertEqual([text[0] for text in texts], [SOFTWARE, MEDICAL, RELIGIOUS])
        # Then the model goes on with its favourite (a domain token, again).
        self.assertEqual(texts[1][1:], [SOFTWARE] * 5)
        # Every hypothesis of a labelled sentence starts with the forced token.
        for hypothesis in range(1, beam_width):
            texts = _texts(raw, hypothesis)
            self.assertEqual([text[0] for text in texts[1:]], [MEDICAL, RELIGIOUS])
        # Every domain token is stripped: nothing is left, the lengths say so.
        self.assertEqual(_texts(stripped), [[], [], []])
        self.assertAllEqual(stripped["length"][:, 0], [0, 0, 0])
        self.assertAllEqual(stripped["alignment"].shape[:2], [3, beam_width])
        # The forced token costs nothing: the score is that of the 5 tokens after it.
        log_prob = _constant_output(model, {SOFTWARE: 8.0, "cellule": 4.0, "</s>": 2.0})
        step = log_prob[_token_id(model, SOFTWARE)]
        self.assertAllClose(stripped["log_probs"][:, 0], [6 * step, 5 * step, 5 * step])

    @parameterized.expand([(1,), (2,)])
    def test_words_after_the_forced_token_are_kept(self, beam_width):
        model, _ = _model(self, params={"beam_width": beam_width})
        _constant_output(model, {"cellule": 8.0, SOFTWARE: 7.0, "</s>": 2.0})
        features = helpers.source_features(model, SENTENCES, ["medical", "generic", "software"])
        predictions = model.infer(features)
        self.assertEqual(_texts(predictions), [["cellule"] * 5, ["cellule"] * 6, ["cellule"] * 5])
        self.assertAllEqual(predictions["length"][:, 0], [5, 6, 5])

    def test_unlabelled_source_file_is_generic(self):
        model, paths = _model(self, strip=False)
        _constant_output(model, {RELIGIOUS: 8.0, "</s>": 2.0})
        dataset = model.features_inputter.make_inference_dataset(paths["test_src"], batch_size=4)
        features = next(iter(dataset))
        self.assertAllEqual(features["domain"], [-1] * 4)
        self.assertEqual([text[0] for text in _texts(model.infer(features))], [RELIGIOUS] * 4)


class TTMScoreTest(tf.test.TestCase):
    def test_score_includes_the_domain_token(self):
        model, _ = _model(self)
        examples = EXAMPLES[:3]
        features_files, target = _write_examples(self.get_temp_dir(), examples)
        dataset = model.examples_inputter.make_evaluation_dataset(
            features_files, target, batch_size=3
        )
        features, labels = next(iter(dataset))
        results = model.score(features, labels)
        # The same targets with the token written as a word, scored by the stock code.
        targets = [
            ([] if label == "generic" else [ttm.domain_token(label)]) + words.split()
            for _, words, label in examples
        ]

        def _written(targets):
            return model.labels_inputter.make_features(features=helpers.padded_tokens(targets))

        expected = opennmt.models.SequenceToSequence.score(model, features, _written(targets))
        self.assertAllClose(results["score"], expected["score"], atol=1e-5)
        # Not the score of the words alone (the generic target has no token).
        words = opennmt.models.SequenceToSequence.score(
            model, features, _written([words.split() for _, words, _ in examples])
        )
        self.assertAllClose(results["score"][1], words["score"][1], atol=1e-5)
        self.assertNotAllClose(results["score"][0], words["score"][0], atol=1e-3)
        # The printed sentence and token-level scores are those of the words.
        result = {name: value.numpy()[0] for name, value in results.items()}
        line = model.format_score(result, params={"with_token_level": True})
        score, sentence, token_scores = line.split(" ||| ")
        self.assertEqual(sentence, "le grand cellule")
        self.assertAllClose(float(score), results["score"][0], atol=1e-4)
        self.assertAllClose(
            [float(s) for s in token_scores.split()], result["cross_entropy"][1:4], atol=1e-5
        )
        generic = {name: value.numpy()[1] for name, value in results.items()}
        self.assertEqual(model.format_score(generic).split(" ||| ")[1], "un hote")


@pytest.mark.slow
class TTMExportTest(tf.test.TestCase):
    @parameterized.expand([("stripped", True), ("raw", False)])
    def test_saved_model_predicts_or_forces(self, _, strip):
        model, _ = _model(self, params={"beam_width": 2}, strip=strip)
        log_prob = _constant_output(model, {SOFTWARE: 8.0, "cellule": 4.0, "</s>": 2.0})
        labels = ["generic", "medical", "software"]
        expected = model.infer(helpers.source_features(model, SENTENCES, labels))
        export_dir = os.path.join(self.get_temp_dir(), "export")
        model.export(export_dir)
        serve = tf.saved_model.load(export_dir).signatures["serving_default"]
        self.assertIn("domain", serve.structured_input_signature[1])
        outputs = serve(
            **helpers.padded_tokens([s.split() for s in SENTENCES]), domain=tf.constant(labels)
        )
        self.assertAllEqual(outputs["tokens"], expected["tokens"])
        self.assertAllEqual(outputs["length"], expected["length"])
        # Predicted for generic (6 steps count), forced for the labels (5 steps count).
        step = log_prob[_token_id(model, SOFTWARE)]
        self.assertAllClose(outputs["log_probs"][:, 0], [6 * step, 5 * step, 5 * step])
        texts = _texts(outputs)
        if strip:
            self.assertEqual(texts, [[], [], []])
            domain_tokens = [t.encode() for t in ttm.domain_tokens(DOMAINS)]
            self.assertFalse(np.isin(outputs["tokens"].numpy(), domain_tokens).any())
        else:
            self.assertEqual([text[0] for text in texts], [SOFTWARE, MEDICAL, SOFTWARE])


@pytest.mark.slow
class TTMRunnerTest(tf.test.TestCase):
    def test_train_translate_and_score(self):
        directory = self.get_temp_dir()
        paths = _corpus(self)
        config = {
            "model_dir": os.path.join(directory, "ttm"),
            "data": corpus.data_config(paths),
            "params": {"optimizer": "Adam", "learning_rate": 0.01, "beam_width": 2},
            "train": {"batch_size": 8, "batch_type": "examples", "max_step": 3},
        }
        runner = Runner(lambda: ttm.ttm_transformer(**helpers.TINY), config, seed=1)
        runner.train()
        self.assertTrue(tf.train.latest_checkpoint(config["model_dir"]).endswith("ckpt-3"))
        domain_tokens = set(ttm.domain_tokens(DOMAINS))
        predictions = os.path.join(directory, "predictions")
        for features in (paths["test_src"], [paths["test_src"], paths["test_domain"]]):
            runner.infer(features, predictions_file=predictions)
            lines = corpus.read_lines(predictions)
            self.assertLen(lines, len(corpus.read_lines(paths["test_src"])))
            self.assertFalse(domain_tokens & {t for line in lines for t in line.split()})
        scores = os.path.join(directory, "scores")
        runner.score(
            [paths["test_src"], paths["test_domain"]],
            predictions_file=paths["test_tgt"],
            output_file=scores,
        )
        lines = corpus.read_lines(scores)
        self.assertEqual(
            [line.split(" ||| ")[1] for line in lines], corpus.read_lines(paths["test_tgt"])
        )
        self.assertTrue(all(float(line.split(" ||| ")[0]) > 0 for line in lines))


if __name__ == "__main__":
    tf.test.main()
