"""The library's standard-library modules, loaded without the package (standalone.py)."""

import unittest

from ldr_experiments import standalone


class StandaloneTest(unittest.TestCase):
    def test_markdown_table(self):
        table = standalone.markdown_table(["system", "ms"], [["a", 1.5], ["b", "n/a"]])
        self.assertEqual(table, "| system | ms |\n|---|---:|\n| a | 1.5 |\n| b | n/a |")
        with self.assertRaises(ValueError):
            standalone.markdown_table(["a", "b"], [["only one"]])

    def test_each_module_is_loaded_once(self):
        self.assertIs(standalone.module("reports"), standalone.module("reports"))
        self.assertTrue(hasattr(standalone.module("gpu"), "library_report"))


if __name__ == "__main__":
    unittest.main()
