"""The papers' tables: the generated findings (which rows beat their Mixed beyond the seed
spread) and the papers' figures beside ours (:mod:`ldr_experiments.quoted`)."""

from ldr_opennmt.reports import markdown_table

from . import quoted
from .demo.findings import row_averages as demo_row_averages


def quoted_lines(averages):
    """The papers' figures beside ours: per paper, its rows with the figure its ordering
    ranks them by (:func:`ldr_experiments.quoted.score`: the printed average, or the mean of the
    domains every row of its table reports), and our average BLEU of the same row."""
    lines = []
    for paper, info in quoted.PAPERS.items():
        entries = [e for e in quoted.QUOTED if e["paper"] == paper]
        if not entries:
            continue
        # The figures the paper's ordering ranks by (quoted.score).
        printed = all(e["average"] is not None for e in entries)
        how = "average" if printed else "mean of the domains its rows share"
        cells = []
        for entry in entries:
            figure = quoted.score(entry)
            ours = averages.get(_our_row(entry["row"]))
            cells.append(
                [
                    entry["row"],
                    entry["paper_row"],
                    "%.1f (%s)" % (figure, how),
                    "%.1f" % ours if ours is not None else "not trained",
                ]
            )
        lines += [
            "### %s, %s (quoted)" % (info["citation"], info["table"]),
            "",
            "%s. %s." % (info["data"], info["metric"]),
            "",
            markdown_table(["our row", "paper's row", "paper (quoted)", "ours"], cells, "llrr"),
            "",
        ]
    return lines


def _our_row(row):
    """Our table's row of a quoted row name (the papers' "predicted" labels are our
    ``pred`` mode; other names are ours as they are)."""
    return row.replace(" (predicted)", " (pred)")


def row_averages(results):
    """``{row: average BLEU}``, a family that reads labels under its bare name too (its
    oracle row)."""
    averages = demo_row_averages(results)
    for row in list(averages):
        if row.endswith(" (oracle)"):
            averages.setdefault(row[: -len(" (oracle)")], averages[row])
    # FT: each domain translated by the model fine-tuned on it (the papers' FT row).
    scores = dict(results["rows"])
    own = [scores.get("FT_%s" % d, {}).get(d) for d in results["domains"]]
    if own and all(score is not None for score in own):
        averages["FT"] = sum(score["bleu"] for score in own) / len(own)
    return averages


def findings(results, spreads, baseline, rows, controls=None):
    """The generated paragraph: which rows beat their Mixed beyond the seed spread, which do
    not, and the ordering of the systems against each paper's.

    Args:
      results: The BLEU results of ``evaluate.evaluate``.
      spreads: ``{control: its seed spread}`` (:func:`ldr_experiments.tables.seed_spreads`):
        a row is judged by the spread of its control (the baseline's where its control has
        none); empty: not measured.
      baseline: The baseline row.
      rows: The table's row names (the systems, without their label modes).
      controls: ``{row: the Mixed row it is judged against}`` (:func:`matched_controls`);
        a row not in it is judged against :obj:`baseline`.

    Returns:
      Markdown lines.
    """
    averages = row_averages(results)
    if baseline not in averages:
        return ["- No %s row: nothing to compare with." % baseline]
    base = averages[baseline]
    spreads = dict(spreads or {})
    controls = {row: c for row, c in (controls or {}).items() if c in averages}
    judged_by = sorted(set(controls.values()) - {baseline})
    beat, within, below = [], [], []
    for row in rows:
        if row == baseline or row not in averages or row.endswith("seed 2)"):
            continue
        control = controls.get(row, baseline)
        if control == row:
            continue  # A control: a line of its own compares it with the baseline.
        spread = spreads.get(control, spreads.get(baseline))
        difference = averages[row] - averages[control]
        cell = "%s (%+.1f%s)" % (row, difference, "" if control == baseline else " on " + control)
        if spread is not None and abs(difference) <= spread:
            within.append(cell)
        elif difference > 0:
            beat.append(cell)
        else:
            below.append(cell)
    lines = [
        "- %s averages %.1f BLEU; the seed spread (trained twice, seeds 1 and 2) is %s."
        % (baseline, base, _spread_words(spreads.get(baseline))),
    ]
    for control in judged_by:
        lines.append(
            "- %s averages %.1f BLEU (%+.1f on %s; seed spread %s): the rows whose output layer"
            " is like its own are judged against it, the others against %s."
            % (
                control,
                averages[control],
                averages[control] - base,
                baseline,
                _spread_words(spreads.get(control)),
                baseline,
            )
        )
    lines += [
        "- Beat their Mixed beyond the spread: %s." % (", ".join(beat) or "none"),
        "- Within the spread (no difference this run can show): %s."
        % (", ".join(within) or "none"),
        "- Below their Mixed beyond the spread: %s." % (", ".join(below) or "none"),
    ]
    # The papers' orderings mix rows of both kinds: judged by the larger spread.
    noise = max(spreads.values()) if spreads else 0.0
    for paper, info in quoted.PAPERS.items():
        theirs = [row for row in quoted.ordering(paper) if row in averages]
        if len(theirs) < 2:
            continue
        agree, reverse = ordering_agreement(theirs, averages, noise)
        pairs = len(theirs) * (len(theirs) - 1) // 2
        ours = sorted(theirs, key=lambda row: -averages[row])
        verdict = (
            "the same ordering"
            if agree == pairs
            else "of its %d pairs, ours orders %d the same way beyond the spread, %d the other"
            " way, and cannot separate %d" % (pairs, agree, reverse, pairs - agree - reverse)
        )
        lines.append(
            "- %s (%s) orders these rows %s; ours: %s: %s."
            % (
                info["citation"],
                info["table"],
                " > ".join(theirs),
                " > ".join("%s %.1f" % (row, averages[row]) for row in ours),
                verdict,
            )
        )
    return lines


def _spread_words(spread):
    return "%.1f BLEU" % spread if spread is not None else "not measured"


def ordering_agreement(ordering, averages, noise):
    """``(agree, reverse)``: of the pairs of rows of :obj:`ordering` (best first), how many
    our averages put in the same order by more than :obj:`noise`, and how many in the
    other order by more than it (the rest are within it)."""
    agree = reverse = 0
    for i, better in enumerate(ordering):
        for worse in ordering[i + 1 :]:
            difference = averages[better] - averages[worse]
            if difference > noise:
                agree += 1
            elif -difference > noise:
                reverse += 1
    return agree, reverse
