"""Per-domain precision and recall of a domain classifier (LDR_pred), and their table."""

from ldr_opennmt import reports
from ldr_opennmt.errors import UserError


def precision_recall(references, predictions, domains):
    """Scores predicted domain labels against the true ones.

    Args:
      references: The true domain label of each sentence.
      predictions: The predicted label of each sentence.
      domains: The domain names to report, in order.

    Returns:
      A dict with ``accuracy``, ``sentences`` and ``domains``: for each domain,
      ``precision`` (of the sentences predicted as the domain, the share that
      belong to it), ``recall`` (of the domain's sentences, the share predicted
      as it), ``f1``, ``support`` (true count) and ``predicted`` (predicted count).
      A ratio with a zero denominator is ``None``.

    Raises:
      UserError: if the two lists differ in length.
    """
    if len(references) != len(predictions):
        raise UserError(
            "%d predicted labels for %d reference labels" % (len(predictions), len(references))
        )

    def _ratio(num, den):
        return num / den if den else None

    per_domain = {}
    for domain in domains:
        true_positive = sum(r == domain and p == domain for r, p in zip(references, predictions))
        support = sum(r == domain for r in references)
        predicted = sum(p == domain for p in predictions)
        precision = _ratio(true_positive, predicted)
        recall = _ratio(true_positive, support)
        f1 = None
        if precision is not None and recall is not None and precision + recall > 0:
            f1 = 2 * precision * recall / (precision + recall)
        per_domain[domain] = {
            "precision": precision,
            "recall": recall,
            "f1": f1,
            "support": support,
            "predicted": predicted,
        }
    correct = sum(r == p for r, p in zip(references, predictions))
    return {
        "accuracy": _ratio(correct, len(references)),
        "sentences": len(references),
        "domains": per_domain,
    }


def format_table(scores):
    """A Markdown table of :func:`precision_recall` results (percentages)."""

    def _pct(value):
        return "-" if value is None else "%.1f" % (100 * value)

    rows = [
        [
            domain,
            _pct(values["precision"]),
            _pct(values["recall"]),
            _pct(values["f1"]),
            "%d" % values["support"],
            "%d" % values["predicted"],
        ]
        for domain, values in scores["domains"].items()
    ]
    rows.append(
        ["all (accuracy)", "", _pct(scores["accuracy"]), "", "%d" % scores["sentences"], ""]
    )
    header = ["domain", "precision", "recall", "F1", "sentences", "predicted"]
    return reports.markdown_table(header, rows)
