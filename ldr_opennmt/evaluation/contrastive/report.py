"""The report of the contrastive test: its results (``contrastive.json``), their tables
(``contrastive.md``: accuracy, following the label, label effect) and chart
(``contrastive.png``), from :func:`ldr_opennmt.evaluation.contrastive.scoring.evaluate`'s
results."""

import json
import os

from ldr_opennmt.reports import Panel, bar_chart, markdown_table, pyplot
from ldr_opennmt.utils import save_figure, write_lines_atomic

RESULTS_FILE = "contrastive.json"
TABLE_FILE = "contrastive.md"
CHART_FILE = "contrastive.png"


def write_report(results, out_dir):
    """Writes :data:`RESULTS_FILE`, :data:`TABLE_FILE` (:func:`format_tables`) and
    :data:`CHART_FILE` (:func:`chart`) in :obj:`out_dir`, each atomically."""
    write_lines_atomic(os.path.join(out_dir, RESULTS_FILE), [json.dumps(results, indent=2)])
    write_lines_atomic(os.path.join(out_dir, TABLE_FILE), [format_tables(results)])
    chart(results, os.path.join(out_dir, CHART_FILE))


def _cell(value):
    return "-" if value is None else "%.1f" % value


def _metric_rows(results, metric, keys, name):
    return [
        [name(row)] + [_cell(row["values"][k]) for k in keys]
        for row in results["rows"]
        if row["metric"] == metric
    ]


def format_tables(results):
    """The accuracy, follow and label-effect tables of the results, in Markdown."""
    if results.get("not_run"):
        return "The contrastive test was not run: %s." % results["not_run"]
    domains = results["domains"]
    keys = list(domains) + ["all"]
    header = ["system"] + keys
    items = dict(results["items"], all=sum(results["items"].values()))
    pairs = dict(results["pairs"], all=sum(results["pairs"].values()))
    pairs_row = ["*pairs*"] + [str(pairs[k]) for k in keys]
    accuracy = [["*items*"] + [str(items[k]) for k in keys]]
    accuracy += _metric_rows(results, "accuracy", keys, lambda row: row["row"])
    follow = [pairs_row] + _metric_rows(
        results,
        "follow",
        keys,
        lambda row: row["row"] if row["labels"] else "%s (labels ignored)" % row["row"],
    )
    parts = [
        "### Accuracy: % of items where the reference scores above every variant",
        "",
        markdown_table(header, accuracy),
        "",
        "### Following the label: % of (item, variant) pairs where the variant scores above the "
        "reference under the variant's domain label (flipped)",
        "",
        markdown_table(header, follow),
    ]
    shift_rows = [row for row in results["rows"] if row["metric"] == "shift"]
    if shift_rows:
        shift = [pairs_row]
        for row in shift_rows:
            cells = [
                (
                    "-"
                    if row["values"][k] is None
                    else "%.1f (%+.2f)" % (row["values"][k], row["margin"][k])
                )
                for k in keys
            ]
            shift.append([row["row"]] + cells)
        parts += [
            "",
            "### Label effect: % of pairs where the variant's label, instead of the item's, "
            "raises the variant against the reference (mean change of the log-probability "
            "difference in parentheses)",
            "",
            markdown_table(header, shift),
        ]
    parts += [
        "",
        "Columns: the domain of the item (its source sentence and reference). A system that "
        "ignores labels is scored once: its follow rate (the pairs where it prefers the other "
        "domain's word anyway) is the baseline a flipped row compares with. Ties count as "
        "wrong. Items: %s (sha1 %s)." % (results["items_file"], results["items_sha1"][:12]),
    ]
    return "\n".join(parts)


def chart(results, path):
    """Writes the accuracy, follow and label-effect rates per domain as a PNG (a panel each)."""
    if results.get("not_run"):
        plt = pyplot()
        figure = plt.figure(figsize=(6, 1.5))
        figure.text(0.5, 0.5, "Contrastive test not run: no item found", ha="center")
        try:
            save_figure(figure, path)
        finally:
            plt.close(figure)
        return
    keys = list(results["domains"]) + ["all"]
    metrics = [
        ("accuracy", "Reference above every variant (% items)"),
        ("follow", "Variant preferred under its label (% pairs)"),
    ]
    if any(row["metric"] == "shift" for row in results["rows"]):
        metrics.append(("shift", "Variant raised by its label (% pairs)"))
    panels = [
        Panel(
            title,
            "%",
            [
                (row["row"], [row["values"][k] for k in keys])
                for row in results["rows"]
                if row["metric"] == metric
            ],
            (0, 105),
        )
        for metric, title in metrics
    ]
    bar_chart(
        path,
        keys,
        panels,
        figsize=(3 + 1.6 * len(keys), 3.2 * len(panels)),
        value_format="%.0f",
        title_size=9,
        legend_size=6,
    )
