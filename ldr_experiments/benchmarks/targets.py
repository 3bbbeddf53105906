"""The targets of the issues (:data:`TARGETS`), resolved to the rows of a run and checked
against its measurements (PASS, MISS, or n/a for a row the run did not measure)."""

from ldr_experiments.benchmarks.rows import (
    CT2,
    DEFAULTS,
    ENSEMBLE_VIEWS,
    INFER,
    TF,
    TRAIN,
    VANILLA,
    build_rows,
    config_rows,
    make_size,
)

SYMBOLS = {">=": "≥", "<=": "≤"}


# The targets.

# Targets of the issues: (description, measured, reference, metric, comparison,
# threshold ratio). Measured and reference are (part, family, variant): the row of a
# registered family (None: vanilla) in one part (TRAIN, TF or CT2), variant a training
# mode (its training row), "ensemble" (its ensemble row) or None (its first row of that
# part). The targets name families: they are targets of those methods.
_LDR = "ldr_transformer"
_REFERENCE = {part: (part, None, None) for part in (TRAIN, TF, CT2)}
TARGETS = [
    (
        "LDR joint training tokens/s ≥ 0.95× vanilla",
        (TRAIN, _LDR, "joint"),
        _REFERENCE[TRAIN],
        "tokens_per_s",
        ">=",
        0.95,
    ),
    (
        "LDR Procedure 1 step ≤ 2.05× a vanilla step",
        (TRAIN, _LDR, "procedure1"),
        _REFERENCE[TRAIN],
        "ms_per_step",
        "<=",
        2.05,
    ),
    (
        "LDR SavedModel inference ≥ 0.95× vanilla SavedModel",
        (TF, _LDR, None),
        _REFERENCE[TF],
        "sentences_per_s",
        ">=",
        0.95,
    ),
    (
        "LDR folded CTranslate2 inference ≥ 3× LDR SavedModel",
        (CT2, _LDR, None),
        (TF, _LDR, None),
        "sentences_per_s",
        ">=",
        3.0,
    ),
    (
        "DC folded CTranslate2 inference ≥ 3× DC SavedModel",
        (CT2, "dc_transformer", None),
        (TF, "dc_transformer", None),
        "sentences_per_s",
        ">=",
        3.0,
    ),
]

for _design, _step, _beam in (("sf", 1.15, 1.3), ("df", 1.15, 1.3), ("pa", 1.2, 1.6)):
    _family = "factorized_" + _design
    TARGETS += [
        (
            "Factorized %s training step ≤ %.2f× vanilla (one-domain batches)"
            % (_design.upper(), _step),
            (TRAIN, _family, None),
            _REFERENCE[TRAIN],
            "ms_per_step",
            "<=",
            _step,
        ),
        (
            "Factorized %s training peak memory ≤ 1.3× vanilla" % _design.upper(),
            (TRAIN, _family, None),
            _REFERENCE[TRAIN],
            "peak_rss_mib",
            "<=",
            1.3,
        ),
        (
            "Factorized %s SavedModel beam search ≤ %.1f× vanilla's time (3 domains per batch)"
            % (_design.upper(), _beam),
            (TF, _family, None),
            _REFERENCE[TF],
            "ms_per_sentence",
            "<=",
            _beam,
        ),
    ]

# Ensembles of domain views: K views cost at most K x one view's beam search + 10%.
TARGETS += [
    (
        "Ensemble of %s's %d views (ens-uniform): SavedModel beam search ≤ %d× + 10%% %s's"
        % (title, ENSEMBLE_VIEWS, ENSEMBLE_VIEWS, short),
        (TF, family, "ensemble"),
        (TF, family, None),
        "ms_per_sentence",
        "<=",
        ENSEMBLE_VIEWS * 1.1,
    )
    for family, title, short in ((_LDR, "LDR", "LDR"), ("factorized_pa", "Factorized PA", "PA"))
]

#: The family whose rows get the domain-mixing targets (:func:`mixing_targets`).
MIXING_FAMILY = "mixing_transformer"


def target_where(selector, rows):
    """The ``(table, key)`` of a target's row in :obj:`rows`, or ``None`` (not a row).

    Args:
      selector: ``(part, family, variant)`` (see :data:`TARGETS`).
      rows: The rows of the run.
    """
    part, family, variant = selector
    for row in rows:
        if (row.family if family else row.name) != (family or VANILLA):
            continue
        if part == TRAIN and row.train and variant in (None, row.domain_training):
            return TRAIN, row.name
        if part == TF and row.tf and row.ensemble == (variant == "ensemble"):
            return INFER, "%s:%s" % (TF, row.name)
        if part == CT2 and row.ct2:
            return INFER, "%s:%s" % (CT2, row.name)
    return None


def ratio(value, reference):
    """``value / reference``, or ``None`` when either is missing or the reference is 0."""
    if value is None or reference is None or reference == 0:
        return None
    return value / reference


def check(value, comparison, threshold):
    """``PASS``, ``MISS``, or ``n/a`` when the value is missing.

    Args:
      value: The measured ratio, or ``None``.
      comparison: ``">="`` or ``"<="``.
      threshold: The target ratio.
    """
    if value is None:
        return "n/a"
    if comparison == ">=":
        passed = value >= threshold
    elif comparison == "<=":
        passed = value <= threshold
    else:
        raise ValueError("unknown comparison %r" % comparison)
    return "PASS" if passed else "MISS"


