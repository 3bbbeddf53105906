"""The tables' one stated test: a row against its matched control, over seeds and sentences.

The test, stated once (:data:`TEST_STATEMENT`, which every report that judges a row quotes):
**the paired bootstrap over test sentences with the seeds pooled**. Seed *k* of the row is
paired with seed *k* of its control; the test sets of every seed are concatenated (each
sentence once per seed), and each of :obj:`n_samples` resamples draws sentences of that
concatenation with replacement, the row's and the control's translations of the same
sentence together. The statistic is the difference of corpus BLEU (sacrebleu's, from the
sentences' sufficient statistics, as sacrebleu's own ``PairedTest`` computes it). Its
two-sided p-value is twice the share of resamples on the other side of zero from the
observed difference; the row **beats** its control when the difference is positive and
p < :data:`ALPHA`, **is below** it when negative and p < :data:`ALPHA`, and otherwise **no
difference is found**. The 95% interval of the difference is the resamples' 2.5th and 97.5th
percentiles.

Pooling the seeds in the resampled population makes a difference between two trainings of the
same recipe with other seeds part of what the test must overcome only through the sentences
each seed translates; the seed-to-seed spread (mean and standard deviation over seeds) is
reported beside each verdict. The share of FT's gain, ``(row - base) / (FT - base)`` in BLEU
on one domain, gets its interval from the same resamples (:func:`gain_share`).

sacrebleu's ``PairedTest`` compares systems of one run each against one baseline: it cannot pair
seeds nor compute a ratio of three systems, so the resampling is written here, on sacrebleu's
sufficient statistics (``BLEU._extract_corpus_statistics`` and ``_compute_score_from_stats``,
the calls its ``PairedTest`` makes; sacrebleu is pinned in ``requirements.lock``).
"""

import collections

import numpy as np
from sacrebleu.metrics import BLEU

from ldr_opennmt.errors import UserError

#: The significance level of every verdict.
ALPHA = 0.05

#: Bootstrap resamples of every verdict.
SAMPLES = 1000

#: The resampling seed: the same resamples for every comparison, reproducible p-values.
SEED = 12345

#: How the tables' verdicts are decided: quoted by every report that gives one.
TEST_STATEMENT = (
    "A row beats (or is below) its matched control when the paired bootstrap over the test"
    " sentences, with the seeds pooled (seed k of the row paired with seed k of the control,"
    " %d resamples of the concatenated test sets), gives a two-sided p < %.2f for the"
    " difference of corpus BLEU; otherwise no difference is found. Intervals are the"
    " resamples' 95%% percentile intervals." % (SAMPLES, ALPHA)
)

#: A verdict: the observed difference of BLEU (row - control), its 95% interval, the
#: p-value and the words (``beats``, ``is below``, ``no difference found``).
Verdict = collections.namedtuple("Verdict", ["difference", "interval", "p_value", "words"])

#: A share of FT's gain and its 95% interval (``None`` bounds where FT's gain crosses 0).
Share = collections.namedtuple("Share", ["share", "interval"])


def _pooled(seeds, references, what):
    """The hypotheses of every seed concatenated, and the references repeated once per seed.

    Raises:
      UserError: on no seed, or a seed whose translations are not one per reference.
    """
    if not seeds:
        raise UserError("%s: no seed's translations" % what)
    hypotheses = []
    for number, seed in enumerate(seeds, start=1):
        if len(seed) != len(references):
            raise UserError(
                "%s: seed %d has %d translations for %d references"
                % (what, number, len(seed), len(references))
            )
        hypotheses += list(seed)
    return hypotheses, list(references) * len(seeds)


def _statistics(hypotheses, references):
    """BLEU's sufficient statistics of each sentence (rows of a float array)."""
    metric = BLEU()
    return metric, np.array(
        metric._extract_corpus_statistics(hypotheses, [references]), dtype="float64"
    )


def _resampled(metric, statistics, indices):
    """Corpus BLEU of each resample (:obj:`indices`: one row of sentence indices each)."""
    return np.array(
        [metric._compute_score_from_stats(statistics[row].sum(0)).score for row in indices]
    )


def _indices(count, n_samples, seed):
    return np.random.default_rng(seed).integers(0, count, size=(n_samples, count))


def _interval(values):
    return (float(np.percentile(values, 2.5)), float(np.percentile(values, 97.5)))


