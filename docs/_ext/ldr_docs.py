"""The documentation's Sphinx extension: the generated pages and the checks of the build.

At ``config-inited``, before any page is read, it writes ``docs/_generated/`` (ignored by
git) from the code and from the files the commands write:

- ``commands.md``: every command's and sub-command's help, from their argument parsers
  (:mod:`ldr_docs_commands`);
- ``families.md`` and ``family/NAME.md``: the family registry
  (:func:`ldr_opennmt.cli.families.describe`, :func:`~ldr_opennmt.probe.capabilities`;
  the model definition files: :func:`ldr_experiments.systems.model_def`);
- ``api/*.md``: one ``automodule`` per module of the package, by sub-package (the
  modules are found by walking the package, so a new module is documented by itself);
- ``demo-report.md``: the demo's latest report (``results/demo/report.md``, written by
  ``bash run/demo.sh``) with the date, machine and command its first line records, or a
  note saying it has not run here; ``tables-report.md`` the same for
  ``results/tables/report.md`` (``bash run/tables.sh``).

It then checks, and reports as build warnings (errors under ``-W``, as ``run/docs.sh``
and ``tests/test_docs.py`` build):

- ``docs/configuration.md`` is what ``python -m ldr_opennmt.config_keys`` prints;
- every configuration key the package's source reads is in that reference, among the
  top-level keys of ``docs/training.md``, or OpenNMT-tf's (:mod:`ldr_docs_keys`);
- every registered family is on a family page (``docs/families/*.md`` includes its
  ``family/NAME.md``).
"""

import datetime
import os
import pkgutil
import re
import shutil

import ldr_docs_commands
import ldr_docs_keys
from sphinx.util import logging

logger = logging.getLogger(__name__)

DOCS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROOT = os.path.dirname(DOCS)
GENERATED = os.path.join(DOCS, "_generated")
DEMO_REPORT = os.path.join(ROOT, "results", "demo", "report.md")
TABLES_REPORT = os.path.join(ROOT, "results", "tables", "report.md")
#: The page whose table lists the package's top-level configuration keys.
TOP_LEVEL_KEYS_PAGE = os.path.join(DOCS, "training.md")
#: The sub-packages of the API reference, in order; the top-level modules go first.
API_SKIP = ("ldr_opennmt.cli",)  # The commands: see the command reference.
#: Docstrings whose markup is not valid reStructuredText yet: shown verbatim (a literal
#: block) instead of failing the build. Fix the docstring, then remove its entry.
VERBATIM_DOCSTRINGS = {
    # The "Returns:" literal ``{"values": {domain|"all": ...}`` spans two lines.
    "ldr_opennmt.evaluation.contrastive.scoring.label_shift",
}


