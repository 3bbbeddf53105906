"""The report of a per-domain evaluation (:func:`ldr_opennmt.evaluation.evaluate.evaluate`'s
results): BLEU / chrF tables per domain with averages, and example translations next to
their source and reference, as Markdown."""

import os

from ldr_opennmt.data import corpus as corpus_lib
from ldr_opennmt.evaluation import scoring
from ldr_opennmt.utils import read_lines


def examples(corpus_dir, results, per_domain=2, rows=None, min_words=4, max_words=25):
    """Example translations next to their source and reference, as Markdown.

    The examples are the first :obj:`per_domain` test sentences of each domain whose
    source has :obj:`min_words` to :obj:`max_words` words (short enough to read in a table); the
    choice does not depend on the systems' outputs.

    Args:
      corpus_dir: The corpus the results were computed on.
      results: The results of :func:`evaluate`.
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
            lines += [
                "**%s %d** (test line %d): %s" % (domain, number, i + 1, sources[i]),
                "",
                "| system | translation |",
                "|---|---|",
                "| *reference* | %s |" % _cell(references[i]),
            ]
            for row in rows:
                hypothesis = detok.detokenize(outputs[row][start + i].split())
                lines.append("| %s | %s |" % (row, _cell(hypothesis)))
            lines.append("")
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
            scoring.markdown_table(
                rows, domains, metric, results["significance"], baseline=results.get("baseline")
            )
        )
        parts.append("")
    if results.get("baseline"):
        parts.append(
            "`*`: BLEU differs from %s with p < 0.05 (sacrebleu paired bootstrap)."
            % results["baseline"]
        )
    parts.append(
        "Test sentences per domain: %s."
        % ", ".join("%s %d" % (d, n) for d, n in results["sentences"].items())
    )
    parts.append("")
    parts.append(
        "Signatures: BLEU `%s`; chrF `%s`."
        % (results["signatures"]["BLEU"], results["signatures"]["chrF"])
    )
    return "\n".join(parts)
