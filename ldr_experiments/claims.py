"""Each paper's claimed effects, checked against the table: reproduced here, not reproduced,
or not testable at this size, with the figure (issue 42).

A claim is a comparison the paper's own table makes (:mod:`ldr_experiments.quoted` gives its
figure): one row beats another, or two rows are equal. Ours is judged like every comparison
of the report, by the one stated test (:mod:`ldr_experiments.table_verdicts`): a row named
``Mixed`` in a claim is the row's matched control (the Mixed whose output layer is like its
own); two rows whose output layers differ are no matched comparison, so the claim is not
testable here, as is one whose rows are not in the table or are defects
(:mod:`ldr_experiments.defects`).

Issue 59's goal is checked the same way (:func:`goal_lines`): LDR, in a training mode that
reads its label, beats its equal-compute Mixed with the true label, and the true label beats
the generic label within the same model.
"""

import dataclasses
from typing import Optional, Tuple

from ldr_opennmt.evaluation import verdicts
from ldr_opennmt.reports import markdown_table

from . import defects, quoted
from .table_verdicts import ALL, system_and_mode, verdict_cell

#: The verdicts.
REPRODUCED, NOT_REPRODUCED, NOT_TESTABLE = "reproduced", "not reproduced", "not testable here"
#: An equality the equivalence test neither shows nor refutes (issue 73: "as well as" was read
#: from "no difference found").
NOT_DECIDED = "not decided"

#: A claim's kinds: the first row beats the second; or the two are equal.
BEATS, EQUAL = "beats", "equal"


@dataclasses.dataclass(frozen=True)
class Claim:
    """A claimed effect.

    Attributes:
      paper: The key of :data:`ldr_experiments.quoted.PAPERS` whose table makes it.
      what: The claim in words.
      first: A row of our table (``Mixed``: the matched control of :attr:`second`, or of
        :attr:`first` when :attr:`second` is Mixed).
      second: The row it is compared with.
      kind: :data:`BEATS` (the stated test finds first above second) or :data:`EQUAL` (it
        finds no difference).
      quoted_as: The paper's rows whose figures it quotes, when ours are named otherwise
        (LDR trained with the loss of the authors' released configuration is the paper's LDR).
    """

    paper: str
    what: str
    first: str
    second: str
    kind: str = BEATS
    quoted_as: Optional[Tuple[str, str]] = None


LDR_EN_FR, FACTORIZED, MIXING = "ldr-transformer-en-fr", "factorized-en-fr", "mixing-en-de"

#: The claims each paper's table makes of the rows this table has (the Transformer tables;
#: the RNN rows are not in the default table).
CLAIMS = (
    Claim(LDR_EN_FR, "LDR with the true label beats Mixed", "LDR", "Mixed"),
    Claim(LDR_EN_FR, "LDR with the generic label beats Mixed", "LDR (generic)", "Mixed"),
    Claim(
        LDR_EN_FR,
        "LDR's generic label costs about nothing against its true label",
        "LDR (generic)",
        "LDR",
        EQUAL,
    ),
    Claim(LDR_EN_FR, "a wrong label costs LDR something", "LDR", "LDR (wrong)"),
    Claim(LDR_EN_FR, "predicted labels do as well as true ones", "LDR (pred)", "LDR", EQUAL),
    Claim(LDR_EN_FR, "LDR beats DC", "LDR", "DC"),
    # The same with both trained alike (two passes a step, summed): the recipe is not the gain.
    Claim(
        LDR_EN_FR,
        "LDR (summed) beats DC (summed), both trained the same way",
        "LDR (summed)",
        "DC (summed)",
        quoted_as=("LDR", "DC"),
    ),
    Claim(LDR_EN_FR, "FT stays above LDR", "FT", "LDR"),
    # The same claims of LDR trained with the loss of the authors' released configuration
    # (domain_training: summed).
    Claim(
        LDR_EN_FR,
        "LDR (summed: the released configuration's loss) with the true label beats Mixed",
        "LDR (summed)",
        "Mixed",
        quoted_as=("LDR", "Mixed"),
    ),
    Claim(
        LDR_EN_FR,
        "LDR (summed) with the generic label beats Mixed",
        "LDR (summed) (generic)",
        "Mixed",
        quoted_as=("LDR (generic)", "Mixed"),
    ),
    Claim(
        LDR_EN_FR,
        "a wrong label costs LDR (summed) something",
        "LDR (summed)",
        "LDR (summed) (wrong)",
        quoted_as=("LDR", "LDR (wrong)"),
    ),
    Claim(FACTORIZED, "Factorized PA beats Mixed", "Factorized PA", "Mixed"),
    Claim(
        FACTORIZED,
        "Factorized PA beats the residual adapters",
        "Factorized PA",
        "Residual adapters",
    ),
    Claim(FACTORIZED, "Factorized PA beats Factorized SF", "Factorized PA", "Factorized SF"),
    Claim(FACTORIZED, "Factorized PA beats Factorized DF", "Factorized PA", "Factorized DF"),
    Claim(FACTORIZED, "Factorized PA beats DC", "Factorized PA", "DC"),
    Claim(FACTORIZED, "the residual adapters beat Mixed", "Residual adapters", "Mixed"),
    Claim(FACTORIZED, "FT stays above Factorized PA", "FT", "Factorized PA"),
    Claim(MIXING, "domain mixing beats Mixed", "Domain mixing", "Mixed"),
    Claim(MIXING, "domain mixing beats ML", "Domain mixing", "ML"),
    Claim(MIXING, "domain mixing beats AdvL", "Domain mixing", "AdvL"),
    Claim(MIXING, "ML beats AdvL", "ML", "AdvL"),
)


