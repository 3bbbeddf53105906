"""What the demo's report says of its figures: seed spread, matched controls, label use."""

from ldr_experiments.demo.runs import EQUAL_PASSES, LABEL_SYSTEMS, LDR_ROW, SEED_ROW, TRANSLATES
from ldr_experiments.table_verdicts import ALL
from ldr_opennmt.evaluation import evaluate


def row_averages(results):
    """``{row: average BLEU over the domains}`` of an evaluation's results (the one place
    both the demo's and the tables' findings take their averages from)."""
    return {row: evaluate.average(scores) for row, scores in results["rows"]}


def contrastive_rates(results):
    """The contrastive figures the findings quote, over all items: ``{row: %}`` with
    ``"<system> (oracle)"`` (accuracy) and ``"<system> (effect)"`` (label effect: % of
    pairs the variant's label moves towards the variant; length bias cancels)."""
    rates = {}
    for row in results["rows"]:
        value = row["values"].get("all")
        if value is None:
            continue
        if row["metric"] == "accuracy" and row["mode"] == "oracle":
            rates["%s (oracle)" % row["system"]] = value
        elif row["metric"] == "shift":
            rates["%s (effect)" % row["system"]] = value
    return rates


def seed_spread(results, first="Mixed", second=SEED_ROW):
    """The difference of average BLEU between two trainings of the same system that
    differ only by their seed (``None`` when either row is missing)."""
    averages = row_averages(results)
    if first not in averages or second not in averages:
        return None
    return abs(averages[first] - averages[second])


def findings(
    results,
    spread,
    contrastive_figures=None,
    baseline="Mixed",
    systems=LABEL_SYSTEMS,
    output_layers=None,
    steps=None,
):
    """The "what this shows and what it cannot" paragraph, from the figures.

    Every comparison is judged against :obj:`spread` (the seed-to-seed difference of
    the baseline's average BLEU): a difference below it is reported as noise, and against
    a control named for each row: the baseline, trained like it in everything but the method
    (size, steps, seed, and the output layer tied or not, read from the checkpoints).

    Args:
      results: The BLEU results of ``evaluate.evaluate``.
      spread: The seed spread of the average BLEU (``None``: unknown).
      contrastive_figures: The contrastive figures of :func:`contrastive_rates`, or
        ``None``.
      baseline: The row the systems are compared with.
      systems: The systems that read domain labels.
      output_layers: ``{row: whether its output layer is tied}``
        (:func:`ldr_experiments.common.output_layers`), or ``None`` when unknown.
      steps: The training steps of the rows trained from scratch (for the control line).

    Returns:
      A list of Markdown lines (bullets).
    """
    averages = row_averages(results)
    if baseline not in averages:
        return ["- No %s row: nothing to compare with." % baseline]
    noise = spread if spread is not None else 0.0

    def judged(difference):
        if spread is None:
            # No second seed (the default run): the stated test decides (Verdicts).
            return "the verdicts above decide whether it is a difference"
        if abs(difference) <= noise:
            return "within the seed spread (%.1f): not a difference this run can show" % noise
        return "larger than the seed spread (%.1f)" % noise

    lines = []
    base = averages[baseline]
    lines.append(
        "- %s averages %.1f BLEU%s."
        % (
            baseline,
            base,
            "" if spread is None else "; a second seed differs by %.1f" % spread,
        )
    )
    # The bar applies to every row but the fine-tuned ones (the baseline is one of them).
    judged_rows = [row for row in averages if not row.startswith("FT_")]
    weak = sorted(row for row in judged_rows if averages[row] < TRANSLATES)
    if weak:
        lines.append(
            "- Below %.0f BLEU on average (too weak for their differences to mean much): %s."
            % (TRANSLATES, ", ".join("%s %.1f" % (row, averages[row]) for row in weak))
        )
    else:
        lowest = min(judged_rows, key=averages.get)
        lines.append(
            "- Every row but the FT_* ones averages at least %.0f BLEU (lowest: %s, %.1f)."
            % (TRANSLATES, lowest, averages[lowest])
        )
    for system in systems:
        oracle = averages.get("%s (oracle)" % system)
        if oracle is None:
            continue
        difference = oracle - base
        lines.append(
            "- %s with its domain labels: %+.1f BLEU against %s, %s."
            % (system, difference, baseline, judged(difference))
        )
        lines.append("  " + control_line(system, baseline, output_layers, steps))
        wrong = averages.get("%s (wrong)" % system)
        generic = averages.get("%s (generic)" % system)
        if wrong is not None:
            loss = oracle - wrong
            uses = spread is not None and loss > noise
            lines.append(
                "  With a wrong label it %s %.1f BLEU (%s)%s."
                % (
                    "loses" if loss >= 0 else "gains",
                    abs(loss),
                    judged(loss),
                    ": the model uses its labels" if uses else "",
                )
            )
        if generic is not None:
            lines.append(
                "  With the generic label: %+.1f BLEU against oracle." % (generic - oracle)
            )
        if contrastive_figures:
            right = contrastive_figures.get("%s (oracle)" % system)
            effect = contrastive_figures.get("%s (effect)" % system)
            if right is not None:
                text = "  Contrastive lexical choice: %.0f%% right with its labels" % right
                base_right = contrastive_figures.get("%s (oracle)" % baseline)
                if base_right is not None:
                    text += " (%s: %.0f%%)" % (baseline, base_right)
                if effect is not None:
                    text += (
                        "; giving it the other domain's label moves its choice towards that"
                        " domain's word in %.0f%% of pairs (50%%: labels make no difference)"
                        % effect
                    )
                lines.append(text + ".")
    finetuned = [row for row in averages if row.startswith("FT_")]
    for row in finetuned:
        domain = row[len("FT_") :]
        scores = dict(results["rows"])[row]
        base_scores = dict(results["rows"])[baseline]
        if domain not in scores:
            continue
        others = [d for d in scores if d != domain]
        own = scores[domain]["bleu"] - base_scores[domain]["bleu"]
        rest = sum(scores[d]["bleu"] - base_scores[d]["bleu"] for d in others) / max(len(others), 1)
        lines.append(
            "- %s: %+.1f BLEU on %s, %+.1f on the other domains (fine-tuning %s)."
            % (
                row,
                own,
                domain,
                rest,
                (
                    "forgets them"
                    if rest < -noise
                    else "moves them by no more than the seed spread, %.1f: not a change this run"
                    " can show" % noise
                ),
            )
        )
    lines.append(
        "- What it cannot show: these are small models on %d test sentences per domain, %s;"
        " a difference the stated test does not find is not evidence; the paper-size claims"
        " need `--size paper` on a GPU, and the tables (`bash run/tables.sh`) give three seeds"
        " and every test sentence."
        % (
            max(results["sentences"].values()),
            (
                "one seed per system"
                if spread is None
                else "one seed per system except %s (its spread stands for all)" % baseline
            ),
        )
    )
    return lines


