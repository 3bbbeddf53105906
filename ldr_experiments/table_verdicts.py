"""The tables' verdicts (issue 59): every row against its matched and its equal-compute
control by the one stated test (:mod:`ldr_opennmt.evaluation.verdicts`), the mean and
standard deviation of each row over its seeds, the label's effect within one model, and the
share of FT's gain with its interval.

A row's seeds are the row and its twins (:func:`ldr_experiments.demo.seed_twins`: ``Mixed
(seed 2)``, ``LDR (summed, seed 3)``, ``FT_medical (seed 2)``); a comparison pairs the seeds
both sides have (seed *k* with seed *k*). ``FT`` is the papers' FT row: each domain translated
by the model fine-tuned on it.
"""

import collections
import re

from ldr_experiments import defects
from ldr_opennmt.data import corpus as corpus_lib
from ldr_opennmt.evaluation import evaluate, verdicts
from ldr_opennmt.reports import markdown_table
from ldr_opennmt.utils import read_lines

#: The key of the verdict over every domain's test set at once.
ALL = "all"

_TWIN = re.compile(r"^(?P<row>.*?)(?: \(seed (?P<a>\d+)\)|, seed (?P<b>\d+)\))$")


def parse_twin(name):
    """``(row, seed)`` of a row name: ``Mixed (tied, seed 2)`` -> ``("Mixed (tied)", 2)``,
    ``FT_medical (seed 3)`` -> ``("FT_medical", 3)``, ``LDR`` -> ``("LDR", 1)``."""
    match = _TWIN.match(name)
    if not match:
        return name, 1
    if match.group("a"):
        return match.group("row"), int(match.group("a"))
    return match.group("row") + ")", int(match.group("b"))


def system_and_mode(key):
    """``(system, mode)`` of a results row (``LDR (summed, seed 2) (oracle)``; mode ``None``
    for a row without one), by :func:`ldr_experiments.defects.bare`'s reading of the mode."""
    system = defects.bare(key)
    return system, (key[len(system) + 2 : -1] if system != key else None)


def outputs_of(corpus_dir, results):
    """The :class:`Outputs` of :obj:`results`, with the references of the corpus's test sets
    (as many sentences per domain as were translated) and its target detokenizer."""
    info = corpus_lib.load_info(corpus_dir)
    test = evaluate.read_test_set(
        corpus_dir,
        info["source_lang"],
        info["target_lang"],
        list(results["domains"]),
        max_sentences=max(results["sentences"].values()),
    )
    detok = corpus_lib.load_tokenizer(corpus_dir, info["target_lang"])
    return Outputs(results, test.references, lambda line: detok.detokenize(line.split()))


class Outputs:
    """The detokenized translations of every row of ``scores.json``, by row, mode, seed and
    domain, and the references they are scored against.

    Args:
      results: The results of ``evaluate.evaluate`` (its ``outputs``: the translation files,
        the domains' sentences in order).
      references: ``{domain: references}``.
      detokenize: A translation line's detokenized text.
    """

    def __init__(self, results, references, detokenize):
        self.domains = list(results["domains"])
        self.references = references
        self.counts = {d: len(references[d]) for d in self.domains}
        self._detokenize = detokenize
        #: ``{(row, mode): {seed: results row key}}``; mode ``None`` for a row without modes.
        self.seeds = collections.defaultdict(dict)
        self._files = dict(results["outputs"])
        for key in self._files:
            system, mode = system_and_mode(key)
            row, seed = parse_twin(system)
            self.seeds[(row, mode)][seed] = key
        self._lines = {}

    def key(self, row, mode="oracle"):
        """The ``(row, mode)`` of :attr:`seeds` for a row asked in a mode: a row without label
        modes stands for its oracle (``None``) mode; ``FT`` for the FT rows."""
        if row == "FT":
            return ("FT", None)
        if (row, mode) in self.seeds:
            return (row, mode)
        if mode == "oracle" and (row, None) in self.seeds:
            return (row, None)
        return None

    def seed_numbers(self, key):
        """The seeds a ``(row, mode)`` has (the FT row: those every FT_<domain> has)."""
        if key is None:
            return set()
        if key == ("FT", None):
            sets = [set(self.seeds.get(("FT_%s" % d, None), {})) for d in self.domains]
            return set.intersection(*sets) if sets else set()
        return set(self.seeds.get(key, {}))

    def lines(self, key, seed, domain):
        """The detokenized translations of ``(row, mode)`` :obj:`key`, seed :obj:`seed`, on
        :obj:`domain` (the FT row: FT_<domain>'s)."""
        if key == ("FT", None):
            key = ("FT_%s" % domain, None)
        name = self.seeds[key][seed]
        if name not in self._lines:
            lines = read_lines(self._files[name])
            split, start = {}, 0
            for d in self.domains:
                count = self.counts[d]
                split[d] = [self._detokenize(line) for line in lines[start : start + count]]
                start += count
            self._lines[name] = split
        return self._lines[name][domain]


