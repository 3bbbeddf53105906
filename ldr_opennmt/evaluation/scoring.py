"""Per-domain scoring with sacrebleu: BLEU, chrF, paired bootstrap, tables and a chart."""

import math

from sacrebleu.metrics import BLEU, CHRF
from sacrebleu.significance import PairedTest

from ldr_opennmt.errors import UserError
from ldr_opennmt.utils import save_figure


def check_aligned(hypotheses, references, what):
    """Raises a one-line error when a system output and its references differ in length."""
    if hypotheses is None:
        raise UserError("%s: missing predictions" % what)
    if len(hypotheses) != len(references):
        raise UserError(
            "%s: %d predictions for %d references" % (what, len(hypotheses), len(references))
        )


def score(hypotheses, references):
    """Returns ``{"bleu": float, "chrf": float}`` for one test set."""
    return {
        "bleu": BLEU().corpus_score(hypotheses, [references]).score,
        "chrf": CHRF().corpus_score(hypotheses, [references]).score,
    }


def signatures():
    """The sacrebleu signatures of the scores reported here."""
    result = {}
    for name, metric in (("BLEU", BLEU()), ("chrF", CHRF())):
        metric.corpus_score(["x"], [["x"]])  # The signature needs the reference count.
        result[name] = str(metric.get_signature())
    return result


def paired_bootstrap(baseline, systems, references, n_samples=1000):
    """Paired bootstrap resampling of BLEU against a baseline (sacrebleu's test).

    The resampling seed is sacrebleu's (``SACREBLEU_SEED``, 12345 by default), so
    the p-values are reproducible.

    Args:
      baseline: The baseline hypotheses.
      systems: A dict ``{name: hypotheses}``.
      references: The references.

    Returns:
      A dict ``{name: p_value}``.
    """
    if not systems:
        return {}
    named = [("baseline", baseline)] + list(systems.items())
    test = PairedTest(
        named,
        {"BLEU": BLEU(references=[references])},
        references=None,
        test_type="bs",
        n_samples=n_samples,
        n_jobs=1,
    )
    _, results = test()
    return {
        name: result.p_value for name, result in zip(results["System"][1:], results["BLEU"][1:])
    }


def markdown_table(rows, domains, metric, significance=None, alpha=0.05, baseline=None):
    """A Table-2-shaped Markdown table: systems x domains + average.

    Args:
      rows: A list of ``(row_name, {domain: {"bleu": x, "chrf": y}})``.
      domains: The domain order.
      metric: ``"bleu"`` or ``"chrf"``.
      significance: Optional ``{row_name: {domain: p_value}}``; significant
        BLEU differences (p < alpha) against the baseline are marked with ``*``.
      baseline: The baseline row name (a row equal to it is never marked).
    """
    baseline_scores = dict(rows).get(baseline, {})
    header = "| system | %s | avg |" % " | ".join(domains)
    lines = [header, "|---|%s---:|" % ("---:|" * len(domains))]
    for name, scores in rows:
        cells = []
        values = []
        for domain in domains:
            value = scores.get(domain, {}).get(metric)
            if value is None:
                cells.append("-")
                continue
            values.append(value)
            mark = ""
            p_value = (significance or {}).get(name, {}).get(domain)
            reference = baseline_scores.get(domain, {}).get("bleu")
            if (
                metric == "bleu"
                and p_value is not None
                and p_value < alpha
                and scores[domain]["bleu"] != reference
            ):
                mark = "*"
            cells.append("%.1f%s" % (value, mark))
        average = sum(values) / len(values) if len(values) == len(domains) else math.nan
        lines.append(
            "| %s | %s | %s |"
            % (name, " | ".join(cells), "-" if math.isnan(average) else "%.1f" % average)
        )
    return "\n".join(lines)


def bar_chart(rows, domains, metric, path, title):
    """Writes a grouped bar chart (one group per domain, one bar per system) as PNG,
    atomically (:func:`ldr_opennmt.utils.save_figure`)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    width = 0.8 / max(1, len(rows))
    fig, ax = plt.subplots(figsize=(2 + 1.6 * len(domains) + 0.3 * len(rows), 4.5))
    for i, (name, scores) in enumerate(rows):
        xs = [d + i * width for d in range(len(domains))]
        ys = [scores.get(domain, {}).get(metric, 0.0) for domain in domains]
        bars = ax.bar(xs, ys, width=width, label=name)
        ax.bar_label(bars, fmt="%.1f", fontsize=6, padding=1)
    ax.set_xticks([d + width * (len(rows) - 1) / 2 for d in range(len(domains))])
    ax.set_xticklabels(domains)
    ax.set_ylabel(metric.upper() if metric == "bleu" else "chrF")
    ax.set_title(title)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    try:
        # Under an exclusive temporary name, renamed when complete (PNG named explicitly:
        # the temporary name has no extension).
        save_figure(fig, path, dpi=120, format="png")
    finally:
        plt.close(fig)
