"""The tables' one stated test: a row against its matched control, over seeds and sentences.

The test, stated once (:data:`TEST_STATEMENT`, which every report that judges a row quotes):
**a two-level paired bootstrap, over the trainings (seeds) and over the test sentences**
(the bootstrap of hierarchical data, Davison and Hinkley 1997, *Bootstrap Methods and their
Application*, section 3.8; replicated trainings as the unit of an MT comparison, Clark et al.
2011, "Better Hypothesis Testing for Statistical Machine Translation: Controlling for Optimizer
Instability", ACL). Seed *k* of the row is paired with seed *k* of its control (the same
training when the two differ only by the label they are given). The statistic on one domain is
the mean over the seeds of the difference of corpus BLEU (sacrebleu's, from the sentences'
sufficient statistics) between the row's and the control's seed *k*; over all domains it is
the mean of the domains' statistics (each domain weighs the same, whatever its size). Each of
:obj:`n_samples` resamples draws the seed pairs with replacement, and the sentences of each
domain with replacement, once for every seed and both systems (a sentence's translations are
drawn together). The two-sided p-value is twice the share of resamples on the other side of zero
from the observed difference; the row **beats** its control when the difference is positive
and p < :data:`ALPHA`, **is below** it when negative and p < :data:`ALPHA`, and otherwise **no
difference is found**. The 95% interval is the resamples' 2.5th and 97.5th percentiles.

A difference that one training reverses is not called: with three seeds, the resamples that
draw only that training are 1 in 27 (p > 0.07); nor is one inside the spread of the seeds. A
report applies :func:`holm` to each family of its comparisons.

The test of the former reports (seeds pooled, sentences alone resampled) understated the
variance up to three times and never resampled a seed's corpus-level shift: two recipes that
differ by less than their seed spread were called "beats" (issue 73).

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
    "A row beats (or is below) its matched control when a two-level paired bootstrap (%d"
    " resamples: the seeds drawn with replacement, seed k of the row with seed k of the"
    " control, and each domain's test sentences drawn with replacement, shared by every seed"
    " and both systems) gives a two-sided p < %.2f, after Holm's correction over the"
    " comparisons of its table, for the mean over seeds of the difference of corpus BLEU (over"
    " all domains: the mean of the domains'; with one seed, the sentences alone are drawn);"
    " otherwise no difference is found. Intervals are"
    " the resamples' 95%% percentile intervals (Davison and Hinkley 1997, section 3.8; Clark et"
    " al. 2011)." % (SAMPLES, ALPHA)
)

#: The equivalence margin, in BLEU: "as well as" means a difference within it (:func:`equivalent`).
EQUIVALENCE_MARGIN = 1.0

#: How "as well as" is decided: quoted by every report that says it.
EQUIVALENCE_STATEMENT = (
    "Two rows do as well as each other when an equivalence test (two one-sided tests, TOST,"
    " Schuirmann 1987, each at 0.05) puts their difference within +-%.1f BLEU: the resamples'"
    " 90%% interval of the difference lies inside the margin; a difference the test finds is"
    " not equivalence, and otherwise it is not decided." % EQUIVALENCE_MARGIN
)

#: A verdict: the observed difference of BLEU (row - control), its 95% interval, the
#: p-value, the words (``beats``, ``is below``, ``no difference found``) and the 90% interval
#: (:func:`equivalent`).
Verdict = collections.namedtuple(
    "Verdict", ["difference", "interval", "p_value", "words", "interval90"], defaults=(None,)
)

#: A share of FT's gain and its 95% interval (``None`` bounds where FT's gain crosses 0).
Share = collections.namedtuple("Share", ["share", "interval"])


def _check_seeds(seeds, references, what):
    if not seeds:
        raise UserError("%s: no seed's translations" % what)
    for number, seed in enumerate(seeds, start=1):
        if len(seed) != len(references):
            raise UserError(
                "%s: seed %d has %d translations for %d references"
                % (what, number, len(seed), len(references))
            )


def _statistics(hypotheses, references):
    """BLEU's sufficient statistics of each sentence (rows of a float array)."""
    metric = BLEU()
    return metric, np.array(
        metric._extract_corpus_statistics(hypotheses, [references]), dtype="float64"
    )


