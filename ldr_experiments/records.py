"""Figures quoted from a report, checked against it (issue 59 item 6).

A report a page quotes is kept in the repository as a record: ``docs/records/NAME.md``, the
report as the command wrote it, or, with the figures it shows, a folder of its own
(``docs/records/tables-DATE/report.md`` and its ``*.png``, copied from ``results/tables/``:
the site shows it as a page, its images beside it).
A page quotes one of its figures as a link to the record whose title names the cell:

    LDR (summed) averages [27.8](records/tables-2026-11-28.md "row: LDR (summed) (oracle);
    column: avg BLEU") BLEU

(one line in the page; a reader follows the link to the whole report). :func:`check` reads
every such link of a page and fails when its text is not the cell's figure: a figure copied
wrong, or a record replaced without its quotes.

``ldr-experiments quote RECORD [--row ROW] [--column COLUMN]`` writes those links: every cell
of the record's tables (or of one row, one column) as the link a page pastes, the figure
taken from the cell, so that a quote is never typed by hand.
"""

import argparse
import os
import re
import sys

from ldr_opennmt.errors import UserError

#: A quoted figure: ``[TEXT](.../records/NAME.md "row: ROW; column: COLUMN")``; TEXT is the
#: cell's figure or its text from the start, brackets included (``144% [53, 642]``).
QUOTE = re.compile(
    r"\[(?P<text>(?:[^\[\]]|\[[^\[\]]*\])+)\]\((?P<path>(?:[^)\s]*/)?records/[^)\s]+\.md)"
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
        text = match.group("text").strip()
        quoted = figure(text)
        # The figure, or the cell's text from its start (``31.0 ± 0.5``, ``144% [53, 642]``).
        if not any(
            figure(value) == quoted and (text == quoted or value.strip().startswith(text))
            for value in found
        ):
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


def link(record_name, row, column, value, page_dir="docs"):
    """The quote of one cell: ``[FIGURE](records/NAME.md "row: ROW; column: COLUMN")``.

    Args:
      record_name: The record's file name (``tables-2026-11-28.md``).
      row: The cell's row (its first cell).
      column: The cell's column (its header).
      value: The cell (its figure is quoted: :func:`figure`).
      page_dir: Where the quoting page is, relative to the repository (``docs``,
        ``docs/families``, ``.`` for the README): the link is relative to it.
    """
    path = os.path.relpath(os.path.join("docs", "records", record_name), page_dir)
    return '[%s](%s "row: %s; column: %s")' % (figure(value), path, row, column)


def links(text, record_name, row=None, column=None, page_dir="docs"):
    """The quotes of every cell of :obj:`text`'s tables, or of those in :obj:`row` and/or
    :obj:`column`: a list of :func:`link` strings, table by table, row by row (the row's
    own name, its first cell, is not quoted)."""
    found = []
    for header, rows in tables(text):
        for cells_of_row in rows:
            if not cells_of_row or (row is not None and cells_of_row[0] != row):
                continue
            for name, value in zip(header[1:], cells_of_row[1:]):
                if column is not None and name != column:
                    continue
                found.append(link(record_name, cells_of_row[0], name, value, page_dir))
    return found


def record_name(path):
    """The record's path under ``docs/records/`` (``tables-DATE/report.md``, ``NAME.md``), from
    its path as given (the file name alone when it is not under a ``records`` folder)."""
    parts = os.path.abspath(path).split(os.sep)
    if "records" not in parts[:-1]:
        return os.path.basename(path)
    last = len(parts) - 1 - parts[::-1].index("records")
    return "/".join(parts[last + 1 :])


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="ldr-experiments quote",
        description="The links a page pastes to quote figures of a record (docs/records/"
        "NAME.md), one per cell; tests/experiments/test_records.py checks them.",
    )
    parser.add_argument("record", help="the record: docs/records/NAME.md")
    parser.add_argument("--row", help="only this row (its first cell, as in the record)")
    parser.add_argument("--column", help="only this column (its header, as in the record)")
    parser.add_argument(
        "--page_dir",
        default="docs",
        help="the quoting page's folder, relative to the repository (docs, docs/families, "
        "'.' for the README): the links are relative to it (default: docs)",
    )
    args = parser.parse_args(argv)
    try:
        with open(args.record, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise UserError("%s: cannot read the record (%s)" % (args.record, e.strerror)) from e
    found = links(text, record_name(args.record), args.row, args.column, args.page_dir)
    if not found:
        raise UserError(
            "%s: no cell%s%s in its tables"
            % (
                args.record,
                " in row %r" % args.row if args.row else "",
                " in column %r" % args.column if args.column else "",
            )
        )
    sys.stdout.write("\n".join(found) + "\n")
    return 0
