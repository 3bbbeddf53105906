"""The report of a per-domain evaluation (:func:`ldr_opennmt.evaluation.evaluate.evaluate`'s
results): BLEU / chrF tables per domain with averages and significance marks
(:func:`format_tables`, :func:`score_table`), their chart (:func:`score_chart`), and example
translations next to their source and reference (:func:`examples`), as Markdown."""

import math
import os

from ldr_opennmt.data import corpus as corpus_lib
from ldr_opennmt.reports import Panel, bar_chart, markdown_table
from ldr_opennmt.utils import read_lines


def score_table(rows, domains, metric, significance=None, alpha=0.05, baseline=None):
    """A Table-2-shaped Markdown table: systems x domains + average.

    Args:
      rows: A list of ``(row_name, {domain: {"bleu": x, "chrf": y}})``.
      domains: The domain order.
      metric: ``"bleu"`` or ``"chrf"``.
      significance: Optional ``{row_name: {domain: p_value}}``; significant
        BLEU differences (p < alpha) against the baseline are marked with ``*``. A domain's
        column has the decimals that tell every marked value from the baseline's (one
        unless rounding would hide a difference: "0.03*" beside "0.00", not "0.0*" beside
        "0.0"; :func:`distinguishing_digits`).
      alpha: The significance level.
      baseline: The baseline row name (a row equal to it is never marked).
    """
    baseline_scores = dict(rows).get(baseline, {})
    marks = {}
    digits = {domain: 1 for domain in domains}
    for name, scores in rows:
        for domain in domains:
            value = scores.get(domain, {}).get(metric)
            p_value = (significance or {}).get(name, {}).get(domain)
            reference = baseline_scores.get(domain, {}).get("bleu")
            if (
                metric == "bleu"
                and value is not None
                and p_value is not None
                and p_value < alpha
                and value != reference
            ):
                marks[(name, domain)] = "*"
                if reference is not None:
                    digits[domain] = max(digits[domain], distinguishing_digits(value, reference))
    table = []
    for name, scores in rows:
        cells = []
        values = []
        for domain in domains:
            value = scores.get(domain, {}).get(metric)
            if value is None:
                cells.append("-")
                continue
            values.append(value)
            cells.append("%.*f%s" % (digits[domain], value, marks.get((name, domain), "")))
        average = sum(values) / len(values) if len(values) == len(domains) else math.nan
        table.append([name] + cells + ["-" if math.isnan(average) else "%.1f" % average])
    return markdown_table(["system"] + list(domains) + ["avg"], table)


def distinguishing_digits(value, reference, most=4):
    """The fewest decimals (1 to :obj:`most`) at which :obj:`value` and :obj:`reference`
    round apart (0.03 and 0.0: 2)."""
    digits = 1
    while digits < most and round(value, digits) == round(reference, digits):
        digits += 1
    return digits


def score_chart(rows, domains, metric, path, title):
    """Writes a grouped bar chart of one metric (a group per domain, a bar per row) as PNG,
    atomically.

    Args:
      rows: A list of ``(row_name, {domain: {"bleu": x, "chrf": y}})``.
      domains: The domain order.
      metric: ``"bleu"`` or ``"chrf"``.
      path: The PNG file to write.
      title: The chart's title.
    """
    series = [
        (name, [scores.get(domain, {}).get(metric, 0.0) for domain in domains])
        for name, scores in rows
    ]
    ylabel = metric.upper() if metric == "bleu" else "chrF"
    figsize = (2 + 1.6 * len(domains) + 0.3 * len(rows), 4.5)
    bar_chart(path, domains, [Panel(title, ylabel, series, None)], figsize)


def examples(corpus_dir, results, per_domain=2, rows=None, min_words=4, max_words=25):
    """Example translations next to their source and reference, as Markdown.

    The examples are the first :obj:`per_domain` test sentences of each domain whose
    source has :obj:`min_words` to :obj:`max_words` words (short enough to read in a table); the
    choice does not depend on the systems' outputs.

    Args:
      corpus_dir: The corpus the results were computed on.
      results: The results of :func:`ldr_opennmt.evaluation.evaluate.evaluate`.
      per_domain: Examples per domain.
      rows: The rows to show (default: all, in the results' order).
      min_words: The shortest source shown.
      max_words: The longest source shown.

    Returns:
      A Markdown string: one table per example (system, translation).
    """
    info = corpus_lib.load_info(corpus_dir)
    src, tgt = info["source_lang"], info["target_lang"]
    detok = corpus_lib.load_tokenizer(corpus_dir, tgt)
    rows = rows or [row for row, _ in results["rows"]]
    outputs = {row: read_lines(results["outputs"][row]) for row in rows}
    lines = []
    start = 0
    for domain in results["domains"]:
        count = results["sentences"][domain]
        sources = read_lines(os.path.join(corpus_dir, "raw", "test.%s.%s" % (domain, src)))
        references = read_lines(os.path.join(corpus_dir, "raw", "test.%s.%s" % (domain, tgt)))
        chosen = [i for i in range(count) if min_words <= len(sources[i].split()) <= max_words]
        for number, i in enumerate(chosen[:per_domain], start=1):
            table = [["*reference*", _cell(references[i])]]
            for row in rows:
                hypothesis = detok.detokenize(outputs[row][start + i].split())
                table.append([row, _cell(hypothesis)])
            lines += [
                "**%s %d** (test line %d): %s" % (domain, number, i + 1, sources[i]),
                "",
                markdown_table(["system", "translation"], table, align="ll"),
                "",
            ]
        start += count
    return "\n".join(lines).rstrip() + "\n"


def _cell(text):
    return text.replace("|", "\\|")


def average(scores, metric="bleu"):
    """The average of a row's per-domain scores."""
    return sum(s[metric] for s in scores.values()) / len(scores)


def format_tables(results):
    """The BLEU and chrF tables with significance marks and signatures."""
    domains, rows = results["domains"], results["rows"]
    parts = []
    for metric, title in (("bleu", "BLEU"), ("chrf", "chrF")):
        parts.append("### %s\n" % title)
        parts.append(
            score_table(
                rows, domains, metric, results["significance"], baseline=results.get("baseline")
            )
        )
        parts.append("")
    if results.get("baseline"):
        parts.append(
            "`*`: BLEU differs from %s with p < 0.05 (sacrebleu paired bootstrap); a domain"
            " whose marked values would round to the baseline's has more decimals."
            % results["baseline"]
        )
    parts.append(
        "Test sentences per domain: %s."
        % ", ".join("%s %d" % (d, n) for d, n in results["sentences"].items())
    )
    for note in results.get("notes", ()):  # Rows left out, and why.
        parts.append("")
        parts.append("Note: %s." % note)
    parts.append("")
    parts.append(
        "Signatures: BLEU `%s`; chrF `%s`."
        % (results["signatures"]["BLEU"], results["signatures"]["chrF"])
    )
    return "\n".join(parts)
