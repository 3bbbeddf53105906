"""The README and the documentation site (docs/, issue 34): they build, and what they show runs.

- The site builds with ``bash run/docs.sh`` (warnings as errors) into a temporary
  directory; the build also checks the references generated from the code
  (``docs/_ext/``: configuration keys, commands, families, API).
- Every ``bash`` block of the README and of the pages: each command line of ``onmt-main``,
  ``ldr-main`` or an ``ldr-*`` command parses with that command's own argument parser,
  reached in process without running the command (``docs/_ext/ldr_docs_commands.py``;
  cheaper than a subprocess per line, each importing TensorFlow, and stricter than
  ``--help``: the values, choices and sub-commands of the line are checked too); a ``bash
  run/X.sh`` or ``python X.py`` names a file of the repository.
- Every ``yaml`` block loads and passes the package's configuration check.
- The README: at most 200 lines, its links resolve, its family list is the registry's.
- Every configuration key the package's code reads is in a reference.
"""

import datetime
import os
import re
import shlex
import subprocess
import sys
import tempfile
import unittest

import pytest
import yaml

from ldr_experiments import machine
from ldr_opennmt import config_keys, registry

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = os.path.join(ROOT, "docs")
README = os.path.join(ROOT, "README.md")
sys.path.insert(0, os.path.join(DOCS, "_ext"))

import ldr_docs  # noqa: E402  (docs/_ext on the path)
import ldr_docs_commands  # noqa: E402
import ldr_docs_keys  # noqa: E402

#: Pages whose blocks are checked: the README and every Markdown page of docs/ (the
#: generated ones are the code's own output).
SKIPPED_DIRS = ("_build", "_generated", "_ext")


def pages():
    paths = [README]
    for folder, dirs, files in os.walk(DOCS):
        dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS)
        paths += [os.path.join(folder, f) for f in sorted(files) if f.endswith(".md")]
    return paths


def fenced_blocks(path, languages):
    """``[(line, text)]``: the fenced code blocks of a Markdown file in :obj:`languages`."""
    blocks, current, start, language = [], None, 0, None
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            stripped = line.strip()
            if current is None and stripped.startswith("```"):
                language = stripped[3:].strip().lower()
                current, start = [], number + 1
            elif current is not None and stripped == "```":
                if language in languages:
                    blocks.append((start, "".join(current)))
                current = None
            elif current is not None:
                current.append(line)
    return blocks


#: An unquoted redirection: ``> FILE``, ``>> FILE``, ``2> FILE``, ``2>&1``, ``< FILE``.
REDIRECTION = re.compile(r"(?<=\s)\d?(?:>>?|<)(?:&\d+|\s*[^\s;&|]+)")


def command_lines(block):
    """The simple commands of a bash block: ``[(line offset, [word, ...])]``, continued
    lines joined, comments, redirections and pipes removed."""
    commands, pending, first = [], "", 0
    for offset, line in enumerate(block.splitlines()):
        if not pending:
            first = offset
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        text, pending = pending + line, ""
        # Redirections (> out, 2>&1, < in) go before splitting: bash tells "2>" (a file
        # descriptor) from "2 >" (an argument) by the space, which a word list loses.
        text = REDIRECTION.sub(" ", text)
        lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        lexer.commenters = "#"
        try:
            words = list(lexer)
        except ValueError:  # A quoted string goes on over the next line.
            pending = text + "\n"
            continue
        segment = []
        for word in words + [";"]:
            if word in ("&&", "||", ";", "|", "&"):
                if segment:
                    commands.append((first, segment))
                segment = []
            else:
                segment.append(word)
    if pending:
        raise ValueError("unterminated quote or continuation: %r" % pending[:80])
    return commands


def checked_command(words):
    """``(command, arguments)`` for a line that runs a documented command (after a
    launcher such as ``horovodrun ...``), else ``None``."""
    known = ldr_docs_commands.entry_points()
    for i, word in enumerate(words):
        if word in known:
            if i == 0 or words[0] in ("horovodrun", "mpirun", "time", "env"):
                return word, words[i + 1 :]
            return None
    return None


