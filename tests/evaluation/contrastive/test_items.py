"""The items of the contrastive test: variants, number, case and elision, caps, files."""

import collections
import json
import os
import re

import numpy as np
import tensorflow as tf
from parameterized import parameterized

from ldr_opennmt.data import corpus as corpus_lib
from ldr_opennmt.errors import UserError
from ldr_opennmt.evaluation.contrastive import items as items_lib
from ldr_opennmt.evaluation.contrastive import lexicon as lexicon_lib
from tests import corpus as tiny
from tests.evaluation.contrastive import common


def _sense(singular, plural=None):
    key = lexicon_lib.french_key(singular)
    return lexicon_lib.Sense(key, singular, plural or singular + "s", 1.0, 1.0, 10, "data")


def _entry(word, senses):
    """A lexicon entry where every pair of domains contrasts."""
    contrasts = collections.OrderedDict(
        (d, [o for o in senses if o != d and senses[o].translation != senses[d].translation])
        for d in senses
    )
    return lexicon_lib.Entry(word, senses, {d: o for d, o in contrasts.items() if o}, False)


class ItemsTest(tf.test.TestCase):
    def test_variants_replace_the_domain_translation(self):
        lexicon = lexicon_lib.find_translations(common.pairs(), min_count=3)
        examples = [
            ("test", "medical", 1, "the big cell", "le grand cellule"),
            ("test", "software", 2, "a spirit here", "un esprit ici"),
            ("test", "religious", 3, "the cell", "le cachot"),
            ("test", "religious", 4, "the cell", "le grand"),  # No translation in the reference.
            ("test", "medical", 5, "the red", "le rouge"),  # No lexicon word.
        ]
        items = items_lib.make_items(lexicon, examples, tiny.DOMAINS)
        self.assertEqual(
            [item["id"] for item in items],
            ["test.medical.1.cell", "test.religious.3.cell", "test.software.2.spirit"],
        )
        medical = items[0]
        self.assertEqual(medical["translation"], "cellule")
        self.assertEqual(
            medical["variants"],
            [
                {"domain": "religious", "translation": "cachot", "text": "le grand cachot"},
                {"domain": "software", "translation": "case", "text": "le grand case"},
            ],
        )
        # Religious and software both say "esprit": the only variant is medical's.
        self.assertEqual(
            [(v["domain"], v["text"]) for v in items[2]["variants"]], [("medical", "un alcool ici")]
        )

    def test_items_file_named_like_its_summary_is_refused(self):
        # The summary (STEM.md) used to be written over the items.
        out = os.path.join(self.get_temp_dir(), "items.md")
        with self.assertRaisesRegex(
            UserError, "^%s: the items file would be replaced" % re.escape(out)
        ):
            items_lib.build_items(os.path.join(self.get_temp_dir(), "corpus"), out)
        self.assertFalse(os.path.exists(out))

    def test_no_item_when_translations_are_equal(self):
        lexicon = lexicon_lib.find_translations(
            common.pairs(domains=["religious", "software"]), min_count=3
        )
        self.assertNotIn("spirit", lexicon)
        examples = [("test", "software", 1, "a spirit", "un esprit")]
        self.assertEqual(items_lib.make_items(lexicon, examples, ["religious", "software"]), [])

    def test_number_case_and_elision(self):
        lexicon = {
            "save": _entry(
                "save",
                collections.OrderedDict(
                    [("religious", _sense("sauver")), ("software", _sense("enregistrer"))]
                ),
            ),
            "spirit": _entry(
                "spirit",
                collections.OrderedDict(
                    [
                        ("medical", _sense("alcool")),
                        ("religious", _sense("esprit")),
                        ("software", _sense("case")),
                    ]
                ),
            ),
        }
        examples = [
            ("test", "religious", 1, "Spirits, save!", "Esprits et ESPRIT: sauver l'esprit"),
            ("dev", "software", 2, "To save", "Enregistrer"),
            ("test", "religious", 3, "spirit", "le esprit et alcool"),  # Has medical's word.
        ]
        items = items_lib.make_items(lexicon, examples, tiny.DOMAINS)
        texts = {(item["id"], v["domain"]): v["text"] for item in items for v in item["variants"]}
        self.assertEqual(
            texts,
            {
                ("test.religious.1.save", "software"): "Esprits et ESPRIT: enregistrer l'esprit",
                # "l'case" would give the variant away: only medical's "l'alcool" is kept.
                ("test.religious.1.spirit", "medical"): "Alcools et ALCOOL: sauver l'alcool",
                ("dev.software.2.save", "religious"): "Sauver",
                # The reference has medical's word already: software's variant only.
                ("test.religious.3.spirit", "software"): "le case et alcool",
            },
        )
        self.assertEqual(
            [item["id"] for item in items],
            [
                "test.religious.1.save",
                "test.religious.1.spirit",
                "test.religious.3.spirit",
                "dev.software.2.save",
            ],
        )

    def test_caps(self):
        lexicon = lexicon_lib.find_translations(common.pairs(), min_count=3)
        examples = [("test", "medical", i, "the cell", "le cellule") for i in range(1, 6)]
        examples += [("test", "medical", i, "a host", "un hote") for i in range(6, 9)]
        examples += [("dev", "medical", 1, "the cell", "le cellule")]
        items = items_lib.make_items(lexicon, examples, tiny.DOMAINS, max_per_word=4)
        self.assertEqual(
            [item["line"] for item in items if item["word"] == "cell"], [1, 2, 3, 4]
        )  # Test sentences first.
        items = items_lib.make_items(lexicon, examples, tiny.DOMAINS, max_items=5)
        # Round-robin over (domain, word) groups: 3 cell and 2 host items.
        self.assertEqual(
            collections.Counter(item["word"] for item in items), {"cell": 3, "host": 2}
        )
        with self.assertRaisesRegex(UserError, "max_per_word and max_items must be >= 1"):
            items_lib.make_items(lexicon, examples, tiny.DOMAINS, max_items=0)

    @parameterized.expand(
        [
            ("not json", ["{"], r":1: not a JSON object"),
            ("list", ["[1]"], r":1: not a JSON object"),
            (
                "no variants",
                ['{"domain": "medical", "word": "w", "source": "s", "reference": "r"}'],
                r":1: item without a valid 'variants'",
            ),
            (
                "same domain",
                [
                    '{"domain": "medical", "word": "w", "source": "s", "reference": "r", '
                    '"variants": [{"domain": "medical", "text": "t"}]}'
                ],
                r":1: variant domain 'medical' must be another domain",
            ),
            (
                "bad variant",
                [
                    "",
                    '{"domain": "medical", "word": "w", "source": "s", "reference": "r", '
                    '"variants": [["software", "t"]]}',
                ],
                r":2: a variant must be",
            ),
            (
                "unknown domain",
                [
                    '{"domain": "legal", "word": "w", "source": "s", "reference": "r", '
                    '"variants": [{"domain": "medical", "text": "t"}]}'
                ],
                r":1: unknown domain 'legal' \(domains: medical, religious, software\)",
            ),
            ("empty", [], r": no items"),
        ]
    )
    def test_malformed_items(self, _, lines, regex):
        path = tiny.write_lines(os.path.join(self.get_temp_dir(), "items.jsonl"), lines)
        with self.assertRaisesRegex(UserError, "^" + path + regex):
            items_lib.read_items(path, tiny.DOMAINS)

    def test_summary(self):
        lexicon = lexicon_lib.find_translations(
            common.pairs(), seed_words={"spirit": {}}, min_count=3
        )
        examples = [("test", "medical", 1, "the big cell", "le grand cellule")]
        items = items_lib.make_items(lexicon, examples, tiny.DOMAINS)
        parameters = collections.OrderedDict([("corpus", "c"), ("min_count", 3)])
        summary = items_lib.items_summary(items, lexicon, tiny.DOMAINS, parameters).splitlines()
        self.assertIn("Built with min_count=3.", summary)
        self.assertIn("| word | seed | medical | religious | software |", summary)
        self.assertIn(
            "| cell | | cellule (dice 1.00, 100% of 11) | cachot (dice 1.00, 100% of 8) "
            "| case (dice 1.00, 100% of 10) |",
            summary,
        )
        self.assertTrue(summary[10].startswith("| spirit | yes | alcool (dice 1.00, "), summary)
        self.assertIn("| cell | 1 | 0 | 0 | 1 |", summary)
        self.assertIn("| **all** | 1 | 0 | 0 | 1 |", summary)
        self.assertIn("1 items (test 1), 2 variants.", summary)
        self.assertIn("  * software variant: le grand case", summary)

    def test_build_items_on_a_corpus(self):
        corpus = os.path.join(self.get_temp_dir(), "corpus")
        corpus_lib.build(
            common.pairs(count=40, seed=2),
            corpus,
            dev_size=3,
            test_size=6,
            bpe_merges=30,
            log=lambda _: None,
        )
        path = os.path.join(self.get_temp_dir(), "items.jsonl")
        items = items_lib.build_items(corpus, path, seed_words=None, min_count=3)
        self.assertEqual(items_lib.read_items(path, tiny.DOMAINS), items)
        with open(path) as f:
            first = f.read()
        items_lib.build_items(corpus, path, seed_words=None, min_count=3)
        with open(path) as f:
            self.assertEqual(f.read(), first)  # Deterministic.
        for item in items:
            for variant in item["variants"]:
                self.assertNotEqual(variant["text"], item["reference"])
        with open(os.path.join(self.get_temp_dir(), "items.lexicon.json")) as f:
            lexicon = json.load(f)["words"]
        self.assertEqual(lexicon["cell"]["senses"]["religious"]["translation"], "cachot")
        np.testing.assert_equal(sorted(lexicon), ["cell", "host", "spirit"])


if __name__ == "__main__":
    tf.test.main()