def _write(path, text):
    """Writes :obj:`path` only when its contents change (Sphinx re-reads what changed)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            if f.read() == text:
                return
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def families_page():
    from ldr_opennmt.cli import families  # pylint: disable=import-outside-toplevel

    lines = [
        "Generated from the family registry (`ldr_opennmt/registry.py`) when the site is",
        "built; `ldr-main --list-families` prints the same table.",
        "",
    ]
    return "\n".join(lines + families.describe()) + "\n"


def family_snippet(family):
    from ldr_experiments import systems  # pylint: disable=import-outside-toplevel
    from ldr_opennmt import probe  # pylint: disable=import-outside-toplevel

    caps = probe.capabilities(family.name)
    definitions = [systems.model_def(family.name, scale) for scale in systems.SCALES]
    definitions = [d for d in definitions if d]
    rows = [
        ("registry name", "`%s`" % family.name),
        ("title in tables", family.title),
        ("paper", family.paper),
        ("idea", family.summary),
        ("model definitions", ", ".join("`%s`" % d for d in definitions) or "none"),
        ("labels at inference", caps.labels),
        ("training modes", ", ".join("`%s`" % m for m in caps.domain_training)
         + " (default `%s`)" % caps.default_domain_training),
        ("stages", "`%s`, then `finetune: %s`" % (family.stage1, family.finetune)
         if family.stage1 else "one"),
        ("CTranslate2", "refused: %s" % caps.ctranslate2 if caps.ctranslate2
         else "one plain model per domain" if caps.domain_parameters else "one plain model"),
        ("ensembles of views", "refused: %s" % caps.ensembles if caps.ensembles else "yes"),
    ]  # fmt: skip
    lines = ["| `%s` | |" % family.name, "|---|---|"]
    lines += ["| %s | %s |" % (k, v.replace("|", "\\|")) for k, v in rows[1:]]
    return "\n".join(lines) + "\n"


def api_pages():
    """``{page name: Markdown}``: the API reference, one page per sub-package."""
    import ldr_opennmt  # pylint: disable=import-outside-toplevel

    groups = {}
    for module in pkgutil.walk_packages(ldr_opennmt.__path__, "ldr_opennmt."):
        name = module.name
        if any(name == skip or name.startswith(skip + ".") for skip in API_SKIP):
            continue
        if any(part.startswith("_") for part in name.split(".")):
            continue
        parts = name.split(".")
        group = "ldr_opennmt" if len(parts) == 2 and not module.ispkg else ".".join(parts[:2])
        groups.setdefault(group, []).append(name)
    pages = {}
    for group, modules in sorted(groups.items(), key=lambda g: (g[0] != "ldr_opennmt", g[0])):
        title = "Top-level modules" if group == "ldr_opennmt" else "`%s`" % group
        lines = ["# %s" % title, ""]
        for name in sorted(modules):
            lines += ["## `%s`" % name, "", "```{eval-rst}", ".. automodule:: %s" % name]
            lines += ["   :members:", "   :show-inheritance:", "```", ""]
        pages[group] = "\n".join(lines)
    index = [
        "# Python API",
        "",
        "Generated from the docstrings (Sphinx autodoc, Google style through napoleon) of",
        "every module of the package but the commands (see [the commands](../commands.md)),",
        "found by walking the package when the site is built.",
        "",
        "```{toctree}",
        ":maxdepth: 1",
        "",
    ]
    index += sorted(pages, key=lambda g: (g != "ldr_opennmt", g)) + ["```", ""]
    pages["index"] = "\n".join(index)
    return pages


#: The first line of the demo's report (``ldr_experiments/machine.py``, ``PROVENANCE``):
#: when (UTC), on which machine and by which command it was written.
DEMO_PROVENANCE = re.compile(
    r"^Written (?P<written>\d{4}-\d\d-\d\d \d\d:\d\d UTC) on (?P<machine>.+) by"
    r" `(?P<command>[^`]+)`\.$"
)


def demo_report_page(
    report=DEMO_REPORT,
    target=os.path.join(GENERATED, "demo"),
    command="bash run/demo.sh",
    shown="results/demo/report.md",
):
    """The demo's latest report (:obj:`report`) with its date, machine and command, for
    ``docs/demo.md`` to include; or why there is none. Its first line
    (:data:`DEMO_PROVENANCE`) becomes the sentence that introduces it; a report written
    before the demo recorded them is dated by the file's time. Its headings go two levels
    down (under the page's section) and its images (``bleu.png``) are copied to
    :obj:`target`. The tables' report (``bash run/tables.sh``: :obj:`command`, and
    :obj:`shown`, the report's path as the page names it) is shown the same way on
    ``docs/tables.md``."""
    if not os.path.isfile(report):
        return (
            "No report here yet: `%s` writes `%s`"
            " (`results/` is not in the repository: it is this machine's), and the next"
            " `bash run/docs.sh` shows it on this page, with its date and machine.\n"
            % (command, shown)
        )
    with open(report, encoding="utf-8") as f:
        text = f.read().splitlines()
    provenance = DEMO_PROVENANCE.match(text[0]) if text else None
    if provenance:
        text = text[1:]
        intro = (
            "`%(shown)s`, written %(written)s on %(machine)s by `%(command)s`"
            ' (its first line; rows of its "Time" table marked "earlier run" were measured'
            " by an earlier run of the same stages).\n\n"
            % dict(provenance.groupdict(), shown=shown)
        )
    else:
        written = datetime.datetime.fromtimestamp(
            os.path.getmtime(report), tz=datetime.timezone.utc
        ).strftime("%Y-%m-%d %H:%M UTC")
        intro = (
            "`%s`, as `%s` wrote it on %s (the file's"
            " time: the report predates the line that records its date, machine and"
            ' command; its "Time" section has the time per step measured there).\n\n'
            % (shown, command, written)
        )
    source = os.path.dirname(report)
    os.makedirs(target, exist_ok=True)
    for name in os.listdir(source):
        if name.endswith(".png"):
            shutil.copyfile(os.path.join(source, name), os.path.join(target, name))
    lines, fence = [], False
    for line in text:
        if line.lstrip().startswith("```"):
            fence = not fence
        if not fence and line.startswith("#"):
            line = "##" + line
        # Images: relative to docs/demo.md, the page that includes this text.
        line = re.sub(
            r"\]\(([\w.-]+\.png)\)",
            r"](_generated/%s/\1)" % os.path.basename(target),
            line,
        )
        lines.append(line)
    return intro + "\n".join(lines) + "\n"


def top_level_keys():
    """The top-level keys listed in the table of :data:`TOP_LEVEL_KEYS_PAGE`
    (rows ``| `KEY` | ...`` under a header starting ``| top-level key``)."""
    keys, in_table = set(), False
    with open(TOP_LEVEL_KEYS_PAGE, encoding="utf-8") as f:
        for line in f:
            if line.startswith("| top-level key"):
                in_table = True
            elif in_table and not line.startswith("|"):
                in_table = False
            elif in_table:
                match = re.match(r"^\| `([a-z_]+)` \|", line)
                if match:
                    keys.add(match.group(1))
    return keys


def check_configuration_keys():
    """Warnings: the reference is stale, or a key the code reads is in no reference."""
    from ldr_opennmt import config_keys  # pylint: disable=import-outside-toplevel

    problems = []
    with open(os.path.join(DOCS, "configuration.md"), encoding="utf-8") as f:
        if f.read() != config_keys.markdown_reference():
            problems.append(
                "docs/configuration.md is stale: python -m ldr_opennmt.config_keys >"
                " docs/configuration.md"
            )
    documented = {(key.section, key.name) for key in config_keys.KEYS}
    missing = ldr_docs_keys.undocumented_keys(
        os.path.join(ROOT, "ldr_opennmt"), documented, ldr_docs_keys.opennmt_keys(),
        top_level_keys(), repository=ROOT,
    )  # fmt: skip
    for (section, key), places in missing.items():
        where = "a top-level key" if section == "top" else "%s: %s" % (section, key)
        problems.append(
            "configuration key %s is read by %s but is in no reference (add it to"
            " ldr_opennmt/config_keys.py KEYS%s)"
            % (
                key if section == "top" else where,
                ", ".join(places),
                ", or to the top-level keys of docs/training.md" if section == "top" else "",
            )
        )
    return problems


def check_family_pages():
    from ldr_opennmt import registry  # pylint: disable=import-outside-toplevel

    text = ""
    folder = os.path.join(DOCS, "families")
    for name in sorted(os.listdir(folder)):
        if name.endswith(".md"):
            with open(os.path.join(folder, name), encoding="utf-8") as f:
                text += f.read()
    return [
        "family %s (%s) is on no page of docs/families/: include"
        " ../_generated/family/%s.md in its page" % (name, registry.get(name).title, name)
        for name in registry.names()
        if "_generated/family/%s.md" % name not in text
    ]


def generate(app=None, config=None):
    """Writes ``docs/_generated/`` and runs the checks (warnings)."""
    from ldr_opennmt import registry  # pylint: disable=import-outside-toplevel

    _write(os.path.join(GENERATED, "commands.md"), ldr_docs_commands.reference() + "\n")
    _write(os.path.join(GENERATED, "families.md"), families_page())
    for family in registry.families():
        _write(os.path.join(GENERATED, "family", family.name + ".md"), family_snippet(family))
    for name, text in api_pages().items():
        _write(os.path.join(GENERATED, "api", name + ".md"), text)
    _write(os.path.join(GENERATED, "demo-report.md"), demo_report_page())
    _write(
        os.path.join(GENERATED, "tables-report.md"),
        demo_report_page(
            TABLES_REPORT,
            os.path.join(GENERATED, "tables"),
            "bash run/tables.sh",
            "results/tables/report.md",
        ),
    )
    problems = check_configuration_keys() + check_family_pages()
    for problem in problems:
        logger.warning(problem, type="ldr_docs", subtype="check")
    return problems


def verbatim_docstring(app, what, name, obj, options, lines):
    """``autodoc-process-docstring``: the docstrings of :data:`VERBATIM_DOCSTRINGS` as a
    literal block."""
    if name in VERBATIM_DOCSTRINGS and lines:
        lines[:] = ["::", ""] + ["   " + line for line in lines] + [""]


def setup(app):
    app.connect("config-inited", generate)
    app.connect("autodoc-process-docstring", verbatim_docstring, priority=400)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