class BlocksTest(unittest.TestCase):
    def test_commands_of_the_readme_and_pages_parse(self):
        checked, problems = 0, []
        for path in pages():
            name = os.path.relpath(path, ROOT)
            for line, block in fenced_blocks(path, ("bash", "sh", "shell")):
                for offset, words in command_lines(block):
                    where = "%s:%d" % (name, line + offset)
                    if words[:1] in (["bash"], ["source"], ["python"]) and len(words) > 1:
                        script = words[1]
                        if script.startswith("-"):
                            continue
                        if not os.path.isfile(os.path.join(ROOT, script)):
                            problems.append("%s: %s: no such file" % (where, script))
                        continue
                    command = checked_command(words)
                    if command is None:
                        continue
                    error = ldr_docs_commands.check_command_line(*command)
                    checked += 1
                    if error:
                        problems.append(
                            "%s: %s: %s" % (where, " ".join(words)[:100], error.splitlines()[-1])
                        )
        self.assertFalse(problems, "\n" + "\n".join(problems))
        self.assertGreater(checked, 30)

    def test_yaml_blocks_load_and_pass_the_configuration_check(self):
        checked, problems = 0, []
        for path in pages():
            name = os.path.relpath(path, ROOT)
            for line, block in fenced_blocks(path, ("yaml", "yml")):
                where = "%s:%d" % (name, line)
                try:
                    documents = list(yaml.safe_load_all(block))
                except yaml.YAMLError as e:
                    problems.append("%s: %s" % (where, str(e).splitlines()[0]))
                    continue
                for document in documents:
                    if not isinstance(document, dict):
                        problems.append("%s: not a mapping: %r" % (where, document))
                        continue
                    try:
                        config_keys.check_config(document)
                    except Exception as e:  # noqa: BLE001 - reported with its place.
                        problems.append("%s: %s" % (where, e))
                    checked += 1
        self.assertFalse(problems, "\n" + "\n".join(problems))
        self.assertGreater(checked, 10)

    def test_command_lines_are_split_like_bash(self):
        block = (
            "source run/setup_env.sh  # comment\n"
            "ldr-main --config a.yml \\\n    b.yml train > out.txt 2>&1 && echo done\n"
            "cat in | ldr-translate --export e --domain medical < x.en\n"
        )
        self.assertEqual(
            command_lines(block),
            [
                (0, ["source", "run/setup_env.sh"]),
                (1, ["ldr-main", "--config", "a.yml", "b.yml", "train"]),
                (1, ["echo", "done"]),
                (3, ["cat", "in"]),
                (3, ["ldr-translate", "--export", "e", "--domain", "medical"]),
            ],
        )

    def test_command_help_has_no_rest_markup(self):
        # Issue 47 item 6: --help and the Commands page showed ``ldr-eval`` verbatim.
        markup = re.compile(r"``[^`]*``|:(?:mod|func|class|obj|data|meth|attr):`")
        for command in ldr_docs_commands.entry_points():
            for argv in ldr_docs_commands.sub_commands(command):
                parser, _ = ldr_docs_commands.capture(command, argv)
                parsers = [parser] + [sub for _, sub in ldr_docs_commands._sub_parsers(parser)]
                for each in parsers:
                    text = each.format_help()
                    self.assertIsNone(markup.search(text), "%s: %s" % (each.prog, text[:300]))

    def test_a_wrong_option_is_caught(self):
        self.assertIsNone(
            ldr_docs_commands.check_command_line(
                "ldr-eval", ["--corpus", "c", "--out", "o", "--system", "A=a.yml"]
            )
        )
        self.assertIn(
            "unrecognized arguments: --bogus",
            ldr_docs_commands.check_command_line(
                "ldr-main", ["--config", "missing.yml", "train", "--bogus"]
            ),
        )
        self.assertIn(
            "invalid choice",
            ldr_docs_commands.check_command_line("ldr-eval", ["contrastive", "--modes", "x"]),
        )


