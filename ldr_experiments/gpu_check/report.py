"""The GPU check's verdicts (:func:`evaluate_checks`) and its Markdown report, in the format
of BENCHMARKS.md."""

from ldr_experiments.benchmarks import report as bench_report
from ldr_experiments.benchmarks import rows as bench_rows
from ldr_experiments.benchmarks import targets as bench_targets
from ldr_experiments.gpu_check.plan import (
    MIXED_XLA,
    MODE_NAMES,
    QUICK_RNN_SIZE,
    RNN_SIZE,
    VANILLA,
    long_mode,
    row_titles,
    steps_of,
)
from ldr_experiments.gpu_check.probe import environment_lines, library_summary
from ldr_experiments.standalone import markdown_table

# The report.


def _cell_error(entry):
    return "failed: %s" % entry["error"].replace("|", "/")[:200]


def training_table(config, results):
    """One row per family: ms/step, tokens/s and the ratio to vanilla in each mode."""
    modes = config["modes"]
    headers = ["system", "parameters"]
    for mode in modes:
        name = MODE_NAMES[mode]
        headers += ["%s ms/step" % name, "%s tokens/s" % name, "%s tokens/s × vanilla" % name]
    headers += ["long run", "loss per sentence after it", "peak GPU MiB in it"]
    rows = []
    titles = row_titles(config)
    for system in config["systems"]:
        row = [titles[system], "n/a"]
        for mode in modes:
            entry = results.get(mode, {}).get(system)
            base = results.get(mode, {}).get(VANILLA) or {}
            if mode == MIXED_XLA and system in config["no_xla"]:
                row += ["n/a (no XLA for this family)", "n/a", "n/a"]
                continue
            if entry is None or "error" in entry:
                row += [_cell_error(entry) if entry else "n/a", "n/a", "n/a"]
                continue
            row[1] = "{:,}".format(entry["params"])
            row += [
                bench_report.format_number(entry["ms_per_step"]),
                bench_report.format_number(entry["tokens_per_s"], 0),
                bench_report.format_ratio(
                    bench_targets.ratio(entry["tokens_per_s"], base.get("tokens_per_s"))
                ),
            ]
        last = long_mode(config, system)
        if last is None:
            row += ["none (no XLA for this family)", "n/a", "n/a"]
            rows.append(row)
            continue
        entry = results.get(last, {}).get(system) or {}
        row.append("%s, %d steps" % (MODE_NAMES[last], steps_of(config, last, system)))
        row.append(
            bench_report.format_number(entry.get("last_loss"), 3) if "error" not in entry else "n/a"
        )
        row.append(bench_report.format_number(entry.get("gpu_peak_mib"), 0))
        rows.append(row)
    return markdown_table(headers, rows)


def evaluate_checks(info, config, results):
    """``[(check, "PASS" | "FAIL", detail)]`` of a GPU run."""
    checks = []
    titles = row_titles(config)
    gpus = info["gpus"]
    checks.append(
        (
            "TensorFlow sees the GPU",
            "PASS" if gpus else "FAIL",
            "; ".join(g["name"] for g in gpus) or "none",
        )
    )
    checks.append(
        (
            "CUDA libraries load, versions match TensorFlow's build",
            "PASS" if not info["failing"] and not info["mismatches"] else "FAIL",
            library_summary(info),
        )
    )
    needs_xla = MIXED_XLA in config["modes"]
    checks.append(
        (
            "XLA finds ptxas and libdevice",
            "PASS" if not info["xla_problem"] else ("FAIL" if needs_xla else "n/a"),
            info["xla_problem"] or info["xla_data_dir"],
        )
    )
    for mode in config["modes"]:
        entries = results.get(mode, {})
        bad = [
            "%s (%s)" % (titles[s], e.get("error") or "loss %s" % e.get("last_loss"))
            for s, e in entries.items()
            if "error" in e or not e.get("finite_loss")
        ]
        long_runs = sorted({steps_of(config, mode, s) for s in entries})
        detail = "%d of %d families" % (len(entries) - len(bad), len(entries))
        no_xla = [titles[s] for s in config["systems"] if s in config["no_xla"]]
        if mode == MIXED_XLA and no_xla:
            detail += " (not %s: ldr-opennmt refuses --jit_compile for them)" % ", ".join(no_xla)
        checks.append(
            (
                "training, %s, %s steps, finite loss"
                % (MODE_NAMES[mode], " or ".join(str(n) for n in long_runs) or "0"),
                "PASS" if entries and not bad else "FAIL",
                detail + ("; failed: %s" % "; ".join(bad) if bad else ""),
            )
        )
    frozen = results.get("frozen", {})
    if frozen:
        bad, details = [], []
        half = config["mixed_policy"][len("mixed_") :]
        for system, entry in frozen.items():
            if "error" in entry:
                bad.append("%s: %s" % (titles[system], entry["error"]))
                continue
            ok = (
                entry["absent_changed"] == 0
                and entry["absent_variables"] > 0
                and entry["present_changed"] == entry["present_variables"]
                and entry["compute_dtype"] == half
                and entry["finite_loss"]
            )
            details.append(
                "%s: %d absent-domain variables, %d changed; %d of %d present-domain "
                "variables changed; compute %s"
                % (
                    titles[system],
                    entry["absent_variables"],
                    entry["absent_changed"],
                    entry["present_changed"],
                    entry["present_variables"],
                    entry["compute_dtype"],
                )
            )
            if not ok:
                bad.append(titles[system])
        checks.append(
            (
                "%s + XLA: absent domains' parameters bit-identical" % half,
                "FAIL" if bad else "PASS",
                "; ".join(details + (["failed: %s" % ", ".join(bad)] if bad else [])),
            )
        )
    translate = results.get("translate")
    if translate is not None:
        if "error" in translate:
            checks.append(
                ("LDR SavedModel and folded CTranslate2 on the GPU", "FAIL", translate["error"])
            )
        else:
            length = config["decode_length"]
            ok = translate["savedmodel_on_gpu"] and translate["savedmodel_lengths"] == [length]
            checks.append(
                (
                    "LDR SavedModel translates with labels on the GPU",
                    "PASS" if ok else "FAIL",
                    "%d sentences × labels %s in %.2f s; outputs of %s tokens; the label "
                    "changes the output: %s"
                    % (
                        translate["sentences"],
                        "/".join(translate["domains"]),
                        translate["savedmodel_s"],
                        translate["savedmodel_lengths"],
                        translate["labels_change_output"],
                    ),
                )
            )
            for compute_type in ("float32", "float16"):
                entry = translate["ct2_%s" % compute_type]
                if "error" in entry:
                    checks.append(
                        (
                            "folded CTranslate2 (%s) on the GPU" % compute_type,
                            "FAIL",
                            entry["error"],
                        )
                    )
                    continue
                same = entry.get("agreement")
                checks.append(
                    (
                        "folded CTranslate2 (%s) translates label %s on the GPU"
                        % (compute_type, translate["domains"][0]),
                        "PASS" if entry["lengths"] == [length] else "FAIL",
                        "%.2f s; outputs of %s tokens; same output as the SavedModel: %s"
                        % (
                            entry["seconds"],
                            entry["lengths"],
                            "n/a" if same is None else "%.0f%%" % (100 * same),
                        ),
                    )
                )
    return checks


