"""The sentences of a LibreTranslate text (:mod:`ldr_opennmt.serving.sentences`): split as
Moses's rule splits them, and the text rebuilt around their translations with its layout."""

import unittest

from ldr_opennmt.serving import sentences


def _marked(text):
    """:obj:`text` with each sentence replaced by ``<sentence>``."""
    layout = sentences.split(text)
    return layout.join(["<%s>" % s for s in layout.sentences])


class SplitTest(unittest.TestCase):
    def test_sentences_end_at_a_stop_before_a_sentence_start(self):
        for text, expected in (
            (
                "The cell is here. A host is here! Is it?",
                ["The cell is here.", "A host is here!", "Is it?"],
            ),
            ('He said "Stop." Then he left.', ['He said "Stop."', "Then he left."]),
            ("It costs 5.50 now. 5 people came.", ["It costs 5.50 now.", "5 people came."]),
            ("Wait... what?! Yes.", ["Wait... what?!", "Yes."]),
            ("¿Qué? ¡Sí! Vale.", ["¿Qué?", "¡Sí!", "Vale."]),
            ("你好。世界！好吗？", ["你好。", "世界！", "好吗？"]),
            ("Done. هذا نص.", ["Done.", "هذا نص."]),  # A script without case.
            ("no stop at all", ["no stop at all"]),
        ):
            self.assertEqual(sentences.split(text).sentences, expected, text)

    def test_abbreviations_and_lower_case_do_not_end_a_sentence(self):
        for text in (
            "Dr. Smith met J. Doe in the U.S. Army today.",
            "Use a tool, e.g. this one, and go.",
            "See Fig. 3 and M. Dupont.",
            "1. Introduction of the method",
            "It works.then it stops",
        ):
            self.assertEqual(sentences.split(text).sentences, [text], text)

    def test_the_layout_is_kept_around_the_translations(self):
        self.assertEqual(
            _marked("  Indented. Two.\n\nNew paragraph.  Two spaces.\r\nA line\n"),
            "  <Indented.> <Two.>\n\n<New paragraph.>  <Two spaces.>\r\n<A line>\n",
        )
        # Sentences with no space between them: their translations get one, unless the first
        # ends with a full-width stop.
        layout = sentences.split("你好。世界。")
        self.assertEqual(layout.join(["Hello.", "World."]), "Hello. World.")
        self.assertEqual(layout.join(["你好。", "世界。"]), "你好。世界。")

    def test_blank_text_has_no_sentence(self):
        for text in ("", "   ", "\n\n", " \r\n\t"):
            layout = sentences.split(text)
            self.assertEqual(layout.sentences, [])
            self.assertEqual(layout.join([]), text)
        with self.assertRaisesRegex(ValueError, "^1 translations for 2 sentences$"):
            sentences.split("One. Two.").join(["un"])


if __name__ == "__main__":
    unittest.main()