class ReadmeTest(unittest.TestCase):
    def setUp(self):
        with open(README, encoding="utf-8") as f:
            self.text = f.read()

    def test_readme_is_one_screen_of_start_and_links(self):
        self.assertLessEqual(len(self.text.splitlines()), 200)
        for command in ("bash run/demo.sh", "bash run/test.sh", "bash run/docs.sh"):
            self.assertIn(command, self.text)
        self.assertIn("docs/_build/html", self.text)

    def test_links_resolve(self):
        links = re.findall(r"\]\(([^)\s]+)\)", self.text)
        self.assertGreater(len(links), 10)
        for link in links:
            if re.match(r"^[a-z]+://", link) or link.startswith("#"):
                continue
            path = link.split("#")[0]
            self.assertTrue(os.path.exists(os.path.join(ROOT, path)), link)

    def test_readme_links_every_page(self):
        for path in pages()[1:]:
            page = os.path.relpath(path, ROOT)
            if page.startswith("docs/records/") and page != "docs/records/index.md":
                continue  # A kept report: its index lists it, the quotes link it.
            self.assertIn("(%s)" % page, self.text, "the README does not link %s" % page)

    def test_family_list_is_the_registry(self):
        pattern = re.compile(
            r"^- `(?P<name>[a-z0-9_]+)` \*\*(?P<title>.+?)\*\*: (?P<paper>.+) "
            r"\(\[page\]\((?P<page>docs/families/[a-z-]+\.md)\)\)$"
        )
        rows = [m.groupdict() for m in map(pattern.match, self.text.splitlines()) if m]
        expected = [
            "- `%s` **%s**: %s ([page](docs/families/PAGE.md))" % (f.name, f.title, f.paper)
            for f in registry.families()
        ]
        self.assertEqual(
            [(r["name"], r["title"], r["paper"]) for r in rows],
            [(f.name, f.title, f.paper) for f in registry.families()],
            "the README's families, one line each, in the registry's order:\n"
            + "\n".join(expected),
        )
        for row in rows:
            with open(os.path.join(ROOT, row["page"]), encoding="utf-8") as f:
                self.assertIn("_generated/family/%s.md" % row["name"], f.read(), row["page"])


class ConfigurationKeysTest(unittest.TestCase):
    def test_every_key_the_code_reads_is_in_a_reference(self):
        import ldr_docs  # pylint: disable=import-outside-toplevel

        self.assertEqual(ldr_docs.check_configuration_keys(), [])

    def test_a_new_key_is_found(self):
        source = (
            "NAME = 'constant_key'\n"
            "def f(config, params, data_config):\n"
            "    params.get('new_param')\n"
            "    data = config['data']\n"
            "    data['new_data_key']\n"
            "    'new_train_key' in (config.get('train') or {})\n"
            "    data_config.get(NAME)\n"
            "    config['new_top_level']\n"
            "    config['data'] = {}\n"
            "def format_prediction(self, prediction, params=None):\n"
            "    return params.get('infer_option')\n"
        )
        with tempfile.TemporaryDirectory() as directory:
            package = os.path.join(directory, "pkg")
            os.makedirs(package)
            with open(os.path.join(package, "m.py"), "w") as f:
                f.write(source)
            found = ldr_docs_keys.undocumented_keys(
                package, documented=set(), upstream=set(), top_level=set()
            )
        self.assertEqual(
            sorted(found),
            [
                ("data", "constant_key"),
                ("data", "new_data_key"),
                ("infer", "infer_option"),
                ("params", "new_param"),
                ("top", "new_top_level"),
                ("train", "new_train_key"),
            ],
        )


class DemoReportPageTest(unittest.TestCase):
    """docs/demo.md shows the demo's report with the date, machine and command of its first
    line (ldr_experiments.machine.provenance_line, read back by ldr_docs.DEMO_PROVENANCE)."""

    WRITTEN = datetime.datetime(2026, 11, 24, 13, 5, tzinfo=datetime.timezone.utc)

    def setUp(self):
        directory = tempfile.TemporaryDirectory()
        self.addCleanup(directory.cleanup)
        self.report = os.path.join(directory.name, "report.md")
        self.target = os.path.join(directory.name, "generated")

    def _write(self, text):
        with open(self.report, "w", encoding="utf-8") as f:
            f.write(text)

    def test_the_first_line_is_read_back(self):
        record = {
            "written": "2026-11-24 13:05 UTC",
            "machine": "AMD EPYC 7B13 (8 cores, 2 usable)",
            "command": "bash run/demo.sh --quick --out 'my results'",
        }
        line = machine.provenance_line(record)
        self.assertEqual(ldr_docs.DEMO_PROVENANCE.match(line).groupdict(), record)
        # This machine's own line too, whatever its CPU is called.
        record = machine.provenance(["bash", "run/demo.sh"], now=self.WRITTEN)
        line = machine.provenance_line(record)
        self.assertEqual(ldr_docs.DEMO_PROVENANCE.match(line).groupdict(), record)

    def test_the_documentation_shows_the_date_machine_and_command(self):
        record = {
            "written": "2026-11-24 13:05 UTC",
            "machine": "AMD EPYC 7B13 (2 cores)",
            "command": "bash run/demo.sh --quick",
        }
        self._write(
            machine.provenance_line(record) + "\n\n# Multi-domain demo (quick)\n\nFigures.\n"
        )
        page = ldr_docs.demo_report_page(self.report, self.target)
        self.assertTrue(
            page.startswith(
                "`results/demo/report.md`, written 2026-11-24 13:05 UTC on AMD EPYC 7B13"
                " (2 cores) by `bash run/demo.sh --quick`"
            ),
            page,
        )
        self.assertEqual(page.count("2026-11-24 13:05 UTC"), 1)  # The line is not repeated.
        self.assertIn("\n### Multi-domain demo (quick)\n", page)
        # A report written before the line existed: dated by the file's time.
        self._write("# Multi-domain demo (quick)\n")
        os.utime(self.report, (self.WRITTEN.timestamp(), self.WRITTEN.timestamp()))
        page = ldr_docs.demo_report_page(self.report, self.target)
        self.assertIn("wrote it on 2026-11-24 13:05 UTC (the file's time", page)