def metric(results, where, name):
    """A metric of one measurement in :obj:`results`, or ``None`` (missing or failed)."""
    table, row = where
    entry = results.get(table, {}).get(row)
    if not entry or "error" in entry:
        return None
    return entry.get(name)


def transformer_flops(size, vocab, length, decode_length, beam, k=None):
    """Matmul FLOPs of one sentence: (training forward pass, beam-search translation).

    A multiply-add counts 2. ``k=None``: the vanilla Transformer; ``k``: domain mixing
    (E/DC), whose Q/K/V and FFN linears cost ``k`` times theirs, plus the proportion
    layers (``d x k`` per word and layer). Training is teacher-forced on source and
    target of :obj:`length` words (a backward pass costs about twice the forward in
    both models, so the ratio is that of the forward); translation runs the encoder
    once and :obj:`decode_length` incremental decoder steps on :obj:`beam`
    hypotheses, cross-attention keys and values computed once per hypothesis.
    Attention scores, the output projection and the embeddings are not mixed.
    """
    d, f, layers = size["num_units"], size["ffn_inner_dim"], size["num_layers"]
    m = 1 if k is None else k
    extra = 0 if k is None else 2 * d * k  # The proportions of one word in one layer.

    def attention(queries, keys):  # Scores and weighted sum: 2 x (2 * queries * keys * d).
        return 4 * queries * keys * d

    ffn = 2 * 2 * d * f * m
    # Encoder layer, per source word: mixed Q/K/V, shared output projection, FFN.
    encoder = length * (2 * 3 * d * d * m + 2 * d * d + ffn + extra) + attention(length, length)
    memory_kv = length * (2 * 2 * d * d * m + extra)  # Cross-attention K/V of the memory.

    def decoder_word(prefix):
        self_attention = 2 * 3 * d * d * m + 2 * d * d + attention(1, prefix)
        cross = 2 * d * d * m + 2 * d * d + attention(1, length)
        return self_attention + cross + ffn + extra

    output = 2 * d * vocab
    train = layers * (encoder + memory_kv + sum(decoder_word(t + 1) for t in range(length)))
    train += length * output
    decode = layers * (encoder + beam * memory_kv)
    decode += beam * sum(layers * decoder_word(t + 1) + output for t in range(decode_length))
    return train, decode


def mixing_flop_ratios(config, k):
    """(training, translation) FLOP ratios of domain mixing with ``k`` domains to vanilla."""
    args = (config["size"], config["vocab"] + 3, config["length"])
    args += (config["decode_length"], config["beam"])
    vanilla = transformer_flops(*args)
    mixing = transformer_flops(*args, k=k)
    return mixing[0] / vanilla[0], mixing[1] / vanilla[1]


def mixing_targets(config):
    """The domain-mixing targets of a run: each step and translation at most the FLOP
    ratio / 0.8 times vanilla's (80% of the throughput the FLOPs predict), for every row
    of :data:`MIXING_FAMILY` in the run (k: its number of domains)."""
    targets = []
    for row in config_rows(config):
        if row.family != MIXING_FAMILY or row.ensemble:
            continue
        k = len(row.domains)
        train, decode = mixing_flop_ratios(config, k)
        targets += [
            (
                "Domain mixing k = %d training step ≤ %.2f× vanilla (FLOPs %.2f×, / 0.8)"
                % (k, train / 0.8, train),
                (TRAIN, row.name),
                (TRAIN, VANILLA),
                "ms_per_step",
                "<=",
                train / 0.8,
            ),
            (
                "Domain mixing k = %d SavedModel beam search ≤ %.2f× vanilla's time "
                "(FLOPs %.2f×, / 0.8)" % (k, decode / 0.8, decode),
                (INFER, "%s:%s" % (TF, row.name)),
                (INFER, "%s:%s" % (TF, VANILLA)),
                "ms_per_sentence",
                "<=",
                decode / 0.8,
            ),
        ]
    return targets


def run_targets(config=None):
    """The targets of a run, their rows resolved: ``[(description, (table, key) or None,
    (table, key) or None, metric, comparison, threshold)]``.

    Args:
      config: The run configuration (its rows); ``None``: every row of the registry at
        the default size, without the domain-mixing targets (they depend on the sizes).
    """
    if config is None:
        rows = build_rows(make_size(DEFAULTS["layers"], DEFAULTS["units"], DEFAULTS["heads"]))
    else:
        rows = config_rows(config)
    resolved = [
        (description, target_where(where, rows), target_where(reference, rows), *rest)
        for description, where, reference, *rest in TARGETS
    ]
    return resolved + (mixing_targets(config) if config else [])


def check_targets(results, config=None):
    """Checks the targets of the issues.

    Args:
      results: ``{"train": {row: measurement}, "infer": {"tf:ldr": measurement, ...}}``
        (a measurement is a dict of metrics, or ``{"error": ...}``).
      config: The run configuration (see :func:`run_targets`).

    Returns:
      A list of ``(description, measured ratio or None, comparison, threshold,
      "PASS" | "MISS" | "n/a")``, one per target of :func:`run_targets`.
    """
    checks = []
    for description, where, reference, name, comparison, threshold in run_targets(config):
        value = None
        if where and reference:
            value = ratio(metric(results, where, name), metric(results, reference, name))
        checks.append(
            (description, value, comparison, threshold, check(value, comparison, threshold))
        )
    return checks
