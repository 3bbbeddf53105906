import tensorflow as tf
from parameterized import parameterized

from ldr_opennmt.analysis import parameters
from ldr_opennmt.errors import UserError


class ParameterCountTest(tf.test.TestCase):
    def test_paper_size_ratios(self):
        vanilla = parameters.parameter_count("vanilla")
        ratios = {s: parameters.parameter_count(s) / vanilla for s in parameters.ALIASES}
        # The Factorized paper's #P column (Table 2): DF 1x, SF 1.1x, PA 1.8x, adapters 2.3x.
        expected = {"df": 1.01, "sf": 1.13, "pa": 1.79, "adapters": 2.32}
        for system, ratio in expected.items():
            self.assertAlmostEqual(ratios[system], ratio, places=2, msg=system)
        # TTM adds a target row per domain; ML/AdvL the classifier head.
        self.assertEqual(parameters.parameter_count("ttm") - vanilla, 5 * 512)
        self.assertEqual(parameters.parameter_count("ml") - vanilla, 512 * 512 + 512 * 5)
        self.assertEqual(parameters.parameter_count("advl"), parameters.parameter_count("ml"))
        # The adapters grow with their inner size.
        small = parameters.parameter_count("adapters", adapter_dim=64)
        self.assertEqual(small - vanilla, 2 * 512 * 64 * 12 * 5)

    def test_table(self):
        lines = parameters.parameter_table(adapter_dim=256, d_model=64, ffn_dim=256)
        self.assertLen(lines, 2 + len(parameters.systems()))
        self.assertTrue(lines[2].startswith("| vanilla (Mixed) |"))
        self.assertTrue(lines[2].endswith("| 1.00 |"))

    @parameterized.expand([(0,), (-5,)])
    def test_bad_adapter_size(self, size):
        with self.assertRaisesRegex(UserError, "inner size must be > 0"):
            parameters.parameter_count("adapters", adapter_dim=size)

    def test_unknown_system(self):
        message = "unknown system 'lora' .*adapters, ttm, ml.*factorized_pa"
        with self.assertRaisesRegex(UserError, message):
            parameters.parameter_count("lora")


if __name__ == "__main__":
    tf.test.main()