class ProjectFilesTest(unittest.TestCase):
    """Issue 47 items 3 and 4: a licence, a citation file, a changelog, and references a
    clone can resolve."""

    def test_no_page_cites_a_path_that_a_clone_lacks(self):
        for path in pages():
            with open(path, encoding="utf-8") as f:
                self.assertNotIn("shared/papers", f.read(), path)

    def test_licence_and_citation(self):
        with open(os.path.join(ROOT, "LICENSE"), encoding="utf-8") as f:
            self.assertTrue(f.read().startswith("MIT License\n"))
        with open(os.path.join(ROOT, "setup.py"), encoding="utf-8") as f:
            self.assertIn('license="MIT",', f.read())
        with open(os.path.join(ROOT, "CITATION.cff"), encoding="utf-8") as f:
            citation = yaml.safe_load(f)
        self.assertEqual(citation["cff-version"], "1.2.0")
        for key in ("message", "title", "authors"):  # Required by CFF 1.2.0.
            self.assertTrue(citation[key], key)
        self.assertIn("ldr-opennmt", citation["title"])
        with open(os.path.join(DOCS, "index.md"), encoding="utf-8") as f:
            home = f.read()
        papers = {
            "Generic and Specialized Word Embeddings for Multi-Domain Machine Translation": (
                "10.5281/zenodo.3524978"
            ),
            "Factorized Transformer for Multi-Domain Neural Machine Translation": (
                "10.18653/v1/2020.findings-emnlp.377"
            ),
            "Multi-Domain Neural Machine Translation with Word-Level Adaptive Layer-wise"
            " Domain Mixing": "10.18653/v1/2020.acl-main.165",
        }
        self.assertEqual(
            {reference["title"]: reference["doi"] for reference in citation["references"]},
            papers,
        )
        for reference in citation["references"]:
            self.assertTrue(reference["authors"] and reference["type"], reference["title"])
            # The home page cites each by title and identifier.
            self.assertIn(" ".join(reference["title"].split()[:4]), " ".join(home.split()))
        for identifier in ("2020.findings-emnlp.377", "2020.acl-main.165", "1911.02692"):
            self.assertIn(identifier, home)

    def test_changelog_keeps_an_unreleased_section(self):
        with open(os.path.join(ROOT, "CHANGELOG.md"), encoding="utf-8") as f:
            text = f.read()
        self.assertIn("https://keepachangelog.com/", text)
        self.assertIn("\n## [Unreleased]\n", text)


@pytest.mark.e2e
class SiteTest(unittest.TestCase):
    def test_the_site_builds_without_a_warning(self):
        with tempfile.TemporaryDirectory() as build:
            result = subprocess.run(
                ["bash", os.path.join(ROOT, "run", "docs.sh")],
                cwd=ROOT,
                env=dict(os.environ, LDR_DOCS_BUILD=build),
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                timeout=600,
            )
            output = "\n".join(
                line
                for line in result.stdout.splitlines()
                if "WARNING" in line or "ERROR" in line or "rror" in line
            )
            self.assertEqual(result.returncode, 0, result.stdout[-5000:])
            self.assertNotIn("WARNING", result.stdout, output)
            for page in ("index", "quickstart", "configuration", "_generated/commands"):
                self.assertTrue(os.path.isfile(os.path.join(build, "html", page + ".html")))
            with open(os.path.join(build, "html", "_generated", "commands.html")) as f:
                commands = f.read()
            for command in ldr_docs_commands.entry_points():
                self.assertIn(command, commands)


if __name__ == "__main__":
    unittest.main()
