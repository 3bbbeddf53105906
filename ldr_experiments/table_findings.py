"""The papers' tables: the generated findings (which rows beat their matched Mixed by the
stated test) and the papers' figures beside ours (:mod:`ldr_experiments.quoted`)."""

from ldr_opennmt.reports import markdown_table

from . import quoted
from .demo.findings import row_averages as demo_row_averages
from .table_verdicts import ALL, system_and_mode


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


def findings(results, verdict_judge, baseline, rows, controls=None, tied=None):
    """The generated paragraph: which rows beat their matched Mixed by the stated test, which
    are below it, where no difference is found, and the ordering of the systems against each
    paper's (only its pairs of rows with the same output layer: a matched comparison).

    Args:
      results: The BLEU results of ``evaluate.evaluate``.
      verdict_judge: The table's :class:`ldr_experiments.table_verdicts.Judge`.
      baseline: The baseline row.
      rows: The table's row names (the systems, without their label modes, no seed twins).
      controls: ``{row: the Mixed row it is judged against}`` (:func:`matched_controls`);
        a row not in it is judged against :obj:`baseline`.
      tied: ``{row: whether its output layer is tied}``.

    Returns:
      Markdown lines.
    """
    averages = row_averages(results)
    if baseline not in averages:
        return ["- No %s row: nothing to compare with." % baseline]
    controls = {row: c for row, c in (controls or {}).items() if c in averages}
    tied = tied or {}
    beat, within, below = [], [], []
    for row in rows:
        if row == baseline or row not in averages:
            continue
        control = controls.get(row, baseline)
        if control == row:
            continue  # A control: the verdicts compare it with the baseline.
        found = verdict_judge.compare(row, control)
        if found is None:
            continue
        verdict = found[ALL]
        cell = "%s (%+.1f on %s, p %.3f)" % (row, verdict.difference, control, verdict.p_value)
        {"beats": beat, "is below": below}.get(verdict.words, within).append(cell)
    lines = [
        "- Beat their matched Mixed by the stated test: %s." % (", ".join(beat) or "none"),
        "- No difference found: %s." % (", ".join(within) or "none"),
        "- Below their matched Mixed: %s." % (", ".join(below) or "none"),
    ]
    for paper, info in quoted.PAPERS.items():
        theirs = [row for row in quoted.ordering(paper) if row in averages]
        if len(theirs) < 2:
            continue
        agree, reverse, undecided, unmatched = ordering_agreement(
            theirs, verdict_judge, tied, baseline
        )
        pairs = len(theirs) * (len(theirs) - 1) // 2
        ours = sorted(theirs, key=lambda row: -averages[row])
        lines.append(
            "- %s (%s) orders these rows %s; ours (average BLEU): %s. Of its %d pairs, the"
            " stated test orders %d the same way and %d the other way, finds no difference in"
            " %d, and %d are no matched comparison (output layers differ)."
            % (
                info["citation"],
                info["table"],
                " > ".join(theirs),
                " > ".join("%s %.1f" % (row, averages[row]) for row in ours),
                pairs,
                agree,
                reverse,
                undecided,
                unmatched,
            )
        )
    return lines


def ordering_agreement(ordering, verdict_judge, tied, baseline):
    """``(agree, reverse, undecided, unmatched)``: of the pairs of rows of :obj:`ordering`
    (best first), how many the stated test puts in the same order, in the other, in neither,
    and how many are no matched comparison (output layers that differ, or no common seed)."""
    agree = reverse = undecided = unmatched = 0
    for i, better in enumerate(ordering):
        for worse in ordering[i + 1 :]:
            (first, first_mode), (second, second_mode) = map(system_and_mode, (better, worse))
            if tied.get(first, tied.get(baseline)) != tied.get(second, tied.get(baseline)):
                unmatched += 1
                continue
            found = verdict_judge.compare(
                first, second, first_mode or "oracle", second_mode or "oracle"
            )
            if found is None:
                unmatched += 1
            elif found[ALL].words == "beats":
                agree += 1
            elif found[ALL].words == "is below":
                reverse += 1
            else:
                undecided += 1
    return agree, reverse, undecided, unmatched