def _quoted_difference(claim):
    """The paper's figure for :obj:`claim` (its first row's score less its second's), or
    ``None`` when the paper does not print both."""
    figures = {}
    for entry in quoted.QUOTED:
        if entry["paper"] == claim.paper:
            figures.setdefault(entry["row"], quoted.score(entry))
    names = list(claim.quoted_as or (claim.first, claim.second))
    names = [name.replace(" (pred)", " (predicted)") for name in names]
    if not all(name in figures for name in names):
        return None
    return figures[names[0]] - figures[names[1]]


def judge(claim, verdict_judge, controls, tied, baseline, flagged=(), equal_controls=None):
    """``(verdict, ours, why)``: the verdict on :obj:`claim` by the stated test
    (:class:`ldr_experiments.table_verdicts.Judge`), our figure (the mean over the domains of
    the difference of BLEU, ``None`` when not testable) and the words that explain it.

    Args:
      claim: A :class:`Claim`.
      verdict_judge: The table's :class:`ldr_experiments.table_verdicts.Judge`.
      controls: ``{system: its matched Mixed}``.
      tied: ``{system: whether its output layer is tied}``: two rows whose output layers
        differ are no matched comparison (issue 59 item 3), so not testable.
      baseline: The table's baseline (the control of a row not in :obj:`controls`).
      flagged: The systems that are defects.
      equal_controls: ``{system: its control of the same compute}``: a row that "beats Mixed"
        must beat that control too (a second pass or a stage 2 alone may win over the Mixed
        of the same steps).
    """
    equal_controls = equal_controls or {}
    against_mixed = "Mixed" in (claim.first, claim.second)

    first, second = claim.first, claim.second
    if second == "Mixed":
        second = controls.get(defects.bare(first), baseline)
    elif first == "Mixed":
        first = controls.get(defects.bare(second), baseline)
    (first_row, first_mode), (second_row, second_mode) = (
        system_and_mode(first),
        system_and_mode(second),
    )
    for row in (first_row, second_row):
        if row in flagged:
            return NOT_TESTABLE, None, "%s is a defect (below)" % row
    layers = {row: tied.get(row, tied.get(baseline)) for row in (first_row, second_row)}
    if layers[first_row] != layers[second_row]:
        return (
            NOT_TESTABLE,
            None,
            "output layers differ (%s)"
            % ", ".join("%s %s" % (r, "tied" if t else "own") for r, t in layers.items()),
        )
    found = verdict_judge.compare(
        first_row, second_row, first_mode or "oracle", second_mode or "oracle"
    )
    if found is None:
        return NOT_TESTABLE, None, "no %s or %s translations of a common seed" % (first, second)
    words = found[ALL].words
    if claim.kind == EQUAL:
        same = verdicts.equivalent(found[ALL])
        verdict = {True: REPRODUCED, False: NOT_REPRODUCED, None: NOT_DECIDED}[same]
    else:
        verdict = REPRODUCED if words == "beats" else NOT_REPRODUCED
    why = "%s against %s, seeds %s: %s" % (
        first,
        second,
        ", ".join(map(str, found["seeds"])),
        verdict_cell(found),
    )
    equal = equal_controls.get(first_row) if claim.second == "Mixed" else None
    if against_mixed and equal is not None and claim.kind == BEATS:
        if equal in flagged:
            return NOT_TESTABLE, None, "its control of the same compute, %s, is a defect" % equal
        same_compute = verdict_judge.compare(first_row, equal, first_mode or "oracle")
        if same_compute is None:
            return NOT_TESTABLE, None, "no %s translations of a common seed" % equal
        why += "; against %s (the same compute), seeds %s: %s" % (
            equal,
            ", ".join(map(str, same_compute["seeds"])),
            verdict_cell(same_compute),
        )
        if same_compute[ALL].words != "beats":
            verdict = NOT_REPRODUCED
    return verdict, found[ALL].difference, why


