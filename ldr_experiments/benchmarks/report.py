"""The benchmark's Markdown report: the machine, the sizes, the training and inference
tables with their ratios to vanilla, and the targets."""

import collections

from ldr_experiments.benchmarks.rows import (
    CT2,
    DOMAINS,
    FEED_DOMAIN,
    FEED_ENSEMBLE,
    FEED_MIXED,
    FEED_NONE,
    INFER,
    INFER_DOMAIN,
    MODE_NOTES,
    RUNTIMES,
    TF,
    TRAIN,
    VANILLA,
    config_rows,
    infer_tasks,
)
from ldr_experiments.benchmarks.targets import SYMBOLS, check_targets, ratio, run_targets
from ldr_experiments.standalone import markdown_table


def format_number(value, digits=1):
    """A number with :obj:`digits` decimals, or ``n/a``."""
    return "n/a" if value is None else "%.*f" % (digits, value)


def format_ratio(value):
    """A ratio as ``1.23x``, or ``n/a``."""
    return "n/a" if value is None else "%.2fx" % value


def _and(words):
    """``a``, ``a and b``, ``a, b and c``."""
    words = list(words)
    return words[0] if len(words) == 1 else "%s and %s" % (", ".join(words[:-1]), words[-1])


def _header(config, machine):
    size = config["size"]
    rows = config_rows(config)
    families = list(dict.fromkeys(row.family_title for row in rows if row.family))
    # The builder arguments the rows set (the others are the family's defaults).
    arguments = list(
        dict.fromkeys(
            "%s: %s" % (row.title, ", ".join("%s = %s" % kv for kv in sorted(row.kwargs.items())))
            for row in rows
            if row.kwargs and not row.ensemble
        )
    )
    lines = [
        "# Benchmarks: vanilla OpenNMT-tf Transformer"
        + (" vs %s" % _and(families) if families else ""),
        "",
        "- date: %s" % machine["date"],
        "- machine: %s; load average at start: %s" % (machine["machine"], machine["load"]),
        "- software: %s" % machine["software"],
        "- models: Transformer, %d+%d layers, %d units, %d heads, FFN %d, dropout 0.1 "
        "(training); vocabularies of %d words (+ specials); %d domains (k where a title says "
        "so); every family with its builder's defaults (`ldr-main --list-families`)%s"
        % (
            size["num_layers"],
            size["num_layers"],
            size["num_units"],
            size["num_heads"],
            size["ffn_inner_dim"],
            config["vocab"],
            len(DOMAINS),
            " but for: %s" % "; ".join(arguments) if arguments else "",
        ),
        "- data: synthetic, uniformly random words, every sentence %d tokens, domains "
        "in turn by blocks of one training batch; models untrained (random weights, seed %d)"
        % (config["length"], config["seed"]),
        "- every measurement runs in its own process, one after the other; peak RSS is "
        "that process's peak resident memory (`VmHWM`), runtime and imports included",
    ]
    if config.get("quick"):
        lines.append("- `--quick`: tiny sizes, to check that the benchmark runs; not figures")
    return lines


