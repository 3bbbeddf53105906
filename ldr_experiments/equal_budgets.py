"""Equal in-domain budgets for the papers' tables (issue 42, item 4): a row trained in a
second stage (Factorized PA, SF and DF's stage 2, residual adapters) sees, per domain, at
least as many sentences of that domain as ``FT_<domain>`` does.

``FT_<domain>`` trains ``finetune_steps`` batches of ``batch_size`` tokens of its domain.
A stage 2 trains batches of one domain each (``data: domain_batches: true``), the same
batches as FT's (same corpus file, batch size in tokens and length cap), the domain of each
batch drawn with ``p_d = |C_d|^a / sum_k |C_k|^a`` (``a``: the budget's ``stage2_alpha``,
0 by default: uniform). A stage 2 of ``S`` steps thus gives domain ``d`` ``S p_d`` of FT's
batches on average, and the rule is

    S p_d - z sqrt(S p_d (1 - p_d)) >= finetune_steps   for every domain d,

the expected count less ``z`` standard deviations of the binomial draw (``z`` = 2: each
domain gets at least FT's batches with a probability of about 98%, by the normal
approximation; ``z`` = 0 is the bare ``S >= finetune_steps / min_d p_d``). :func:`steps`
returns the smallest such ``S``, and never less than the budget's ``stage2_steps``.

Why batches of one domain, not the batches mixing domains the table trains from scratch
with: counted in sentences, a mixed batch of ``B`` tokens holds ``p_d B / L`` sentences of
domain ``d`` (``L`` the mean length over the mixture) where FT's holds ``B / L_d``, so the
rule would need ``S >= finetune_steps L / (p_d L_d)``: on the default corpus, where
software's segments are three times shorter than the Bible's verses (11 and 34 BPE tokens on
average), about 3,300 steps (the mixed ``p_d`` alone, ``finetune_steps / min_d p_d``, 1,612
steps, undercounts a short domain by ``L / L_d``). A stage 2 trains the domain blocks alone
(the rest frozen), so which batches mix only changes how often each block gets a gradient,
and uniform single-domain batches give every block FT's share in the fewest steps: about
``K`` times FT's steps for ``K`` domains.
"""

import math

from ldr_opennmt import domains as domains_lib

#: Standard deviations of the binomial draw of the domains kept as a margin.
MARGIN_SIGMAS = 2.0

#: The stage-2 sampling temperature when the budget has none (0: uniform).
DEFAULT_ALPHA = 0.0


def corpus_sizes(info):
    """``{domain: training sentences}`` of a corpus's ``corpus.json`` (``info``), in its
    domain order: the ``|C_d|`` of the sampling. A corpus not built yet
    (:func:`ldr_experiments.common.corpus_info` in a dry run) counts as equal sizes."""
    if info.get("planned"):
        return {d: 1 for d in info["domains"]}
    return {d: int(info["stats"][d]["train"]["pairs"]) for d in info["domains"]}


def probabilities(sizes, alpha):
    """``{domain: p_d}``: ``|C_d|^alpha`` normalized (:obj:`sizes`: ``{domain: |C_d|}``)."""
    values = domains_lib.sampling_probabilities(list(sizes.values()), alpha)
    return dict(zip(sizes, values))


def expected_batches(stage2_steps, probability, sigmas=MARGIN_SIGMAS):
    """The batches of one domain a stage 2 of :obj:`stage2_steps` draws, less
    :obj:`sigmas` standard deviations of the binomial draw."""
    mean = stage2_steps * probability
    return mean - sigmas * math.sqrt(stage2_steps * probability * (1.0 - probability))


def steps(finetune_steps, probs, floor=0, sigmas=MARGIN_SIGMAS):
    """The fewest stage-2 steps (at least :obj:`floor`) whose draws give every domain
    :obj:`finetune_steps` batches (:func:`expected_batches` with :obj:`sigmas`).

    Args:
      finetune_steps: ``FT_<domain>``'s steps.
      probs: ``{domain: p_d}`` (:func:`probabilities`).
      floor: The least number of steps (the budget's ``stage2_steps``).
      sigmas: The margin, in standard deviations (0: the expected count).
    """
    least = min(probs.values())
    # p S - z sqrt(p (1 - p)) sqrt(S) >= F: a quadratic in sqrt(S).
    b = sigmas * math.sqrt(least * (1.0 - least))
    root = (b + math.sqrt(b * b + 4.0 * least * finetune_steps)) / (2.0 * least)
    count = max(1, int(math.ceil(root * root)) - 2)
    while expected_batches(count, least, sigmas) < finetune_steps - 1e-9:
        count += 1  # A step or two: the root's rounding.
    return max(int(floor), count)