def claim_lines(verdict_judge, controls, tied, baseline, flagged=(), equal_controls=None):
    """The report's section: a table of every claim, its paper's figure, ours and the verdict,
    then the count of each verdict."""
    cells, counts = [], {REPRODUCED: 0, NOT_REPRODUCED: 0, NOT_DECIDED: 0, NOT_TESTABLE: 0}
    for claim in CLAIMS:
        verdict, ours, why = judge(
            claim, verdict_judge, controls, tied, baseline, flagged, equal_controls
        )
        counts[verdict] += 1
        theirs = _quoted_difference(claim)
        cells.append(
            [
                quoted.PAPERS[claim.paper]["citation"],
                claim.what,
                "%+.1f" % theirs if theirs is not None else "-",
                "%+.1f" % ours if ours is not None else "-",
                verdict,
                why,
            ]
        )
    return [
        "## The papers' claims here",
        "",
        "Each comparison the papers' tables make between rows this table has: the paper's"
        " difference (quoted, average BLEU of its table), ours (the stated test's: the mean"
        " over the domains of the difference of BLEU;"
        " `Mixed` is the row's matched control), and whether the stated test (Verdicts, above)"
        ' finds it here; a row that "beats Mixed" must also beat its control of the same'
        ' compute, where it has one. "About nothing" and "as well as" are decided by an'
        " equivalence test, not by finding no difference: %s Not testable: a row is missing or"
        " a defect, or the two rows' output layers differ (no matched comparison)."
        % verdicts.EQUIVALENCE_STATEMENT,
        "",
        markdown_table(
            ["paper", "claim", "paper", "ours", "here", "figures"],
            cells,
            "llrrll",
        ),
        "",
        "%d reproduced, %d not reproduced, %d not decided, %d not testable here."
        % (counts[REPRODUCED], counts[NOT_REPRODUCED], counts[NOT_DECIDED], counts[NOT_TESTABLE]),
        "",
    ]


#: The LDR rows of the training modes that read their label (issue 42, item 6; issue 53).
LDR_MODES = ("LDR", "LDR (joint)", "LDR (summed)", "LDR (as released)")


def goal_lines(verdict_judge, plan, controls, baseline, flagged=()):
    """Issue 59's goal, met or not, with its figures: LDR, in a mode that reads its label,
    beats its equal-compute Mixed by the stated test with the true label, and its true label
    beats its generic label within the same model. (The share of FT's gain: the share
    section's goal line.)

    Args:
      verdict_judge: The table's :class:`ldr_experiments.table_verdicts.Judge`.
      plan: The tables' plan (each row's equal-compute control).
      controls: ``{system: its matched Mixed}``.
      baseline: The table's baseline.
      flagged: The systems that are defects.
    """
    reading, met = [], []
    for row in LDR_MODES:
        run = plan.runs_by_name.get(row)
        if run is None or row in flagged:
            continue
        control = run.control or controls.get(row, baseline)
        against = verdict_judge.compare(row, control)
        label = verdict_judge.compare(row, row, "oracle", "generic")
        if against is None or label is None:
            continue
        ok = against[ALL].words == "beats" and label[ALL].words == "beats"
        if ok:
            met.append(row)
        reading.append(
            "%s: true label %+.1f on %s (p %.3f: %s), true against generic label %+.1f (p %.3f:"
            " %s), seeds %s"
            % (
                row,
                against[ALL].difference,
                control,
                against[ALL].p_value,
                against[ALL].words,
                label[ALL].difference,
                label[ALL].p_value,
                label[ALL].words,
                ", ".join(map(str, against["seeds"])),
            )
        )
    verdict = "met by %s" % ", ".join(met) if met else "not met"
    return [
        "## The goal",
        "",
        "- LDR in a mode that reads its label beats its equal-compute Mixed by the stated test"
        " with the true label, and the true label beats the generic label within the same"
        " model: %s. %s." % (verdict, "; ".join(reading) if reading else "no LDR row to judge"),
        "",
    ]
