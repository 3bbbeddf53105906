import tensorflow as tf

from ldr_experiments import table_label_use


class LabelUseSectionTest(tf.test.TestCase):
    """The report's section on where the domain knowledge sits, from its figures."""

    CONTRASTIVE = {
        "rows": [
            {
                "system": "Mixed",
                "metric": "accuracy",
                "mode": "oracle",
                "values": {"all": 93.8},
                "margin": {"all": 14.7},
            },
            {"system": "LDR", "metric": "shift", "values": {"all": 51.0}, "margin": {"all": 0.02}},
            {"system": "DC", "metric": "shift", "values": {"all": 60.0}, "margin": {"all": 0.3}},
        ]
    }
    FIGURES = {
        "ldr": {
            "LDR": {
                "test": {"medical": [0.05, 100], "software": [0.07, 90]},
                "items": {"medical": [0.04, 10]},
                "by_step": [[1125, 0.02], [4500, 0.05]],
            }
        },
        "mixing": {
            "Domain mixing": [
                {
                    "label": "encoder/layer_0",
                    "side": "source",
                    "word": 20,
                    "word_correct": 8,
                    "word_mean": 0.41,
                    "other": 50,
                    "other_correct": 40,
                    "other_mean": 0.7,
                }
            ]
        },
    }

    def test_the_section_says_what_the_figures_say(self):
        text = "\n".join(
            table_label_use.label_use_section(
                self.FIGURES, self.CONTRASTIVE, {"accuracy": 0.967}, "Mixed"
            )
        )
        self.assertIn("labels 96.7% of the test sentences correctly", text)
        self.assertIn("in 93.8% of the contrastive items, by 14.7 nats", text)
        self.assertIn("DC +0.30, LDR +0.02 nats", text)  # strongest pull first
        self.assertIn("| LDR | test words | 0.050 | 0.070 |", text)
        self.assertIn("| LDR | ambiguous words | 0.040 | n/a |", text)
        self.assertIn("step 1125 0.020, step 4500 0.050", text)
        self.assertIn("| Domain mixing | encoder/layer_0 | 40.0 | 80.0 | 0.41 | 0.70 |", text)

    def test_a_table_without_ldr_or_mixing_rows_has_the_context_lines_only(self):
        lines = table_label_use.label_use_section(
            {"ldr": {}, "mixing": {}}, self.CONTRASTIVE, None, "Mixed"
        )
        text = "\n".join(lines)
        self.assertNotIn("classifier", text)
        self.assertNotIn("|", text)
        self.assertIn("93.8%", text)
