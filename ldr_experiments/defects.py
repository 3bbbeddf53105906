"""Rows of the papers' tables that are defects, not results (issue 42, item 5).

A row is a defect when it collapses (fewer distinct translations than
:data:`COLLAPSE_SHARE` of the test sentences: the model translates many sentences alike,
as AdvL did with 43 distinct outputs for 600 sentences) or falls more than
:data:`BELOW_CONTROL` BLEU below its matched control (the Mixed whose output layer is like
its own). The report lists it, with the figure that condemns it, among its findings and
prints none of its scores as a result: a broken baseline makes every comparison with it
look better than it is.
"""

import collections
import re

from ldr_opennmt.utils import read_lines

#: A row with fewer distinct translations than this share of its sentences has collapsed.
COLLAPSE_SHARE = 0.5

#: A row more than this many BLEU (average over the domains) below its control is a defect.
BELOW_CONTROL = 3.0

#: A row name's label mode (``"LDR (oracle)"``): one parenthesized word at the end.
_MODE = re.compile(r" \((oracle|generic|wrong|pred|ens-[a-z]+)\)$")


def bare(row):
    """A row name without its label mode (``"LDR (generic)"`` -> ``"LDR"``)."""
    match = _MODE.search(row)
    return row[: match.start()] if match else row


def system_of(row, systems):
    """The system (one of :obj:`systems`) a result row belongs to: the row itself, or the row
    without its label mode; ``None`` when none."""
    if row in systems:
        return row
    return bare(row) if bare(row) in systems else None


def translation_counts(results, systems):
    """``{system: (distinct translations, sentences)}`` of the first row of each system in
    :obj:`results` (its oracle mode, or its only row), read from its translation file
    (``results["outputs"]``); systems whose file is gone are left out."""
    counts = {}
    for row, _ in results["rows"]:
        system = system_of(row, systems)
        path = (results.get("outputs") or {}).get(row)
        if system is None or system in counts or not path:
            continue
        try:
            lines = read_lines(path)
        except OSError:
            continue
        counts[system] = (len(set(lines)), len(lines))
    return counts


def find(averages, systems, baseline, controls=None, counts=None):
    """The defects among :obj:`systems`: ``{system: why}``, in their order.

    Args:
      averages: ``{row: average BLEU}`` (the tables' ``row_averages``: a system's bare name
        gives its oracle row).
      systems: The table's systems (row names without label modes).
      baseline: The baseline row (never judged against itself).
      controls: ``{system: the Mixed it is judged against}``; a system not in it is
        judged against :obj:`baseline`, a system that is its own control only for collapse.
        The ``FT_<domain>`` rows are not judged on their average (forgetting the other
        domains is their point), only for collapse.
      counts: ``{system: (distinct translations, sentences)}`` (:func:`translation_counts`).
    """
    controls = controls or {}
    counts = counts or {}
    found = collections.OrderedDict()
    for system in systems:
        reasons = []
        distinct, sentences = counts.get(system, (None, 0))
        if sentences and distinct < COLLAPSE_SHARE * sentences:
            reasons.append(
                "collapsed: %d distinct translations of %d test sentences (fewer than %d%%)"
                % (distinct, sentences, 100 * COLLAPSE_SHARE)
            )
        control = controls.get(system, baseline)
        # A control (a row that is its own control: Mixed (tied) beside the base) is the
        # reference of its kind, not a result judged against another kind's.
        if (
            system != baseline
            and control != system
            and not system.startswith("FT_")
            and system in averages
            and control in averages
            and averages[system] < averages[control] - BELOW_CONTROL
        ):
            reasons.append(
                "%.1f BLEU below its control %s (%.1f against %.1f; the bar is %.0f)"
                % (
                    averages[control] - averages[system],
                    control,
                    averages[system],
                    averages[control],
                    BELOW_CONTROL,
                )
            )
        if reasons:
            found[system] = "; ".join(reasons)
    return found


def without(results, flagged, row_of=None):
    """:obj:`results` without the rows and the translations (``outputs``) of the
    :obj:`flagged` systems (a new dict).

    Args:
      results: The BLEU results.
      flagged: ``{system: why}``.
      row_of: A system's row for this purpose (a seed twin's: the row it trains again,
        ``ldr_experiments.table_verdicts.parse_twin``): a flagged row's twins go with it.
    """
    if not flagged:
        return results
    row_of = row_of or (lambda system: system)

    def kept(row):
        return system_of(row, flagged) is None and row_of(bare(row)) not in flagged

    rows = [(row, scores) for row, scores in results["rows"] if kept(row)]
    outputs = {row: path for row, path in (results.get("outputs") or {}).items() if kept(row)}
    return dict(results, rows=rows, outputs=outputs)


def lines(flagged):
    """The findings' Markdown lines on the defects (``[]`` when none)."""
    if not flagged:
        return []
    return [
        "- **Defects, not results** (a row that collapses, or more than %.0f BLEU below its"
        " control, is left out of every table and comparison of this report: its cause is to"
        " be fixed before its figures mean anything): %s."
        % (BELOW_CONTROL, "; ".join("%s: %s" % item for item in flagged.items()))
    ]