def _score(metric, summed):
    return metric._compute_score_from_stats(summed).score


def _weights(rng, count, n_samples):
    """How many times each of :obj:`count` sentences is drawn, per resample (rows)."""
    draws = rng.integers(0, count, size=(n_samples, count))
    weights = np.zeros((n_samples, count))
    np.add.at(weights, (np.arange(n_samples)[:, None], draws), 1)
    return weights


def _interval(values, level=95.0):
    tail = (100.0 - level) / 2
    return (float(np.percentile(values, tail)), float(np.percentile(values, 100.0 - tail)))


def _verdict(difference, resampled, alpha):
    """The :class:`Verdict` of an observed difference and its resamples."""
    if difference > 0:
        other_side = np.sum(resampled <= 0)
    elif difference < 0:
        other_side = np.sum(resampled >= 0)
    else:
        other_side = len(resampled)
    p_value = min(1.0, 2.0 * (other_side + 1) / (len(resampled) + 1))
    return Verdict(
        float(difference),
        _interval(resampled),
        float(p_value),
        words(difference, p_value, alpha),
        _interval(resampled, 90.0),
    )


def _seed_means(metric, systems, references, weights, seed_draws):
    """The two levels of the stated test for :obj:`systems` (each one list of translations
    per seed, seed k of each drawn together) on one domain.

    Args:
      metric: sacrebleu's ``BLEU``.
      systems: The systems' translations, one list per seed each.
      references: The references.
      weights: How many times each sentence is drawn, per resample (:func:`_weights`).
      seed_draws: The seeds drawn, per resample (rows of seed indices).

    Returns:
      ``(observed, resampled)``: each system's corpus BLEU averaged over its seeds, and over
      the seeds each resample draws (an array of resamples each).
    """
    columns = np.arange(len(seed_draws))[:, None]
    observed, resampled = [], []
    for seeds in systems:
        scores, draws = [], []
        for hypotheses in seeds:
            stats = _statistics(hypotheses, references)[1]
            scores.append(_score(metric, stats.sum(0)))
            draws.append([_score(metric, summed) for summed in weights @ stats])
        observed.append(float(np.mean(scores)))
        resampled.append(np.array(draws)[seed_draws, columns].mean(axis=1))
    return observed, resampled


def words(difference, p_value, alpha=ALPHA):
    """``beats``, ``is below`` or ``no difference found``."""
    if p_value < alpha and difference > 0:
        return "beats"
    if p_value < alpha and difference < 0:
        return "is below"
    return "no difference found"


def compare_domains(domains, n_samples=SAMPLES, seed=SEED, alpha=ALPHA):
    """Judges a row against its matched control on each domain and over all of them, by the
    stated test (the module's docstring), with the same draws of seeds for every domain.

    Args:
      domains: ``{domain: (row_seeds, control_seeds, references)}``: the row's and the
        control's translations of the domain's test sentences, one list per seed (as many
        seeds for both, in the same order of seeds for every domain), and the references.
      n_samples: Bootstrap resamples.
      seed: The resampling seed.
      alpha: The significance level (before any correction for several comparisons).

    Returns:
      ``({domain: Verdict}, the Verdict over all domains)``.

    Raises:
      UserError: on no domain, seed counts that differ, or translations not aligned with the
        references.
    """
    if not domains:
        raise UserError("no domain to compare")
    counts = {len(row) for row, _, _ in domains.values()}
    counts |= {len(control) for _, control, _ in domains.values()}
    if len(counts) != 1:
        row, control, _ = next(iter(domains.values()))
        raise UserError(
            "the row has %d seeds and its control %d: the test pairs seed k with seed k"
            % (len(row), len(control))
            if len(row) != len(control)
            else "the domains have different numbers of seeds (%s)"
            % ", ".join(map(str, sorted(counts)))
        )
    rng = np.random.default_rng(seed)
    n_seeds = counts.pop()
    seed_draws = rng.integers(0, n_seeds, size=(n_samples, n_seeds))
    metric = BLEU()
    observed, resampled = {}, {}
    for domain, (row_seeds, control_seeds, references) in domains.items():
        _check_seeds(row_seeds, references, "the row")
        _check_seeds(control_seeds, references, "the control")
        weights = _weights(rng, len(references), n_samples)
        (row, control), (row_draws, control_draws) = _seed_means(
            metric, (row_seeds, control_seeds), references, weights, seed_draws
        )
        observed[domain] = row - control
        resampled[domain] = row_draws - control_draws
    verdicts = {d: _verdict(observed[d], resampled[d], alpha) for d in domains}
    overall = _verdict(
        float(np.mean(list(observed.values()))),
        np.mean(np.array(list(resampled.values())), axis=0),
        alpha,
    )
    return verdicts, overall