def _train_section(config, results):
    train = results.get(TRAIN, {})
    base = train.get(VANILLA, {})
    rows = []
    modes = collections.OrderedDict()
    for row in config_rows(config):
        entry = train.get(row.name)
        if entry is None or not row.train:
            continue
        if row.domain_training:
            modes.setdefault(row.domain_training, []).append(row.title)
        if "error" in entry:
            rows.append([row.title, "failed: %s" % entry["error"]] + ["n/a"] * 7)
            continue
        rows.append(
            [
                row.title,
                "{:,}".format(entry["params"]),
                format_number(entry["ms_per_step"]),
                format_number(entry["tokens_per_s"], 0),
                format_ratio(ratio(entry["tokens_per_s"], base.get("tokens_per_s"))),
                format_ratio(ratio(entry["ms_per_step"], base.get("ms_per_step"))),
                format_number(entry["import_rss_mib"], 0),
                format_number(entry["peak_rss_mib"], 0),
                format_ratio(ratio(entry["peak_rss_mib"], base.get("peak_rss_mib"))),
            ]
        )
    headers = [
        "system",
        "parameters",
        "ms/step",
        "tokens/s",
        "tokens/s × vanilla",
        "ms/step × vanilla",
        "RSS after imports MiB",
        "peak RSS MiB",
        "peak RSS × vanilla",
    ]
    tokens = next((e["tokens_per_step"] for e in train.values() if "error" not in e), None)
    described = "; ".join(
        "`%s` (%s): %s" % (mode, MODE_NOTES.get(mode, "its own"), ", ".join(titles))
        for mode, titles in modes.items()
    )
    return [
        "## Training",
        "",
        "OpenNMT-tf's training step (`Trainer._steps`: gradients, accumulation, Adam "
        "update) on the same 16 batches of %d sentences, cached in memory; median of %d "
        "steps after %d warm-up steps. tokens/s counts the source and target tokens of a "
        "step (%s per step, target `</s>` included). Training modes (`params: "
        "domain_training`): %s; every batch has one domain, as `ldr-main`'s sampling gives."
        % (
            config["batch"],
            config["steps"],
            config["warmup"],
            format_number(tokens, 0),
            described or "none",
        ),
        "",
        markdown_table(headers, rows),
    ]


def _infer_row(infer, runtime, row):
    """A row of the inference table, or ``None`` if the row was not measured there."""
    entry = infer.get("%s:%s" % (runtime, row.name))
    if entry is None:
        return None
    if "error" in entry:
        return [row.title, RUNTIMES[runtime], "failed: %s" % entry["error"]] + ["n/a"] * 9
    same_runtime = infer.get("%s:%s" % (runtime, VANILLA), {})
    vanilla_tf = infer.get("%s:%s" % (TF, VANILLA), {})
    own_tf = infer.get("%s:%s" % (TF, row.name), {})
    speed = entry["sentences_per_s"]
    own, same_output = "", ""
    if runtime == CT2:
        own = format_ratio(ratio(speed, own_tf.get("sentences_per_s")))
        same = entry.get("agreement")
        same_output = "n/a" if same is None else "%.0f%%" % (100 * same)
    return [
        row.title,
        RUNTIMES[runtime],
        format_number(speed),
        format_number(entry["tokens_per_s"], 0),
        format_number(entry["tokens_per_sentence"], 2),
        format_ratio(ratio(speed, vanilla_tf.get("sentences_per_s"))),
        format_ratio(ratio(speed, same_runtime.get("sentences_per_s"))),
        own,
        same_output,
        format_number(entry["model_mib"]),
        format_number(entry["peak_rss_mib"], 0),
        format_ratio(ratio(entry["peak_rss_mib"], same_runtime.get("peak_rss_mib"))),
    ]


def _labels_sentence(rows):
    """What the SavedModels of :obj:`rows` are fed, in words."""
    fed = collections.OrderedDict()
    for row in rows:
        if row.tf and row.name != VANILLA:
            fed.setdefault(row.labels, []).append(row.title)
    parts = []
    if fed.get(FEED_DOMAIN):
        parts.append("domain `%s` for %s" % (INFER_DOMAIN, _and(fed[FEED_DOMAIN])))
    if fed.get(FEED_MIXED):
        parts.append(
            "the %d domains in turn within every batch for %s (each sentence selects its "
            "copy)" % (len(DOMAINS), _and(fed[FEED_MIXED]))
        )
    if fed.get(FEED_ENSEMBLE):
        parts.append("`ens-uniform` for the ensembles (every domain view and generic, mixed)")
    if fed.get(FEED_NONE):
        parts.append("no label read by %s" % _and(fed[FEED_NONE]))
    return "; labels: %s" % "; ".join(parts) if parts else ""