def control_line(system, baseline, output_layers, steps):
    """What :obj:`system` is judged against: its control, and whether it is matched (the
    output layer tied or untied like the baseline's, read from both checkpoints)."""
    tied = output_layers or {}
    if system not in tied or baseline not in tied:
        return "Control: %s (output layers not read: no checkpoint)." % baseline
    layer = "tied to the target embeddings" if tied[baseline] else "of its own"
    budget = "%d steps, " % steps if steps else ""
    if tied[system] == tied[baseline]:
        return "Control: %s, matched (%sseed 1, output layer %s like %s's)." % (
            baseline,
            budget,
            layer,
            system,
        )
    return (
        "Control: %s, NOT matched: its output layer is %s, %s's is not, and that alone is"
        " worth several BLEU at this size (docs/tables.md): the difference measures the"
        " tying too." % (baseline, layer, system)
    )


#: What each of the demo's controls matches (the verdicts table).
MATCHED = "output layer, training steps, data, seed"
EQUAL_COMPUTE = "output layer, forward-backward passes, data, seed"


def demo_comparisons(rows):
    """The demo's comparisons ``[(row, control, what is matched)]`` among :obj:`rows`: LDR
    against Mixed (the same steps) and Mixed (equal passes) (the same compute), what the
    compute alone adds, and the other label readers against Mixed."""
    compared = [
        (LDR_ROW, "Mixed", MATCHED),
        (LDR_ROW, EQUAL_PASSES, EQUAL_COMPUTE),
        (EQUAL_PASSES, "Mixed", "what the compute alone adds: " + EQUAL_COMPUTE),
    ]
    compared += [(row, "Mixed", MATCHED) for row in LABEL_SYSTEMS if row != LDR_ROW]
    compared.append(
        ("Factorized PA", "Mixed (continued)", "output layer, steps (Mixed + stage 2), data, seed")
    )
    return [c for c in compared if c[0] in rows and c[1] in rows]


def verdict_findings(judge):
    """What the label adds and what the compute adds, in the words of the stated test's
    figures (issue 59 item 5): ``[]`` without the rows."""

    def words(found):
        verdict = found[ALL]
        return (
            "%+.1f BLEU, the mean over the domains (95%% interval %+.1f to %+.1f, p %.3f): %s"
            % (
                verdict.difference,
                verdict.interval[0],
                verdict.interval[1],
                verdict.p_value,
                verdict.words,
            )
        )

    lines = []
    compute = judge.compare(EQUAL_PASSES, "Mixed")
    if compute is not None:
        lines.append(
            "- What the compute adds: Mixed trained for the passes of %s (%s) against Mixed:"
            " %s." % (LDR_ROW, EQUAL_PASSES, words(compute))
        )
    same_steps = judge.compare(LDR_ROW, "Mixed")
    same_compute = judge.compare(LDR_ROW, EQUAL_PASSES)
    if same_steps is not None and same_compute is not None:
        lines.append(
            "- What the method adds: %s with its true label against Mixed of the same steps:"
            " %s; against Mixed of the same compute: %s."
            % (LDR_ROW, words(same_steps), words(same_compute))
        )
    label = judge.compare(LDR_ROW, LDR_ROW, "oracle", "generic")
    if label is not None:
        lines.append(
            "- What the label adds: %s with its true label against the same model with the"
            " generic label: %s." % (LDR_ROW, words(label))
        )
    return lines