def compare(row_seeds, control_seeds, references, n_samples=SAMPLES, seed=SEED, alpha=ALPHA):
    """Judges a row against its matched control on one domain by the stated test
    (:func:`compare_domains` of that domain alone).

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
    return compare_domains({None: (row_seeds, control_seeds, references)}, n_samples, seed, alpha)[
        1
    ]


def holm(p_values):
    """Holm's step-down adjustment of a family of p-values (Holm 1979): the adjusted values, in
    the order given; a comparison of the family is called at level alpha when its adjusted
    p-value is below alpha, which bounds the chance of any false call in the family by alpha."""
    p_values = [float(p) for p in p_values]
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    adjusted, running = [0.0] * len(p_values), 0.0
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (len(p_values) - rank) * p_values[index]))
        adjusted[index] = running
    return adjusted


def equivalent(verdict, margin=EQUIVALENCE_MARGIN):
    """Whether :obj:`verdict` shows the two rows equivalent within :obj:`margin` BLEU
    (:data:`EQUIVALENCE_STATEMENT`): ``True``, ``False`` (the test finds a difference), or
    ``None`` (not decided)."""
    if verdict.words != "no difference found":
        return False
    if verdict.interval90 is None:
        return None
    low, high = verdict.interval90
    return True if -margin < low and high < margin else None


def adjusted(verdict, p_value, alpha=ALPHA):
    """:obj:`verdict` with its p-value replaced by :obj:`p_value` (Holm's) and its words."""
    return verdict._replace(p_value=float(p_value), words=words(verdict.difference, p_value, alpha))


def gain_share(row_seeds, base_seeds, ft_seeds, references, n_samples=SAMPLES, seed=SEED):
    """The share of FT's gain a row keeps on one domain, ``(row - base) / (FT - base)`` in
    corpus BLEU averaged over the seeds, with its 95% interval from the resamples of the stated
    test (seeds and sentences drawn as :func:`compare_domains` draws them, the three systems'
    seed k and translations of a sentence together). A descriptive figure: the verdicts are
    the test's.

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
    for seeds, what in ((row_seeds, "the row"), (base_seeds, "the base"), (ft_seeds, "FT")):
        _check_seeds(seeds, references, what)
    rng = np.random.default_rng(seed)
    n_seeds = len(row_seeds)
    seed_draws = rng.integers(0, n_seeds, size=(n_samples, n_seeds))
    weights = _weights(rng, len(references), n_samples)
    (row, base, ft), draws = _seed_means(
        BLEU(), (row_seeds, base_seeds, ft_seeds), references, weights, seed_draws
    )
    if ft <= base:
        return None
    gains = draws[2] - draws[1]
    if np.mean(gains <= 0) > 0.025:
        return Share(float((row - base) / (ft - base)), (None, None))
    shares = (draws[0] - draws[1]) / np.where(gains > 0, gains, np.nan)
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
