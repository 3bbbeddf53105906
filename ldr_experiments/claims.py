"""Each paper's claimed effects, checked against the table: reproduced here, not reproduced,
or not testable at this size, with the figure (issue 42).

A claim is a comparison the paper's own table makes (:mod:`ldr_experiments.quoted` gives its
figure): one row beats another, or two rows are equal. Ours is judged like every comparison
of the report: a row named ``Mixed`` in a claim is the row's matched control (the Mixed whose
output layer is like its own), and a difference counts when it is beyond the seed spread of
that control. A claim whose rows are not in the table, or are defects
(:mod:`ldr_experiments.defects`), is not testable here, and says which row.

The two goals of issue 42 are checked the same way (:func:`goal_lines`): LDR, in a training
mode that reads its label, beats its matched Mixed beyond the spread with the true label while
its generic label stays within that spread; and the best single multi-domain model recovers at
least half of FT's gain over the common base on every domain
(:func:`ldr_experiments.common.gain_shares`).
"""

import dataclasses
from typing import Optional, Tuple

from ldr_opennmt.reports import markdown_table

from . import common, defects, quoted

#: The verdicts.
REPRODUCED, NOT_REPRODUCED, NOT_TESTABLE = "reproduced", "not reproduced", "not testable here"

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
      kind: :data:`BEATS` (first above second beyond the spread) or :data:`EQUAL` (within it).
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


def judge(claim, averages, controls, spreads, baseline, flagged=()):
    """``(verdict, ours, why)``: the verdict on :obj:`claim`, our figure (``None`` when not
    testable) and the words that explain it.

    Args:
      claim: A :class:`Claim`.
      averages: ``{row: average BLEU}`` (:func:`ldr_experiments.table_findings.row_averages`).
      controls: ``{system: its matched Mixed}``.
      spreads: ``{control: its seed spread}``.
      baseline: The table's baseline (the control of a row not in :obj:`controls`).
      flagged: The systems that are defects.
    """
    first, second = claim.first, claim.second
    if second == "Mixed":
        second = controls.get(defects.bare(first), baseline)
    elif first == "Mixed":
        first = controls.get(defects.bare(second), baseline)
    for row in (first, second):
        if defects.bare(row) in flagged:
            return NOT_TESTABLE, None, "%s is a defect (below)" % defects.bare(row)
        if row not in averages:
            return NOT_TESTABLE, None, "no %s row" % row
    control = controls.get(defects.bare(first), controls.get(defects.bare(second), baseline))
    spread = spreads.get(control, spreads.get(baseline))
    if spread is None:
        return NOT_TESTABLE, None, "no seed spread to judge by"
    difference = averages[first] - averages[second]
    within = abs(difference) <= spread
    if claim.kind == EQUAL:
        verdict = REPRODUCED if within else NOT_REPRODUCED
    else:
        verdict = REPRODUCED if difference > spread else NOT_REPRODUCED
    why = "%s %.1f against %s %.1f, spread %.1f" % (
        first,
        averages[first],
        second,
        averages[second],
        spread,
    )
    return verdict, difference, why


def claim_lines(averages, controls, spreads, baseline, flagged=()):
    """The report's section: a table of every claim, its paper's figure, ours and the verdict,
    then the count of each verdict."""
    cells, counts = [], {REPRODUCED: 0, NOT_REPRODUCED: 0, NOT_TESTABLE: 0}
    for claim in CLAIMS:
        verdict, ours, why = judge(claim, averages, controls, spreads, baseline, flagged)
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
        " difference (quoted, average BLEU of its table), ours (average BLEU; `Mixed` is the"
        " row's matched control), and whether it holds here beyond the seed spread (for"
        ' "about nothing" and "as well as": within it). Not testable: a row is missing'
        " or a defect.",
        "",
        markdown_table(
            ["paper", "claim", "paper", "ours", "here", "figures"],
            cells,
            "llrrll",
        ),
        "",
        "%d reproduced, %d not reproduced, %d not testable here."
        % (counts[REPRODUCED], counts[NOT_REPRODUCED], counts[NOT_TESTABLE]),
        "",
    ]


#: The LDR rows of the training modes that read their label (issue 42, item 6).
LDR_MODES = ("LDR", "LDR (joint)", "LDR (summed)")


def _label_verdict(oracle, generic, spread):
    """Goal 1's verdict for one LDR row: ``met``, or what falls short."""
    short = []
    if oracle <= spread:
        short.append("the true label does not beat it beyond the spread")
    if generic < -spread:
        short.append("the generic label falls below it (without its label it loses to Mixed)")
    elif generic > spread:
        short.append(
            "the generic label is above the spread, not within it (its training beats Mixed"
            " even without the label)"
        )
    return "met" if not short else "not met: " + "; ".join(short)


def goal_lines(results, averages, controls, spreads, baseline, systems):
    """Issue 42's two goals, each met or not, with its figures.

    Args:
      results: The BLEU results (for the share of FT's gain per domain).
      averages: ``{row: average BLEU}``.
      controls: ``{system: its matched Mixed}``.
      spreads: ``{control: its seed spread}``.
      baseline: The common base of the continued trainings (and the share of FT's gain).
      systems: The table's systems (not defects) a "single multi-domain model" is chosen from:
        every row but the Mixed rows and FT.
    """
    lines = ["## The goals", ""]
    reading = []
    for row in LDR_MODES:
        if row + " (oracle)" not in averages or row + " (generic)" not in averages:
            continue
        control = controls.get(row, baseline)
        spread = spreads.get(control, spreads.get(baseline))
        if spread is None or control not in averages:
            continue
        oracle = averages[row + " (oracle)"] - averages[control]
        generic = averages[row + " (generic)"] - averages[control]
        reading.append(
            "%s: true label %+.1f, generic %+.1f on %s (spread %.1f; the label adds %+.1f): %s"
            % (
                row,
                oracle,
                generic,
                control,
                spread,
                oracle - generic,
                _label_verdict(oracle, generic, spread),
            )
        )
    lines.append(
        "- LDR reads its label (true label beyond the spread above its matched Mixed, generic"
        " label within it): %s." % ("; ".join(reading) if reading else "no LDR row to judge")
    )
    shares = common.gain_shares(results, baseline)
    domains = results["domains"]
    best, best_least = None, None
    candidates = set(systems) - {baseline}
    for row, row_shares in shares.items():
        if defects.bare(row) not in candidates or defects.bare(row).startswith("Mixed"):
            continue
        known = [share for share in row_shares if share is not None]
        if not known:
            continue
        least = min(known)
        if best_least is None or least > best_least:
            best, best_least = row, least
    if best is None:
        lines.append("- The best single model's share of FT's gain: not measured (no FT rows).")
    else:
        cells = []
        for domain, share in zip(domains, shares[best]):
            cells.append(
                "%s %.0f%%" % (domain, 100 * share)
                if share is not None
                else "%s: FT gains nothing over %s, nothing to recover" % (domain, baseline)
            )
        lines.append(
            "- The best single multi-domain model recovers at least half of FT's gain over %s"
            " on every domain: %s, whose least share is %.0f%% (%s): %s."
            % (
                baseline,
                best,
                100 * best_least,
                ", ".join(cells),
                "met" if best_least >= 0.5 else "not met",
            )
        )
    return lines + [""]