class Judge:
    """The stated test between any two rows of one table (cached).

    Args:
      outputs: The :class:`Outputs`.
      samples: Bootstrap resamples (:data:`ldr_opennmt.evaluation.verdicts.SAMPLES`).
    """

    def __init__(self, outputs, samples=verdicts.SAMPLES):
        self.outputs = outputs
        self.samples = samples
        self._cache = {}

    def common_seeds(self, *keys):
        """The seeds every one of :obj:`keys` has, in order."""
        sets = [self.outputs.seed_numbers(key) for key in keys]
        return sorted(set.intersection(*sets)) if sets else []

    def compare(self, row, control, row_mode="oracle", control_mode="oracle"):
        """``{domain, ALL: Verdict}`` of row against control (their common seeds), with the
        seeds in ``"seeds"``; ``None`` when either has no translations or no seed in common.
        Its p-values are Holm's once a family holding it was adjusted (:meth:`adjust`)."""
        first, second = self.outputs.key(row, row_mode), self.outputs.key(control, control_mode)
        seeds = self.common_seeds(first, second) if first and second else []
        if not seeds:
            return None
        cache_key = (first, second, tuple(seeds))
        if cache_key not in self._cache:
            domains = collections.OrderedDict(
                (
                    domain,
                    (
                        [self.outputs.lines(first, k, domain) for k in seeds],
                        [self.outputs.lines(second, k, domain) for k in seeds],
                        self.outputs.references[domain],
                    ),
                )
                for domain in self.outputs.domains
            )
            per_domain, overall = verdicts.compare_domains(domains, n_samples=self.samples)
            found = {"seeds": seeds, ALL: overall}
            found.update(per_domain)
            self._cache[cache_key] = found
        return self._cache[cache_key]

    def adjust(self, family):
        """Applies Holm's correction (:func:`ldr_opennmt.evaluation.verdicts.holm`) to a family
        of comparisons, every domain's test and the test over all domains of each: later
        :meth:`compare` calls of them give the adjusted p-values and words.

        Args:
          family: ``[(row, control, row mode, control mode)]``.

        Returns:
          The number of tests in the family.
        """
        found = [self.compare(*comparison) for comparison in family]
        found = [f for f in found if f is not None and not f.get("adjusted")]
        cells = [(f, key) for f in found for key in [ALL] + list(self.outputs.domains)]
        adjusted = verdicts.holm([f[key].p_value for f, key in cells])
        for (f, key), p_value in zip(cells, adjusted):
            f[key] = verdicts.adjusted(f[key], p_value)
        for f in found:
            f["adjusted"] = len(cells)
        return len(cells)

    def gain_share(self, row, base, domain, mode="oracle"):
        """The share of FT_<domain>'s gain over :obj:`base` that :obj:`row` keeps on
        :obj:`domain` (:func:`ldr_opennmt.evaluation.verdicts.gain_share`, the seeds the three
        have), or ``None``."""
        keys = (self.outputs.key(row, mode), self.outputs.key(base), ("FT_%s" % domain, None))
        if None in keys:
            return None
        seeds = self.common_seeds(*keys)
        if not seeds:
            return None
        hypotheses = [[self.outputs.lines(key, k, domain) for k in seeds] for key in keys]
        return verdicts.gain_share(
            *hypotheses, self.outputs.references[domain], n_samples=self.samples
        )