def format_report(info, config, results, checks, machine, elapsed=None):
    """The markdown report, in the format of BENCHMARKS.md (:obj:`info`: the probes'
    (:func:`ldr_experiments.gpu_check.probe.probe_machine`), :obj:`machine`: the machine and
    its software (:func:`ldr_experiments.machine.describe`))."""
    gpu_names = ", ".join(g["name"] for g in info["gpus"]) or "no GPU"
    size = config["size"]
    lines = [
        "# GPU check: %s" % gpu_names,
        "",
        "- date: %s" % machine["date"],
        "- GPU: %s" % "; ".join(environment_lines(info)[:1] + environment_lines(info)[4:5]),
        "- machine: %s" % machine["machine"],
        "- software: %s; %s" % (machine["software"], environment_lines(info)[1]),
        "- CUDA: %s; %s" % (library_summary(info), environment_lines(info)[3]),
        "- models: Transformer %d+%d layers, %d units, %d heads, FFN %d, dropout 0.1; RNNs: "
        "embeddings %d, hidden %d, 1 layer; vocabularies of %d words; %d domains"
        % (
            size["num_layers"],
            size["num_layers"],
            size["num_units"],
            size["num_heads"],
            size["ffn_inner_dim"],
            (QUICK_RNN_SIZE if config["quick"] else RNN_SIZE)["embedding_size"],
            (QUICK_RNN_SIZE if config["quick"] else RNN_SIZE)["hidden_size"],
            config["vocab"],
            len(bench_rows.DOMAINS),
        ),
        "- data and step: the benchmark's (`ldr_experiments/benchmarks/`: synthetic, every sentence"
        " %d tokens, one domain per batch of %d sentences, 16 batches cached; OpenNMT-tf's "
        "`Trainer` step); one batch shape, so XLA compiles each step function once, in the %d "
        "warm-up steps; median step time of %d steps after them (%d in each family's long run: "
        "mixed precision + XLA, or mixed precision for the RNNs); mixed precision is `%s` with "
        "OpenNMT-tf's loss-scale optimizer, XLA is `model.set_jit_compile(True)` (`--jit_compile`);"
        " the loss is OpenNMT-tf's step loss (summed over a sentence's tokens, averaged over "
        "sentences)"
        % (
            config["length"],
            config["batch"],
            config["warmup"],
            config["timing_steps"],
            config["steps"],
            config["mixed_policy"],
        ),
        "- every measurement runs in its own process, one after the other; peak GPU MiB is "
        "TensorFlow's allocator peak (`tf.config.experimental.get_memory_info`)",
    ]
    if config["quick"]:
        lines.append("- `--quick`: tiny sizes, to check that the check runs; not figures")
    if not info["gpus"]:
        lines.append("- **no GPU**: this run used the CPU (`--allow_cpu`); not GPU figures")
    lines += [
        "",
        "## Checks",
        "",
        markdown_table(
            ["check", "result", "detail"],
            [[c, r, d.replace("|", "/")] for c, r, d in checks],
            align="lll",
        ),
        "",
        "## Training",
        "",
        "tokens/s counts the source and target tokens of a step; × vanilla is the ratio to the "
        "stock OpenNMT-tf Transformer of the same size in the same mode.",
        "",
        training_table(config, results),
    ]
    if elapsed is not None:
        lines += ["", "Run time: %.1f min." % (elapsed / 60)]
    return "\n".join(lines) + "\n"