def _infer_section(config, results):
    infer = results.get(INFER, {})
    tasks = infer_tasks(config_rows(config))
    rows = [_infer_row(infer, runtime, row) for runtime, row in tasks]
    rows = [row for row in rows if row is not None]
    folded = [row.title for runtime, row in tasks if runtime == CT2 and row.name != VANILLA]
    uneven = sorted(
        task
        for task, entry in infer.items()
        if "error" not in entry and entry["tokens_per_sentence"] != config["decode_length"]
    )
    headers = [
        "system",
        "runtime",
        "sentences/s",
        "target tokens/s",
        "tokens/sentence",
        "× vanilla SavedModel",
        "× vanilla same runtime",
        "× own SavedModel",
        "same output as own SavedModel",
        "model MiB",
        "peak RSS MiB",
        "peak RSS × vanilla same runtime",
    ]
    quantization = config["quantization"] or "float32 (no quantization)"
    batches = -(-config["sentences"] // config["infer_batch"])
    lines = [
        "## Inference on CPU",
        "",
        "Beam %d; the same %d sentences of %d tokens in %d batches of %d (padded token/length "
        "tensors built before timing)%s; every output forced to L = %d tokens (minimum = "
        "maximum decoding length), target tokens counted from the outputs; median of %d "
        "pass(es) over all batches after 1 warm-up batch, outputs converted to token lists. TF"
        " SavedModel: `tf.saved_model.load` + `signatures['serving_default']`, %d intra-op "
        "threads. CTranslate2 in its throughput setting: `Translator(device='cpu', "
        "inter_threads=%d, intra_threads=1)`, all sentences per call with `max_batch_size` = "
        "the batch size, so batches run in parallel, `translate_batch(beam_size=%d, "
        "min/max_decoding_length=L)`, %s; %svanilla converted by the OpenNMT-tf converter."
        % (
            config["beam"],
            config["sentences"],
            config["length"],
            batches,
            config["infer_batch"],
            _labels_sentence(config_rows(config)),
            config["decode_length"],
            config["passes"],
            config["threads"],
            config["threads"],
            config["beam"],
            quantization,
            "%s folded for `%s`, " % (_and(folded), INFER_DOMAIN) if folded else "",
        ),
        "",
        markdown_table(headers, rows, align="ll" + "r" * (len(headers) - 2)),
    ]
    if uneven:
        lines += [
            "",
            "**Warning**: the outputs of %s are not all of L = %d tokens: tokens/s are "
            "counted from the outputs, but these systems did not do the same work."
            % (", ".join(uneven), config["decode_length"]),
        ]
    return lines


def _measured(where, results):
    """Whether the row of a target's ``(table, key)`` was measured in this run."""
    if where is None:
        return False
    table, key = where
    return key in results.get(table, {})


def _targets_section(results, config=None):
    # Only the targets of the rows this run measured (--families).
    rows = [
        [description, format_ratio(value), "%s %.2fx" % (SYMBOLS[comparison], threshold), status]
        for (description, value, comparison, threshold, status), target in zip(
            check_targets(results, config), run_targets(config)
        )
        if _measured(target[1], results)
    ]
    return [
        "## Targets",
        "",
        markdown_table(["target", "measured", "target ratio", "result"], rows, align="lrrl"),
    ]


def format_report(config, results, machine, elapsed=None):
    """The markdown report of a run.

    Args:
      config: The run configuration (see :func:`make_config`).
      results: The measurements (see :func:`check_targets`).
      machine: The machine and its software (:func:`ldr_experiments.machine.describe`).
      elapsed: The run time in seconds, if known.

    Returns:
      The report, ending with a newline.
    """
    lines = _header(config, machine)
    if TRAIN in config["parts"]:
        lines += [""] + _train_section(config, results)
    if INFER in config["parts"]:
        lines += [""] + _infer_section(config, results)
    lines += [""] + _targets_section(results, config)
    if elapsed is not None:
        lines += ["", "Run time: %.1f min." % (elapsed / 60)]
    return "\n".join(lines) + "\n"