def seed_table(results, rows):
    """The mean and standard deviation over seeds of every row trained with more than one
    seed: BLEU per domain and on average, chrF on average (Markdown lines; ``[]`` when no row
    has a second seed)."""
    domains = results["domains"]
    groups = collections.OrderedDict()
    for key, scores in results["rows"]:
        system, mode = system_and_mode(key)
        row, seed = parse_twin(system)
        if row not in rows and not row.startswith("FT_"):
            continue
        groups.setdefault((row, mode), {})[seed] = scores
    cells = []
    for (row, mode), by_seed in groups.items():
        if len(by_seed) < 2:
            continue
        seeds = sorted(by_seed)
        cell = [row + (" (%s)" % mode if mode else ""), ", ".join(map(str, seeds))]
        for domain in domains:
            cell.append(_mean_sd([by_seed[k][domain]["bleu"] for k in seeds]))
        cell.append(
            _mean_sd([sum(by_seed[k][d]["bleu"] for d in domains) / len(domains) for k in seeds])
        )
        cell.append(
            _mean_sd([sum(by_seed[k][d]["chrf"] for d in domains) / len(domains) for k in seeds])
        )
        cells.append(cell)
    if not cells:
        return []
    return [
        "## Mean and standard deviation over seeds",
        "",
        "The rows trained with more than one seed (the controls and the rows of the papers'"
        " main claims): mean ± standard deviation over their seeds (seed k of every row draws"
        " the same initialisation and batches where their models allow).",
        "",
        markdown_table(
            ["row", "seeds"] + ["%s BLEU" % d for d in domains] + ["avg BLEU", "avg chrF"],
            cells,
            "ll" + "r" * (len(domains) + 2),
        ),
        "",
    ]


def _mean_sd(values):
    mean, deviation = verdicts.seed_summary(values)
    return "%.1f ± %.1f" % (mean, deviation)


def verdict_cell(found, domain=ALL):
    """``+1.2 [0.4, 2.0], p 0.002: beats`` of one :meth:`Judge.compare` result."""
    verdict = found[domain]
    return "%+.1f [%+.1f, %+.1f], p %.3f: %s" % (
        verdict.difference,
        verdict.interval[0],
        verdict.interval[1],
        verdict.p_value,
        verdict.words,
    )


#: What each kind of control matches.
MATCHED = {
    "matched": "output layer, training steps, data, seeds",
    "passes": "output layer, forward-backward passes (steps x passes per step), data, seeds",
    "stage2": "output layer, steps (base + stage 2), the stage 2's batches, seeds",
    "ablation": "all but one option (an ablation): output layer, steps, passes, seeds",
}


def _differs(run):
    """What :obj:`run` changes in its control's batches (``""`` when nothing)."""
    changes = ["%s: %s" % item for item in sorted(dict(run.data, **run.train).items())]
    if run.distilled:
        changes.insert(0, "targets: the FT teachers' translations")
    return "; not matched: " + ", ".join(changes) if changes else ""


def matched_words(run, kind):
    """What a comparison of :obj:`run` with a control of :obj:`kind` (a key of
    :data:`MATCHED`) matches, and what it does not."""
    if kind == "matched" and (run.definition.stage1 is not None or run.curriculum):
        # A stage 2 on its stage 1 (or the curriculum's): the same steps from scratch, and a
        # stage 2 more (its control of the same compute: Mixed continued).
        return "output layer, stage 1 (steps, data), seeds; not matched: its stage 2"
    return MATCHED[kind] + _differs(run)


