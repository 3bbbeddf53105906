"""Figures quoted from a report, checked against it (issue 59 item 6).

A report a page quotes is kept in the repository as a record: ``docs/records/NAME.md``, the
report as the command wrote it (``cp results/tables/report.md docs/records/tables-DATE.md``).
A page quotes one of its figures as a link to the record whose title names the cell:

    LDR (summed) averages [27.8](records/tables-2026-11-28.md "row: LDR (summed) (oracle);
    column: avg BLEU") BLEU

(one line in the page; a reader follows the link to the whole report). :func:`check` reads
every such link of a page and fails when its text is not the cell's figure: a figure copied
wrong, or a record replaced without its quotes.
"""

import os
import re

#: A quoted figure: ``[TEXT](.../records/NAME.md "row: ROW; column: COLUMN")``.
QUOTE = re.compile(
    r"\[(?P<text>[^\]]+)\]\((?P<path>(?:[^)\s]*/)?records/[^)\s]+\.md)"
    r' "row: (?P<row>[^;"]+); column: (?P<column>[^"]+)"\)'
)


def tables(text):
    """The Markdown tables of :obj:`text`: a list of ``(header, rows)``, each row a list of
    cells (stripped)."""
    found, lines = [], text.splitlines()
    i = 0
    while i < len(lines):
        if (
            lines[i].startswith("|")
            and i + 1 < len(lines)
            and re.match(r"^\|[\s:|-]+\|$", lines[i + 1].strip())
        ):
            header = _cells(lines[i])
            rows = []
            i += 2
            while i < len(lines) and lines[i].startswith("|"):
                rows.append(_cells(lines[i]))
                i += 1
            found.append((header, rows))
        else:
            i += 1
    return found


def _cells(line):
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def cell(text, row, column):
    """The cells of :obj:`text`'s tables in row :obj:`row` (its first cell) and column
    :obj:`column` (its header): a list, one per table that has both."""
    cells = []
    for header, rows in tables(text):
        if column not in header:
            continue
        index = header.index(column)
        for cells_of_row in rows:
            if cells_of_row and cells_of_row[0] == row and index < len(cells_of_row):
                cells.append(cells_of_row[index])
    return cells


def figure(value):
    """The leading number of a cell or a quote (``"27.8 ± 0.4"`` -> ``"27.8"``), or the text."""
    match = re.match(r"^\s*([+-]?\d+(?:\.\d+)?%?)", value)
    return match.group(1) if match else value.strip()


def check(page_path):
    """The quoted figures of one page that differ from their record: a list of
    ``"PAGE: TEXT quotes ROW / COLUMN of RECORD: CELLS"`` messages (``[]``: every quote
    holds).

    Raises:
      OSError: when a quoted record does not exist.
    """
    page = _prose(page_path)
    problems = []
    for match in QUOTE.finditer(page):
        record_path = os.path.normpath(
            os.path.join(os.path.dirname(page_path), match.group("path"))
        )
        with open(record_path, encoding="utf-8") as f:
            record = f.read()
        row, column = match.group("row").strip(), match.group("column").strip()
        found = cell(record, row, column)
        quoted = figure(match.group("text"))
        if not any(figure(value) == quoted for value in found):
            problems.append(
                "%s: %s quotes %s / %s of %s, which has %s"
                % (
                    page_path,
                    match.group("text"),
                    row,
                    column,
                    record_path,
                    ", ".join(found) if found else "no such cell",
                )
            )
    return problems


def quotes(page_path):
    """The number of quoted figures of one page."""
    return len(QUOTE.findall(_prose(page_path)))


def _prose(page_path):
    """A page's text without its code (fenced blocks and inline code): an example of a quote
    there is not a quote."""
    with open(page_path, encoding="utf-8") as f:
        text = f.read()
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    return re.sub(r"`[^`]*`", "", text)
