"""The lexicon of the contrastive test: word keys, the Dice association, seeds."""

import os

import tensorflow as tf
from parameterized import parameterized

from ldr_opennmt.errors import UserError
from ldr_opennmt.evaluation.contrastive import lexicon as lexicon_lib
from tests import corpus as tiny
from tests.evaluation.contrastive import common


class LexiconTest(tf.test.TestCase):
    def test_word_keys(self):
        self.assertEqual(lexicon_lib.english_key("cells"), "cell")
        self.assertEqual(lexicon_lib.english_key("parties"), "party")
        self.assertEqual(lexicon_lib.english_key("process"), "process")
        self.assertEqual(lexicon_lib.french_key("cellules"), "cellule")
        self.assertEqual(lexicon_lib.french_key("yeux"), "yeu")
        self.assertEqual(
            lexicon_lib.words("L'Esprit saint, 2 fois"), ["l", "esprit", "saint", "fois"]
        )

    @parameterized.expand(
        [
            ("trouvé", "trouvée", True),
            ("échec", "echec", True),
            ("clé", "clef", True),
            ("dernier", "dernière", True),
            ("sauver", "enregistrer", False),
            ("cellule", "cachot", False),
        ]
    )
    def test_related(self, first, second, expected):
        self.assertEqual(lexicon_lib.related(first, second), expected)

    def test_association_finds_the_translation_of_each_domain(self):
        lexicon = lexicon_lib.find_translations(common.pairs(), min_count=3)
        self.assertEqual(sorted(lexicon), ["cell", "host", "spirit"])
        translations = {
            word: {d: s.translation for d, s in entry.senses.items()}
            for word, entry in lexicon.items()
        }
        self.assertEqual(
            translations["cell"],
            {"medical": "cellule", "religious": "cachot", "software": "case"},
        )
        self.assertEqual(
            translations["host"],
            {"medical": "hote", "religious": "hostie", "software": "serveur"},
        )
        self.assertEqual(
            translations["spirit"],
            {"medical": "alcool", "religious": "esprit", "software": "esprit"},
        )
        # Equal translations do not contrast: "spirit" opposes medical to the others only.
        self.assertEqual(
            dict(lexicon["spirit"].contrasts),
            {
                "medical": ["religious", "software"],
                "religious": ["medical"],
                "software": ["medical"],
            },
        )
        sense = lexicon["cell"].senses["medical"]
        self.assertEqual(sense.origin, "data")
        self.assertAllClose([sense.dice, sense.share], [1.0, 1.0])

    def test_thresholds_seeds_and_exclusions(self):
        pairs = common.pairs()
        self.assertEqual(lexicon_lib.find_translations(pairs, min_count=100), {})
        # A seed needs only seed_min_count pairs; an excluded word is never kept.
        lexicon = lexicon_lib.find_translations(
            pairs, seed_words={"cell": {}}, excluded_words=["hosts"], min_count=100
        )
        self.assertEqual(list(lexicon), ["cell"])
        # A hand sense fills a domain without data, never replaces a sense from the data.
        pairs = common.pairs(domains=["medical", "religious"])
        lexicon = lexicon_lib.find_translations(
            pairs, seed_words={"spirit": {"religious": "fantôme", "medical": "x"}}, min_count=3
        )
        self.assertEqual(lexicon["spirit"].senses["religious"].translation, "esprit")
        self.assertEqual(lexicon["spirit"].senses["medical"].origin, "data")
        seeds = {"spirit": {"religious": "fantôme", "medical": "gnôle"}}
        lexicon = lexicon_lib.find_translations(pairs, seeds, min_count=3, seed_min_count=50)
        self.assertEqual(
            [(s.singular, s.origin) for s in lexicon["spirit"].senses.values()],
            [("gnôle", "seed"), ("fantôme", "seed")],
        )
        with self.assertRaisesRegex(UserError, "seed word 'spirit': unknown domain 'software'"):
            lexicon_lib.find_translations(pairs, seed_words={"spirit": {"software": "x"}})

    def test_seed_word_file(self):
        path = tiny.write_lines(
            os.path.join(self.get_temp_dir(), "seeds.txt"),
            ["# comment", "Cells religious=cachot  # a comment", "", "-eyes"],
        )
        seeds, excluded = lexicon_lib.read_seed_words(path)
        self.assertEqual(seeds, {"cell": {"religious": "cachot"}})
        self.assertEqual(excluded, {"eye"})
        seeds, excluded = lexicon_lib.read_seed_words(lexicon_lib.DEFAULT_SEED_WORDS)
        self.assertIn("save", seeds)
        self.assertLess(len(seeds), 40)  # A small hand-made list.
        for lines, regex in (
            (["cell religious"], r"seeds.txt:1: expected DOMAIN=FRENCH_WORD .* 'religious'"),
            (["ok", "two words=x y"], r"seeds.txt:2: expected DOMAIN=FRENCH_WORD"),
            (["c3po"], r"seeds.txt:1: 'c3po' is not an English word"),
            (["-eye medical=oeil"], r"seeds.txt:1: an excluded word \(-eye\) takes no senses"),
        ):
            tiny.write_lines(path, lines)
            with self.assertRaisesRegex(UserError, regex):
                lexicon_lib.read_seed_words(path)


if __name__ == "__main__":
    tf.test.main()