def comparisons(plan, controls, names):
    """The report's comparisons: ``[(row, control, what is matched)]`` for every row (not a
    seed twin) against its matched Mixed (:obj:`controls`) and its equal-compute control
    (:attr:`ldr_experiments.demo.Run.control`), and every control against the baseline."""
    found = []
    for name in names:
        run = plan.runs_by_name.get(name)
        if run is None or run.seed_of is not None:
            continue
        control = controls.get(name, plan.baseline.name)
        if run.continues is not None:
            kind = "passes" if run.continue_steps == "passes" else "stage2"
            found.append((name, run.continues, "what its extra compute adds: " + MATCHED[kind]))
            continue
        if control != name:
            found.append((name, control, matched_words(run, "matched")))
        if run.control is not None:
            other = plan.runs_by_name[run.control]
            if other.continues is None:  # One option of the control's recipe changed.
                found.append((name, run.control, MATCHED["ablation"]))
                continue
            kind = "passes" if other.continue_steps == "passes" else "stage2"
            found.append((name, run.control, matched_words(run, kind)))
    return found


def verdict_section(judge, plan, controls, names, modes):
    """The tables' verdicts (:func:`verdict_lines`): each comparison of :func:`comparisons`,
    and the label's effect within each row that reads one.

    Args:
      judge: The :class:`Judge`.
      plan: The tables' plan.
      controls: ``{row: its matched Mixed}``.
      names: The table's rows (not defects).
      modes: ``{row: its label modes}``.
    """
    label_rows = [(name, modes.get(name) or ()) for name in names]
    return verdict_lines(judge, comparisons(plan, controls, names), label_rows)


def verdict_lines(judge, compared, label_rows):
    """The verdicts section: each comparison by the stated test, with the true label; then
    the label's effect within each model that reads one (true against generic, wrong and
    predicted labels, same model, same seeds).

    Args:
      judge: The :class:`Judge`.
      compared: ``[(row, control, what is matched)]``.
      label_rows: ``[(row, its label modes)]``.
    """
    domains = judge.outputs.domains
    tests = judge.adjust([(row, control, "oracle", "oracle") for row, control, _ in compared])
    cells = []
    for row, control, matched in compared:
        found = judge.compare(row, control)
        if found is None:
            continue
        cells.append(
            [row, control, matched, ", ".join(map(str, found["seeds"])), verdict_cell(found)]
            + [verdict_cell(found, d) for d in domains]
        )
    lines = [
        "## Verdicts",
        "",
        "**The stated test.** %s Differences are in BLEU (row - control), the mean over the"
        " seeds, on every test sentence of each domain; over all domains, the mean of the"
        " domains' differences. The p-values are Holm's over the %d tests of this table (each"
        " comparison on each domain and over all domains)." % (verdicts.TEST_STATEMENT, tests),
        "",
        "Each row against its matched Mixed (the same output layer, steps, data and seeds) and,"
        " where it trains more per step or continues a trained model, against the control of"
        " the same compute; label-reading rows with their true label.",
        "",
        markdown_table(
            ["row", "control", "matched", "seeds", "all domains"] + domains,
            cells,
            "lllll" + "l" * len(domains),
        ),
        "",
    ]
    label_family = [
        (name, name, "oracle", other)
        for name, row_modes in label_rows
        if "oracle" in row_modes
        for other in ("generic", "wrong", "pred")
        if other in row_modes
    ]
    label_tests = judge.adjust(label_family)
    label_cells = []
    for name, row_modes in label_rows:
        if "oracle" not in row_modes:
            continue
        for other in ("generic", "wrong", "pred"):
            if other not in row_modes:
                continue
            found = judge.compare(name, name, "oracle", other)
            if found is None:
                continue
            label_cells.append(
                [
                    name,
                    "true vs %s" % other,
                    ", ".join(map(str, found["seeds"])),
                    verdict_cell(found),
                ]
                + [verdict_cell(found, d) for d in domains]
            )
    if label_cells:
        lines += [
            "What the label adds within one model: its translations with the true label"
            " against its translations of the same sentences with another label (the same"
            " model and seeds; the same test, Holm's p-values over the %d tests of this table)."
            % label_tests,
            "",
            markdown_table(
                ["row", "labels", "seeds", "all domains"] + domains,
                label_cells,
                "llll" + "l" * len(domains),
            ),
            "",
        ]
    return lines


