import contextlib
import glob
import io
import os

import tensorflow as tf

from ldr_experiments import cli, records
from ldr_experiments.common import ROOT

RECORD = """# The papers' tables

| row | seeds | avg BLEU | avg chrF |
|---|---|---:|---:|
| Mixed | 1, 2, 3 | 23.8 ± 0.4 | 45.1 ± 0.2 |
| LDR (summed) (oracle) | 1, 2, 3 | 27.8 ± 0.3 | 48.0 ± 0.1 |

| row | share |
|---|---:|
| LDR (summed) (oracle) | 44% [12, 80] |
"""


class RecordsTest(tf.test.TestCase):
    def _page(self, text):
        root = self.get_temp_dir()
        os.makedirs(os.path.join(root, "docs", "records"), exist_ok=True)
        with open(os.path.join(root, "docs", "records", "t.md"), "w") as f:
            f.write(RECORD)
        page = os.path.join(root, "docs", "page.md")
        with open(page, "w") as f:
            f.write(text)
        return page

    def test_a_quote_is_checked_against_its_cell(self):
        good = self._page(
            'LDR averages [27.8](records/t.md "row: LDR (summed) (oracle); column: avg BLEU").'
        )
        self.assertEqual(records.check(good), [])
        self.assertEqual(records.quotes(good), 1)
        bad = self._page(
            'Mixed [24.1](records/t.md "row: Mixed; column: avg BLEU"), chrF'
            ' [45.1](records/t.md "row: Mixed; column: avg chrF").'
        )
        [problem] = records.check(bad)
        self.assertIn("24.1 quotes Mixed / avg BLEU", problem)
        self.assertIn("which has 23.8 ± 0.4", problem)
        # The cell's text from its start, its interval or spread included, is checked whole.
        whole = self._page(
            '[27.8 ± 0.3](records/t.md "row: LDR (summed) (oracle); column: avg BLEU"),'
            ' [44% [12, 80]](records/t.md "row: LDR (summed) (oracle); column: share")'
        )
        self.assertEqual((records.check(whole), records.quotes(whole)), ([], 2))
        wrong = self._page(
            '[27.8 ± 0.4](records/t.md "row: LDR (summed) (oracle); column: avg BLEU"),'
            ' [44% [12, 81]](records/t.md "row: LDR (summed) (oracle); column: share")'
        )
        self.assertLen(records.check(wrong), 2)
        missing = self._page('[1.0](records/t.md "row: DC; column: avg BLEU")')
        self.assertIn("no such cell", records.check(missing)[0])
        # An example in code is not a quote.
        example = self._page('`[1.0](records/t.md "row: DC; column: avg BLEU")`')
        self.assertEqual((records.check(example), records.quotes(example)), ([], 0))

    def test_quote_writes_the_links_a_check_accepts(self):
        page = self._page("")
        record = os.path.join(os.path.dirname(page), "records", "t.md")
        found = records.links(RECORD, "t.md", row="LDR (summed) (oracle)")
        self.assertEqual(
            found,
            [
                '[1](records/t.md "row: LDR (summed) (oracle); column: seeds")',
                '[27.8](records/t.md "row: LDR (summed) (oracle); column: avg BLEU")',
                '[48.0](records/t.md "row: LDR (summed) (oracle); column: avg chrF")',
                '[44%](records/t.md "row: LDR (summed) (oracle); column: share")',
            ],
        )
        # Every link it writes holds; from the README (the root) the path goes through docs/.
        self.assertEqual(records.check(self._page(" ".join(records.links(RECORD, "t.md")))), [])
        [readme] = records.links(RECORD, "t.md", "Mixed", "avg chrF", page_dir=".")
        self.assertEqual(readme, '[45.1](docs/records/t.md "row: Mixed; column: avg chrF")')
        stdout = io.StringIO()
        with contextlib.redirect_stdout(stdout):
            self.assertEqual(cli.main(["quote", record, "--column", "avg BLEU"]), 0)
        self.assertEqual(
            stdout.getvalue().splitlines(),
            [
                '[23.8](records/t.md "row: Mixed; column: avg BLEU")',
                '[27.8](records/t.md "row: LDR (summed) (oracle); column: avg BLEU")',
            ],
        )
        stderr = io.StringIO()
        with contextlib.redirect_stderr(stderr):
            self.assertEqual(cli.main(["quote", record, "--row", "DC"]), 2)
        self.assertIn("t.md: no cell in row 'DC' in its tables", stderr.getvalue())

    def test_a_record_of_its_own_folder(self):
        # A record with its figures: docs/records/NAME/report.md, quoted by its path there.
        page = self._page("")
        folder = os.path.join(os.path.dirname(page), "records", "tables-x")
        os.makedirs(folder, exist_ok=True)
        record = os.path.join(folder, "report.md")
        with open(record, "w") as f:
            f.write(RECORD)
        self.assertEqual(records.record_name(record), "tables-x/report.md")
        self.assertEqual(records.record_name("elsewhere/report.md"), "report.md")
        stdout = io.StringIO()
        with contextlib.redirect_stdout(stdout):
            cli.main(["quote", record, "--row", "Mixed", "--column", "avg BLEU"])
        [quote] = stdout.getvalue().splitlines()
        self.assertEqual(quote, '[23.8](records/tables-x/report.md "row: Mixed; column: avg BLEU")')
        self.assertEqual(records.check(self._page(quote)), [])
        # From a family page, one folder down.
        stdout = io.StringIO()
        with contextlib.redirect_stdout(stdout):
            cli.main(
                [
                    "quote",
                    record,
                    "--row",
                    "Mixed",
                    "--column",
                    "avg BLEU",
                    "--page_dir",
                    "docs/families",
                ]
            )
        self.assertIn("](../records/tables-x/report.md ", stdout.getvalue())

    def test_every_quote_in_the_readme_and_the_docs_holds(self):
        pages = [os.path.join(ROOT, "README.md")]
        pages += glob.glob(os.path.join(ROOT, "docs", "**", "*.md"), recursive=True)
        pages = [p for p in pages if "_build" not in p and "_generated" not in p]
        problems = [problem for page in pages for problem in records.check(page)]
        self.assertEqual(problems, [])