class Stage2Budget:
    """The stage 2 of the table: its steps, sampling and the rule they follow.

    Args:
      sizes: ``{domain: |C_d|}`` (:func:`corpus_sizes`).
      budget: The table's budget (``finetune_steps``, ``stage2_steps`` as the least number
        of steps, optional ``stage2_alpha``).
    """

    def __init__(self, sizes, budget):
        self.alpha = float(budget.get("stage2_alpha", DEFAULT_ALPHA))
        self.finetune_steps = budget["finetune_steps"]
        self.floor = budget["stage2_steps"]
        self.probabilities = probabilities(sizes, self.alpha)
        self.steps = steps(self.finetune_steps, self.probabilities, floor=self.floor)

    def batches(self, sigmas=0.0):
        """``{domain: FT-sized batches}`` a stage 2 draws on average (:obj:`sigmas`: less
        that many standard deviations)."""
        return {d: expected_batches(self.steps, p, sigmas) for d, p in self.probabilities.items()}

    def config(self, config):
        """A stage 2's run configuration :obj:`config` on batches of one domain each,
        drawn with :attr:`probabilities` (a new dict; the others' sections kept)."""
        config = dict(config)
        config["data"] = dict(config.get("data") or {}, domain_batches=True)
        config["train"] = dict(config.get("train") or {}, domain_sampling_alpha=self.alpha)
        return config

    def rule(self):
        """The rule and the steps it gives, in one Markdown sentence of the report."""
        least = min(self.probabilities, key=self.probabilities.get)
        return (
            "stage 2 of the two-stage families %d steps of batches of one domain each, the"
            " domain drawn with p = %s (|C_d|^%g): every domain's blocks see at least"
            " FT_<domain>'s %d batches of that domain, S p_d - %g sqrt(S p_d (1 - p_d)) >= %d"
            " for the least likely (%s: %.0f batches on average)%s"
            % (
                self.steps,
                ", ".join("%s %.3f" % item for item in self.probabilities.items()),
                self.alpha,
                self.finetune_steps,
                MARGIN_SIGMAS,
                self.finetune_steps,
                least,
                self.steps * self.probabilities[least],
                (
                    "; the budget's %d steps are the floor" % self.floor
                    if self.steps == self.floor
                    else ""
                ),
            )
        )


#: The most passes over its domain's training data that a fine-tuning takes: on a small corpus
#: (a few hundred pairs per domain) the budget's ``finetune_steps`` are cut to it, and every
#: budget that follows from them (the stage 2's) with them. The default corpus's smallest domain
#: holds about 90 batches of 1024 tokens: 250 steps are under 3 passes, below the cap.
MAX_FINETUNE_EPOCHS = 10


def batches_per_epoch(info, domain, batch_size):
    """Batches of :obj:`batch_size` tokens in one pass over a domain's training data (its
    words on the longer side: the BPE tokens are at least as many); ``None`` when the corpus
    records no word counts."""
    train = info["stats"][domain]["train"]
    words = [value for key, value in train.items() if key.startswith("words_")]
    if not words:
        return None
    return max(1, int(math.ceil(max(words) / float(batch_size))))


def fit_to_corpus(budget, info):
    """Fits the budgets that depend on the corpus to its sizes (``corpus.json``: :obj:`info`),
    in place: FT_<domain>'s steps to at most :data:`MAX_FINETUNE_EPOCHS` passes over the
    smallest domain, the test sentences to the smallest test set.

    Returns:
      One sentence per budget the corpus decided (for the log and the report); none when
      the budget fits as it is (the default corpus).
    """
    notes = []
    domains = info["domains"]
    passes = {d: batches_per_epoch(info, d, budget["batch_size"]) for d in domains}
    passes = {d: n for d, n in passes.items() if n is not None}
    smallest = min(passes, key=passes.get) if passes else None
    cap = MAX_FINETUNE_EPOCHS * passes[smallest] if passes else None
    if cap is not None and budget.get("finetune_steps") and budget["finetune_steps"] > cap:
        notes.append(
            "FT_<domain> %d steps instead of the budget's %d: %d passes over the smallest"
            " domain's training data (%s: %d batches of %d tokens)"
            % (
                cap,
                budget["finetune_steps"],
                MAX_FINETUNE_EPOCHS,
                smallest,
                passes[smallest],
                budget["batch_size"],
            )
        )
        budget["finetune_steps"] = cap
    tests = {
        d: int(info["stats"][d]["test"]["pairs"]) for d in domains if "test" in info["stats"][d]
    }
    fewest = min(tests, key=tests.get) if tests else None
    if (
        fewest is not None
        and budget.get("eval_sentences")
        and budget["eval_sentences"] > tests[fewest]
    ):
        notes.append(
            "evaluation on %d test sentences per domain instead of the budget's %d: the"
            " corpus's smallest test set (%s)" % (tests[fewest], budget["eval_sentences"], fewest)
        )
        budget["eval_sentences"] = tests[fewest]
    return notes
