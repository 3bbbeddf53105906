"""``ldr-main --list-families``: the registry's families as a Markdown table."""

import tensorflow as tf

from ldr_opennmt import registry
from ldr_opennmt.cli import families
from tests.models import test_sequence_to_sequence


class DescribeTest(tf.test.TestCase):
    def test_every_family_has_a_row(self):
        lines = families.describe()
        self.assertLen(lines, 2 + len(registry.names()))
        self.assertTrue(any(line.startswith("| factorized_pa | Factorized PA |") for line in lines))
        self.assertEqual(lines[1].count("|"), lines[0].count("|"))
        # The presets a model definition chooses (registry.preset).
        ldr = next(line for line in lines if line.startswith("| ldr_transformer |"))
        self.assertIn(
            "| paper, small, tied, reserved, every_layer, target_ldr, zero_regions |", ldr
        )

    def test_a_row_shows_the_checked_capabilities(self):
        # The guide's family states no CTranslate2 refusal, but its output bias does not
        # fold: the listing says "no" (it said "one model per domain"), ensembles work, and
        # the default training mode is marked.
        registry.register(
            registry.Family(
                name="guide_family",
                builder=lambda **sizes: test_sequence_to_sequence._GuideTransformer(**sizes),
                title="Test",
                paper="nobody, 2026",
                summary="A test.",
                module="tests.cli.test_families",
            )
        )
        lines = families.describe(["guide_family"])
        self.assertLen(lines, 3)
        self.assertIn(
            "| procedure1 (default), joint, summed, general, domains | one | no | yes "
            "| paper, small |",
            lines[2],
        )
        self.assertTrue(lines[2].endswith("| tests.cli.test_families |"))


if __name__ == "__main__":
    tf.test.main()
