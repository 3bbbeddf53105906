"""Per-domain scores with sacrebleu: BLEU, chrF, their signatures and the paired bootstrap
test. The tables and charts of the scores are :mod:`ldr_opennmt.evaluation.report`'s."""

from sacrebleu.metrics import BLEU, CHRF
from sacrebleu.significance import PairedTest

from ldr_opennmt.errors import UserError


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
