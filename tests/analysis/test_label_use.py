"""Where the domain knowledge sits: words in tokenized sentences, LDR region shares and mixing
proportions at the contrastive items' ambiguous words."""

import numpy as np
import tensorflow as tf

from ldr_opennmt.analysis import label_use, proportions
from ldr_opennmt.analysis.label_use import JOINER as J
from ldr_opennmt.evaluation.contrastive.lexicon import english_key, french_key
from ldr_opennmt.layers.mixing import SOURCE, TARGET
from tests.layers.test_ldr import _make_embedder


class WordsTest(tf.test.TestCase):
    def test_token_words_follow_the_joiners(self):
        tokens = ["(" + J, "O", J + "8" + J, "0", J + ")", "Deli" + J, "very", "now"]
        self.assertEqual(
            label_use.token_words(tokens),
            [("(O80)", [0, 1, 2, 3, 4]), ("Delivery", [5, 6]), ("now", [7])],
        )
        # A lone joiner attaches to the word before it and joins nothing after it.
        self.assertEqual(label_use.token_words(["a", J, "b"]), [("a", [0, 1]), ("b", [2])])

    def test_word_positions_fold_case_and_plural(self):
        tokens = ["<s>", "Deli" + J, "veries", "of", "the", "delivery", J + "."]
        self.assertEqual(label_use.word_positions(tokens, "delivery", english_key), [1, 2, 5, 6])
        self.assertEqual(label_use.word_positions(tokens, "delivery"), [5, 6])  # no folding
        self.assertEqual(label_use.word_positions(tokens, "the"), [4])
        self.assertEqual(label_use.word_positions(tokens, "absent"), [])
        french = ["Les", "accouche" + J, "ments"]
        self.assertEqual(label_use.word_positions(french, "accouchement", french_key), [1, 2])


class RegionSharesTest(tf.test.TestCase):
    def test_a_region_with_a_zero_fusion_block_moves_nothing(self):
        embedder = _make_embedder(self)  # vocabulary <blank> <s> </s> x y; domains a b c
        embedder.domain_kernels[1].assign(tf.zeros_like(embedder.domain_kernels[1]))
        shares = label_use.region_shares(embedder, [["x", "y", "oov"], ["x"]], [1, 0])
        self.assertEqual(shares[1], (0.0, 2))  # the unknown token is left out
        generic = embedder.fused_table(-1).numpy()[3]
        region = embedder.fused_table(0).numpy()[3] - generic
        self.assertAllClose(shares[0][0], np.linalg.norm(region) / np.linalg.norm(generic))
        self.assertEqual(shares[0][1], 1)
        self.assertNotIn(2, shares)
        # Generic sentences count for no domain.
        self.assertEqual(label_use.region_shares(embedder, [["x"]], [-1]), {})

    def test_shares_scale_with_the_region(self):
        embedder = _make_embedder(self)
        before = label_use.region_shares(embedder, [["x", "y"]], [2])[2][0]
        embedder.domain_embeddings[2].assign(embedder.domain_embeddings[2] * 3)
        after = label_use.region_shares(embedder, [["x", "y"]], [2])[2][0]
        self.assertAllClose(after, 3 * before)


def _result():
    """Two items (domains 0 and 1), one encoder and one decoder layer of two domains."""
    source = [["Night", "blind" + J, "ness"], ["save", "the", "file"]]
    target = [["<s>", "Cécité", "nocturne"], ["<s>", "enregistrer", "le", "fichier"]]
    encoder = [
        np.array([[0.9, 0.1], [0.2, 0.8], [0.4, 0.6]], np.float32),  # word: 1 and 2
        np.array([[0.3, 0.7], [0.6, 0.4], [0.1, 0.9]], np.float32),  # word: 0
    ]
    decoder = [
        # Position 0 (<s>) predicts "Cécité": the word's position.
        np.array([[0.8, 0.2], [0.3, 0.7], [0.4, 0.6]], np.float32),
        np.array([[0.1, 0.9], [0.9, 0.1], [0.2, 0.8], [0.4, 0.6]], np.float32),
    ]
    return proportions.Proportions(
        domains=["medical", "software"],
        epsilon=0.0,
        layers=[
            proportions.Layer("encoder/layer_0", SOURCE, encoder),
            proportions.Layer("decoder/layer_0", TARGET, decoder),
        ],
        tokens={SOURCE: source, TARGET: target},
        domain_ids=np.array([0, 1]),
        labelled=True,
    )


ITEMS = [
    {"word": "blindness", "translation": "cécité", "domain": "medical"},
    {"word": "save", "translation": "enregistrer", "domain": "software"},
]


class ItemProportionsTest(tf.test.TestCase):
    def test_positions_of_the_word_and_of_what_predicts_its_translation(self):
        positions = label_use.item_positions(_result(), ITEMS, english_key, french_key)
        self.assertEqual(positions[SOURCE], [[1, 2], [0]])
        self.assertEqual(positions[TARGET], [[0], [0]])

    def test_word_and_context_are_counted_apart(self):
        encoder, decoder = label_use.item_proportions(_result(), ITEMS, english_key, french_key)
        # Item 0 (domain 0): word rows argmax 1, 1 (misses); context row argmax 0 (hit).
        # Item 1 (domain 1): word row argmax 1 (hit); context rows argmax 0, 1.
        self.assertEqual(encoder.label, "encoder/layer_0")
        self.assertEqual((encoder.word, encoder.word_correct), (3, 1))
        self.assertEqual((encoder.other, encoder.other_correct), (3, 2))
        self.assertAllClose(encoder.word_mean, (0.2 + 0.4 + 0.7) / 3)
        self.assertAllClose(encoder.other_mean, (0.9 + 0.4 + 0.9) / 3)
        self.assertEqual((decoder.word, decoder.word_correct), (2, 2))
        self.assertEqual((decoder.other, decoder.other_correct), (5, 2))
        self.assertAllClose(decoder.word_mean, (0.8 + 0.9) / 2)

    def test_an_item_whose_word_is_not_found_counts_for_nothing(self):
        items = [dict(ITEMS[0], word="absent", translation="absent"), ITEMS[1]]
        encoder, decoder = label_use.item_proportions(_result(), items, english_key, french_key)
        self.assertEqual((encoder.word, encoder.other), (1, 2))
        self.assertEqual((decoder.word, decoder.other), (1, 3))


if __name__ == "__main__":
    tf.test.main()