def share_section(judge, base, rows, controls=(), goal=0.8):
    """The share of FT's gain per row and domain with its 95% interval, and the best single
    model against :obj:`goal` (issue 54: at least 80% on every domain where FT gains).

    Args:
      judge: The :class:`Judge`.
      base: The row every continued training starts from (Mixed).
      rows: The rows (not defects, not FT).
      controls: The rows that are controls, not methods (Mixed with more compute or its output
        layer tied): in the table, not candidates for the best single model.
      goal: The share every domain must reach.
    """
    domains = judge.outputs.domains
    cells, shares_of = [], {}
    for row in rows:
        if row == base:
            continue
        if judge.outputs.key(row) is None:
            continue
        shares = [judge.gain_share(row, base, d) for d in domains]
        cells.append([row] + [_share_words(share) for share in shares])
        known = {d: s for d, s in zip(domains, shares) if s is not None}
        if known:
            shares_of[row] = known
    lines = [
        "## Share of FT's gain, with intervals",
        "",
        "Per row and domain, (row - %s) / (FT_<domain> - %s) in BLEU on that domain over the"
        " seeds the three share, with the 95%% bootstrap interval of the stated test's"
        " resamples (`?` where FT's own gain is not clear of zero, so the ratio is unbounded;"
        " `-` where FT gains nothing)." % (base, base),
        "",
        markdown_table(["row"] + domains, cells, "l" + "r" * len(domains)),
        "",
    ]
    candidates = {r: s for r, s in shares_of.items() if r not in controls}
    if candidates:
        best = max(candidates, key=lambda r: min(s.share for s in candidates[r].values()))
        domain, least = min(candidates[best].items(), key=lambda item: item[1].share)
        lines += [
            "Goal (issue 54): one model keeps at least %.0f%% of FT's gain on every domain where"
            " FT gains, decided by the intervals: met where every domain's interval is above"
            " it, not met where one domain's is below it. The closest single model is %s,"
            " whose least share is %.0f%% (%s, %s): %s."
            % (
                100 * goal,
                best,
                100 * least.share,
                domain,
                _share_words(least),
                goal_words(candidates[best], goal),
            ),
            "",
        ]
    return lines


def goal_words(shares, goal):
    """Whether :obj:`shares` (``{domain: share}``, the domains where FT gains) meet
    :obj:`goal` by their intervals: ``"met"`` where every interval's low end reaches it, ``"not
    met"`` where some interval's high end is below it (by how much its share falls short),
    else undecided, naming the domains whose intervals span it."""
    below = [
        (d, s) for d, s in shares.items() if s.interval[1] is not None and s.interval[1] < goal
    ]
    if below:
        domain, share = min(below, key=lambda item: item[1].share)
        return "not met (%s: %.0f points short, its interval below %.0f%%)" % (
            domain,
            100 * (goal - share.share),
            100 * goal,
        )
    spanning = [d for d, s in shares.items() if s.interval[0] is None or s.interval[0] < goal]
    if spanning:
        return "not decided (the interval of %s spans %.0f%%: more seeds or test sentences)" % (
            ", ".join(spanning),
            100 * goal,
        )
    return "met"


def _share_words(share):
    if share is None:
        return "-"
    low, high = share.interval
    if low is None:
        return "%.0f%% [?]" % (100 * share.share)
    return "%.0f%% [%.0f, %.0f]" % (100 * share.share, 100 * low, 100 * high)