def compare(row_seeds, control_seeds, references, n_samples=SAMPLES, seed=SEED, alpha=ALPHA):
    """Judges a row against its matched control by the stated test (the module's docstring).

    Args:
      row_seeds: The row's translations of the test sentences, one list per seed.
      control_seeds: The control's, one list per seed, as many seeds as the row's.
      references: The references of the test sentences.
      n_samples: Bootstrap resamples.
      seed: The resampling seed.
      alpha: The significance level.

    Returns:
      A :class:`Verdict`.

    Raises:
      UserError: on seed counts that differ, or translations not aligned with the references.
    """
    if len(row_seeds) != len(control_seeds):
        raise UserError(
            "the row has %d seeds and its control %d: the test pairs seed k with seed k"
            % (len(row_seeds), len(control_seeds))
        )
    row, pooled_references = _pooled(row_seeds, references, "the row")
    control, _ = _pooled(control_seeds, references, "the control")
    metric, row_stats = _statistics(row, pooled_references)
    _, control_stats = _statistics(control, pooled_references)
    difference = (
        metric._compute_score_from_stats(row_stats.sum(0)).score
        - metric._compute_score_from_stats(control_stats.sum(0)).score
    )
    indices = _indices(len(row), n_samples, seed)
    resampled = _resampled(metric, row_stats, indices) - _resampled(metric, control_stats, indices)
    if difference > 0:
        other_side = np.sum(resampled <= 0)
    elif difference < 0:
        other_side = np.sum(resampled >= 0)
    else:
        other_side = n_samples
    p_value = min(1.0, 2.0 * (other_side + 1) / (n_samples + 1))
    if p_value < alpha and difference > 0:
        words = "beats"
    elif p_value < alpha and difference < 0:
        words = "is below"
    else:
        words = "no difference found"
    return Verdict(float(difference), _interval(resampled), float(p_value), words)


def gain_share(row_seeds, base_seeds, ft_seeds, references, n_samples=SAMPLES, seed=SEED):
    """The share of FT's gain a row keeps on one domain, ``(row - base) / (FT - base)`` in
    corpus BLEU over the pooled seeds, with its 95% bootstrap interval (the resamples of
    :func:`compare`, the three systems' translations of a sentence drawn together).

    Args:
      row_seeds: The row's translations, one list per seed.
      base_seeds: Those of the base FT started from (the row's control).
      ft_seeds: FT_<domain>'s, on the same sentences.
      references: The references.
      n_samples: Bootstrap resamples.
      seed: The resampling seed.

    Returns:
      A :class:`Share`; ``None`` where FT gains nothing (its BLEU at most the base's): there
      is no gain to keep. An interval bound is ``None`` where FT's resampled gain is not
      positive in more than 2.5% of the resamples (the ratio is then unbounded).

    Raises:
      UserError: on seed counts that differ, or translations not aligned with the references.
    """
    if not len(row_seeds) == len(base_seeds) == len(ft_seeds):
        raise UserError(
            "seeds: row %d, base %d, FT %d: the share pairs seed k of each"
            % (len(row_seeds), len(base_seeds), len(ft_seeds))
        )
    pooled = [
        _pooled(seeds, references, what)
        for seeds, what in ((row_seeds, "the row"), (base_seeds, "the base"), (ft_seeds, "FT"))
    ]
    references = pooled[0][1]
    metric = BLEU()
    stats = [_statistics(hypotheses, references)[1] for hypotheses, _ in pooled]
    row, base, ft = (metric._compute_score_from_stats(s.sum(0)).score for s in stats)
    if ft <= base:
        return None
    indices = _indices(len(references), n_samples, seed)
    row_r, base_r, ft_r = (_resampled(metric, s, indices) for s in stats)
    gains = ft_r - base_r
    if np.mean(gains <= 0) > 0.025:
        return Share(float((row - base) / (ft - base)), (None, None))
    shares = (row_r - base_r) / np.where(gains > 0, gains, np.nan)
    shares = shares[~np.isnan(shares)]
    return Share(float((row - base) / (ft - base)), _interval(shares))


def seed_summary(values):
    """``(mean, standard deviation)`` over seeds (the sample deviation, ddof 1; 0 with one
    seed)."""
    values = np.asarray(values, dtype="float64")
    if values.size == 0:
        raise UserError("no seed's score")
    deviation = float(np.std(values, ddof=1)) if values.size > 1 else 0.0
    return float(np.mean(values)), deviation
