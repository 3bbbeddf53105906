"""Side-by-side benchmarks of vanilla OpenNMT-tf, Mixed, DC and LDR: speed and memory.

::

    bash run/bench.sh [--quick] [--out BENCH.md] [--layers 2 --units 256 ...]
    python run/benchmarks.py --help

One run measures, on the same synthetic data and the same batches, with models of
the same size, and prints as markdown with ratios to the vanilla
``opennmt.models.Transformer`` of that size:

1. training: OpenNMT-tf's own training step (``Trainer._steps``: gradients,
   accumulation and the Adam update) on 16 batches cached in memory, median over
   ``--steps`` steps after ``--warmup``, for vanilla, Mixed, DC, LDR joint and LDR
   Procedure 1 (ms/step and source+target tokens/s);
2. inference on CPU with beam search, on the same padded batches of the same
   sentences: the exported SavedModels (``serving_default``) of vanilla, Mixed, DC
   and LDR, and the CTranslate2 models of vanilla (OpenNMT-tf converter), DC and LDR
   (folded for one domain, :mod:`ldr_opennmt.serving.ct2_export`). The models are
   untrained, so every output is forced to ``--decode_length`` tokens (minimum =
   maximum decoding length) and the tokens are counted from the outputs;
3. the peak resident memory of each of these measurements: each one runs in its own
   process, one after the other, never in parallel, and reports its peak RSS
   (``VmHWM``, see :func:`peak_rss_mib`) at its end.

The targets of the "Serving and speed" issue are checked (PASS/MISS). The processes
run this file with :func:`runpy.run_path` rather than ``-m``, so that a CTranslate2
process does not import TensorFlow (``import ldr_opennmt`` does): the top of this
module imports the standard library only.

A script of the repository, not of the installed package: ``run/bench.sh`` sets up
the environment and runs it from the repository root as ``python -m benchmarks`` with
``run/`` on ``sys.path`` (``python run/benchmarks.py`` runs the same).
"""

import argparse
import importlib.metadata
import json
import os
import platform
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

DOMAINS = ["d0", "d1", "d2"]
INFER_DOMAIN = "d0"
VANILLA = "vanilla"
TF = "tf"
CT2 = "ct2"
TRAIN = "train"
INFER = "infer"
PARTS = (TRAIN, INFER)

NAMES = {
    VANILLA: "vanilla OpenNMT-tf Transformer",
    "mixed": "Mixed",
    "dc": "DC (domain control)",
    "ldr": "LDR",
    "ldr_joint": "LDR joint",
    "ldr_procedure1": "LDR Procedure 1",
    "fact_pa": "Factorized PA",
    "fact_sf": "Factorized SF",
    "fact_df": "Factorized DF",
    "mix_k2": "Domain mixing, k = 2",
    "mix_k3": "Domain mixing, k = 3",
    "mix_k6": "Domain mixing, k = 6",
    "adapters": "Residual adapters",
    "ttm": "TTM",
    "ml": "ML",
    "advl": "AdvL",
    "ens_ldr": "LDR, ens-uniform (3 domains + generic)",
    "ens_fact_pa": "Factorized PA, ens-uniform (3 domains + generic)",
}
#: Ensembles of domain views: the SavedModel of the base system, fed ``ens-uniform``
#: labels (every view of every sentence decodes together, see ldr_opennmt.ensembles).
ENSEMBLE_BASE = {"ens_ldr": "ldr", "ens_fact_pa": "fact_pa"}
#: The views of those ensembles: the benchmark's domains and generic.
ENSEMBLE_VIEWS = 4
#: The domain counts of the domain-mixing systems (its cost grows with k).
MIXING_KS = (2, 3, 6)
RUNTIMES = {TF: "TF SavedModel", CT2: "CTranslate2"}
TRAIN_SYSTEMS = [VANILLA, "mixed", "dc", "ldr_joint", "ldr_procedure1"]
TRAIN_SYSTEMS += ["fact_pa", "fact_sf", "fact_df", "mix_k2", "mix_k3", "mix_k6"]
TRAIN_SYSTEMS += ["adapters", "ttm", "ml", "advl"]
TF_SYSTEMS = [VANILLA, "mixed", "dc", "ldr", "fact_pa", "fact_sf", "fact_df"]
TF_SYSTEMS += ["mix_k2", "mix_k3", "mix_k6", "adapters", "ttm", "ml", "advl"]
TF_SYSTEMS += ["ens_ldr", "ens_fact_pa"]
CT2_SYSTEMS = [VANILLA, "dc", "ldr", "fact_pa", "fact_sf", "fact_df"]
# Training mode of each training system (params: domain_training). The Factorized
# designs train in one pass over all their variables: the cost of their blocks, as in
# stage 2 of the curriculum or joint training (Procedure 1's two passes cost what
# LDR's do).
DOMAIN_TRAINING = {
    "mixed": "joint",
    "dc": "joint",
    "ldr_joint": "joint",
    "ldr_procedure1": "procedure1",
    "fact_pa": "joint",
    "fact_sf": "joint",
    "fact_df": "joint",
    "mix_k2": "joint",
    "mix_k3": "joint",
    "mix_k6": "joint",
    # Residual adapters train their adapters alone, the base frozen (the only mode).
    "adapters": "domains",
    "ttm": "joint",
    "ml": "joint",
    "advl": "joint",
}
# The family of each system, for --families (vanilla, the reference, is always run).
FAMILIES = {
    "baselines": ("mixed", "dc"),
    "ldr": ("ldr", "ldr_joint", "ldr_procedure1"),
    "factorized": ("fact_pa", "fact_sf", "fact_df"),
    "mixing": ("mix_k2", "mix_k3", "mix_k6"),
    "paper_baselines": ("adapters", "ttm", "ml", "advl"),
    # With the systems they ensemble (the target compares them).
    "ensembles": ("ldr", "fact_pa", "ens_ldr", "ens_fact_pa"),
}
# SavedModels fed batches that mix the domains (sentence i gets DOMAINS[i % 3]): the
# Factorized blocks select a copy per sentence. The others get INFER_DOMAIN, the
# domain their CTranslate2 fold is for.
MIXED_DOMAIN_FEED = ("fact_pa", "fact_sf", "fact_df")
# DF's factorization size relative to the model size: the paper's 280 for 512 units.
DF_INNER_RATIO = 280 / 512

DEFAULTS = dict(
    layers=2,
    units=256,
    heads=4,
    vocab=2000,
    length=24,
    batch=64,
    steps=50,
    warmup=5,
    sentences=256,
    infer_batch=32,
    decode_length=24,
    beam=4,
    passes=3,
)
QUICK = dict(
    DEFAULTS,
    layers=1,
    units=64,
    heads=2,
    vocab=500,
    length=12,
    batch=16,
    steps=5,
    warmup=2,
    sentences=32,
    infer_batch=16,
    decode_length=8,
    passes=1,
)

# Targets of the issue: (description, (table, row) measured, (table, row) of the
# reference, metric, comparison, threshold ratio).
TARGETS = [
    (
        "LDR joint training tokens/s ≥ 0.95× vanilla",
        (TRAIN, "ldr_joint"),
        (TRAIN, VANILLA),
        "tokens_per_s",
        ">=",
        0.95,
    ),
    (
        "LDR Procedure 1 step ≤ 2.05× a vanilla step",
        (TRAIN, "ldr_procedure1"),
        (TRAIN, VANILLA),
        "ms_per_step",
        "<=",
        2.05,
    ),
    (
        "LDR SavedModel inference ≥ 0.95× vanilla SavedModel",
        (INFER, "tf:ldr"),
        (INFER, "tf:vanilla"),
        "sentences_per_s",
        ">=",
        0.95,
    ),
    (
        "LDR folded CTranslate2 inference ≥ 3× LDR SavedModel",
        (INFER, "ct2:ldr"),
        (INFER, "tf:ldr"),
        "sentences_per_s",
        ">=",
        3.0,
    ),
    (
        "DC folded CTranslate2 inference ≥ 3× DC SavedModel",
        (INFER, "ct2:dc"),
        (INFER, "tf:dc"),
        "sentences_per_s",
        ">=",
        3.0,
    ),
]

for _design, _step, _beam in (("sf", 1.15, 1.3), ("df", 1.15, 1.3), ("pa", 1.2, 1.6)):
    _system = "fact_" + _design
    TARGETS += [
        (
            "Factorized %s training step ≤ %.2f× vanilla (one-domain batches)"
            % (_design.upper(), _step),
            (TRAIN, _system),
            (TRAIN, VANILLA),
            "ms_per_step",
            "<=",
            _step,
        ),
        (
            "Factorized %s training peak memory ≤ 1.3× vanilla" % _design.upper(),
            (TRAIN, _system),
            (TRAIN, VANILLA),
            "peak_rss_mib",
            "<=",
            1.3,
        ),
        (
            "Factorized %s SavedModel beam search ≤ %.1f× vanilla's time (3 domains per batch)"
            % (_design.upper(), _beam),
            (INFER, "tf:" + _system),
            (INFER, "tf:" + VANILLA),
            "ms_per_sentence",
            "<=",
            _beam,
        ),
    ]

# Ensembles of domain views: K views cost at most K x one view's beam search + 10%.
TARGETS += [
    (
        "Ensemble of LDR's %d views (ens-uniform): SavedModel beam search ≤ %d× + 10%% LDR's"
        % (ENSEMBLE_VIEWS, ENSEMBLE_VIEWS),
        (INFER, "tf:ens_ldr"),
        (INFER, "tf:ldr"),
        "ms_per_sentence",
        "<=",
        ENSEMBLE_VIEWS * 1.1,
    ),
    (
        "Ensemble of Factorized PA's %d views (ens-uniform): beam search ≤ %d× + 10%% PA's"
        % (ENSEMBLE_VIEWS, ENSEMBLE_VIEWS),
        (INFER, "tf:ens_fact_pa"),
        (INFER, "tf:fact_pa"),
        "ms_per_sentence",
        "<=",
        ENSEMBLE_VIEWS * 1.1,
    ),
]

SYMBOLS = {">=": "≥", "<=": "≤"}

# A measurement process runs this file as a script (see the module docstring).
_BOOT = "import runpy, sys; runpy.run_path(sys.argv.pop(1), run_name='__main__')"


# Pure helpers.


def _read(path):
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError:
        return ""


def ratio(value, reference):
    """``value / reference``, or ``None`` when either is missing or the reference is 0."""
    if value is None or reference is None or reference == 0:
        return None
    return value / reference


def format_number(value, digits=1):
    """A number with :obj:`digits` decimals, or ``n/a``."""
    return "n/a" if value is None else "%.*f" % (digits, value)


def format_ratio(value):
    """A ratio as ``1.23x``, or ``n/a``."""
    return "n/a" if value is None else "%.2fx" % value


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
    ratio / 0.8 times vanilla's (80% of the throughput the FLOPs predict)."""
    targets = []
    for k in MIXING_KS:
        system = "mix_k%d" % k
        train, decode = mixing_flop_ratios(config, k)
        targets += [
            (
                "Domain mixing k = %d training step ≤ %.2f× vanilla (FLOPs %.2f×, / 0.8)"
                % (k, train / 0.8, train),
                (TRAIN, system),
                (TRAIN, VANILLA),
                "ms_per_step",
                "<=",
                train / 0.8,
            ),
            (
                "Domain mixing k = %d SavedModel beam search ≤ %.2f× vanilla's time "
                "(FLOPs %.2f×, / 0.8)" % (k, decode / 0.8, decode),
                (INFER, "tf:" + system),
                (INFER, "tf:" + VANILLA),
                "ms_per_sentence",
                "<=",
                decode / 0.8,
            ),
        ]
    return targets


def check_targets(results, config=None):
    """Checks the targets of the issue.

    Args:
      results: ``{"train": {system: measurement}, "infer": {"tf:ldr": measurement,
        ...}}`` (a measurement is a dict of metrics, or ``{"error": ...}``).
      config: The run configuration; with it, the domain-mixing targets, which
        depend on the sizes (:func:`mixing_targets`), are checked too.

    Returns:
      A list of ``(description, measured ratio or None, comparison, threshold,
      "PASS" | "MISS" | "n/a")``.
    """
    checks = []
    targets = TARGETS + (mixing_targets(config) if config else [])
    for description, where, reference, name, comparison, threshold in targets:
        value = ratio(metric(results, where, name), metric(results, reference, name))
        checks.append(
            (description, value, comparison, threshold, check(value, comparison, threshold))
        )
    return checks


def markdown_table(headers, rows, align=None):
    """A markdown table.

    Args:
      headers: The column titles.
      rows: Lists of cells (converted with ``str``).
      align: One character per column, ``l`` or ``r`` (default: the first column
        left, the others right).

    Returns:
      The table, one line per row, without a final newline.
    """
    if align is None:
        align = "l" + "r" * (len(headers) - 1)
    if len(align) != len(headers) or any(len(row) != len(headers) for row in rows):
        raise ValueError("every row and the alignment need one entry per column")
    lines = ["| " + " | ".join(headers) + " |"]
    lines.append("|" + "|".join("---:" if a == "r" else "---" for a in align) + "|")
    lines.extend("| " + " | ".join(str(cell) for cell in row) + " |" for row in rows)
    return "\n".join(lines)


def parse_cpu_model(cpuinfo):
    """The first ``model name`` of a ``/proc/cpuinfo`` text, or ``None``."""
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("model name", "Model", "cpu model") and value.strip():
            return value.strip()
    return None


def parse_mem_total_gib(meminfo):
    """``MemTotal`` of a ``/proc/meminfo`` text in GiB, or ``None``."""
    for line in meminfo.splitlines():
        if line.startswith("MemTotal:"):
            fields = line.split()
            if len(fields) >= 2 and fields[1].isdigit():
                return int(fields[1]) / (1024 * 1024)
    return None


def parse_peak_rss_mib(status):
    """``VmHWM`` (the peak resident set size) of a ``/proc/<pid>/status`` text in MiB,
    or ``None``."""
    for line in status.splitlines():
        if line.startswith("VmHWM:"):
            fields = line.split()
            if len(fields) >= 2 and fields[1].isdigit():
                return int(fields[1]) / 1024
    return None


def peak_rss_mib():
    """The peak resident set size of this process in MiB.

    On Linux this is ``VmHWM``, the peak of this process's own address space:
    ``ru_maxrss`` would be at least the RSS of the parent process, because the
    kernel carries the peak of the address space replaced by ``exec`` (the parent's,
    with the ``vfork`` that :mod:`subprocess` uses) into ``ru_maxrss``.
    """
    peak = parse_peak_rss_mib(_read("/proc/self/status"))
    if peak is not None:
        return peak
    maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return maxrss / (1024 * 1024 if sys.platform == "darwin" else 1024)  # Bytes on macOS.


def agreement(outputs, reference):
    """The fraction of sentences whose output equals the reference's, or ``None``."""
    if not outputs or reference is None or len(outputs) != len(reference):
        return None
    return sum(a == b for a, b in zip(outputs, reference)) / len(outputs)


def resolve_sizes(args):
    """Fills the size options left unset with the ``--quick`` or default values."""
    base = QUICK if args.quick else DEFAULTS
    for key, value in base.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    return args


def write_atomically(path, text):
    """Writes :obj:`text` to an exclusive temporary file next to :obj:`path`, then renames it.

    ``ldr_opennmt.utils.write_lines_atomic`` does the same, but importing the package
    imports TensorFlow, which this module keeps out of the CTranslate2 processes.
    """
    fd, tmp = tempfile.mkstemp(
        prefix="." + os.path.basename(path) + ".", dir=os.path.dirname(os.path.abspath(path))
    )
    renamed = False
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
        renamed = True
    finally:
        # Only the file created above: once renamed, whatever appears at its name is not ours.
        if not renamed and os.path.lexists(tmp):
            os.remove(tmp)


def directory_size_mib(path):
    """The total size of the files under :obj:`path` in MiB."""
    total = 0
    for root, _, files in os.walk(path):
        total += sum(os.path.getsize(os.path.join(root, name)) for name in files)
    return total / (1024 * 1024)


# The report.


def _version(package):
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def machine_description():
    """The machine and the software versions, as a dict of strings."""
    memory = parse_mem_total_gib(_read("/proc/meminfo"))
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count()
    try:
        load = "%.2f" % os.getloadavg()[0]
    except OSError:
        load = "n/a"
    return {
        "cpu": parse_cpu_model(_read("/proc/cpuinfo")) or platform.processor() or "unknown",
        "arch": platform.machine(),
        "cores": "%d logical CPUs (%d usable)" % (os.cpu_count() or 0, usable or 0),
        "memory": "n/a" if memory is None else "%.1f GiB RAM" % memory,
        "load": load,
        "python": platform.python_version(),
        "tensorflow": _version("tensorflow"),
        "opennmt": _version("opennmt-tf"),
        "ctranslate2": _version("ctranslate2"),
        "date": time.strftime("%Y-%m-%d %H:%M %Z"),
    }


def _header(config, machine):
    size = config["size"]
    lines = [
        "# Benchmarks: vanilla OpenNMT-tf Transformer vs Mixed, DC, LDR and Factorized",
        "",
        "- date: %s" % machine["date"],
        "- machine: %s (%s), %s, %s; 1-minute load average at start: %s"
        % (machine["cpu"], machine["arch"], machine["cores"], machine["memory"], machine["load"]),
        "- software: Python %s, TensorFlow %s, OpenNMT-tf %s, CTranslate2 %s"
        % (machine["python"], machine["tensorflow"], machine["opennmt"], machine["ctranslate2"]),
        "- models: Transformer, %d+%d layers, %d units, %d heads, FFN %d, dropout 0.1 "
        "(training); vocabularies of %d words (+ specials); %d domains; LDR: regions of 8 "
        "cells per domain; DC: 2 domain cells; Factorized DF: d_inner = %d (280/512 of the "
        "units, as in the paper); target embeddings shared in the Factorized designs"
        % (
            size["num_layers"],
            size["num_layers"],
            size["num_units"],
            size["num_heads"],
            size["ffn_inner_dim"],
            config["vocab"],
            len(DOMAINS),
            max(1, round(size["num_units"] * DF_INNER_RATIO)),
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
    for system in TRAIN_SYSTEMS:
        entry = train.get(system)
        if entry is None:
            continue
        if "error" in entry:
            rows.append([NAMES[system], "failed: %s" % entry["error"]] + ["n/a"] * 7)
            continue
        rows.append(
            [
                NAMES[system],
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
    return [
        "## Training",
        "",
        "OpenNMT-tf's training step (`Trainer._steps`: gradients, accumulation, Adam "
        "update) on the same 16 batches of %d sentences, cached in memory; median of %d "
        "steps after %d warm-up steps. tokens/s counts the source and target tokens of a "
        "step (%s per step, target `</s>` included). Mixed, DC and LDR joint train "
        "jointly; Procedure 1 runs its two passes per step; the Factorized designs train "
        "jointly (one pass over all their variables), and so does domain mixing (L_gen + "
        "L_mix, E/DC, k declared domains); every batch has one domain, as "
        "`ldr-main`'s sampling gives."
        % (config["batch"], config["steps"], config["warmup"], format_number(tokens, 0)),
        "",
        markdown_table(headers, rows),
    ]


def _infer_row(infer, runtime, system):
    """A row of the inference table, or ``None`` if the system was not measured."""
    entry = infer.get("%s:%s" % (runtime, system))
    if entry is None:
        return None
    if "error" in entry:
        return [NAMES[system], RUNTIMES[runtime], "failed: %s" % entry["error"]] + ["n/a"] * 9
    same_runtime = infer.get("%s:%s" % (runtime, VANILLA), {})
    vanilla_tf = infer.get("%s:%s" % (TF, VANILLA), {})
    own_tf = infer.get("%s:%s" % (TF, system), {})
    speed = entry["sentences_per_s"]
    own, same_output = "", ""
    if runtime == CT2:
        own = format_ratio(ratio(speed, own_tf.get("sentences_per_s")))
        same = entry.get("agreement")
        same_output = "n/a" if same is None else "%.0f%%" % (100 * same)
    return [
        NAMES[system],
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


def _infer_section(config, results):
    infer = results.get(INFER, {})
    rows = [
        _infer_row(infer, runtime, system)
        for runtime, systems in ((TF, TF_SYSTEMS), (CT2, CT2_SYSTEMS))
        for system in systems
    ]
    rows = [row for row in rows if row is not None]
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
        "tensors built before timing), domain `%s` for the Mixed, DC and LDR SavedModels, the 3"
        " domains in turn within every batch for the Factorized ones (each sentence selects its"
        " copy); every output forced to L = %d tokens (minimum = maximum decoding length), "
        "target tokens counted from the outputs; median of %d pass(es) over all batches after 1"
        " warm-up batch, outputs converted to token lists. TF SavedModel: `tf.saved_model.load`"
        " + `signatures['serving_default']`, %d intra-op threads. CTranslate2 in its throughput"
        " setting: `Translator(device='cpu', inter_threads=%d, intra_threads=1)`, all sentences"
        " per call with `max_batch_size` = the batch size, so batches run in parallel, "
        "`translate_batch(beam_size=%d, min/max_decoding_length=L)`, %s; DC and LDR folded for "
        "`%s`, vanilla converted by the OpenNMT-tf converter."
        % (
            config["beam"],
            config["sentences"],
            config["length"],
            batches,
            config["infer_batch"],
            INFER_DOMAIN,
            config["decode_length"],
            config["passes"],
            config["threads"],
            config["threads"],
            config["beam"],
            quantization,
            INFER_DOMAIN,
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
    """Whether the system of a target's ``(table, row)`` was measured in this run."""
    table, row = where
    return row in results.get(table, {})


def _targets_section(results, config=None):
    # Only the targets of the systems this run measured (--families).
    targets = TARGETS + (mixing_targets(config) if config else [])
    rows = [
        [description, format_ratio(value), "%s %.2fx" % (SYMBOLS[comparison], threshold), status]
        for (description, value, comparison, threshold, status), target in zip(
            check_targets(results, config), targets
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
      machine: The machine description (see :func:`machine_description`).
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


# The synthetic data.


def write_labels(path, sentences, domains, block):
    """Writes a label file: :obj:`domains` in turn by blocks of :obj:`block` lines."""
    with open(path, "w") as f:
        for i in range(sentences):
            f.write(domains[(i // block) % len(domains)] + "\n")


def write_data(directory, vocab_size, sentences, length, seed, block=1):
    """Writes random source/target/domain files and the shared vocabulary.

    The domains come in blocks of :obj:`block` sentences (a training batch), in turn:
    each training batch has one domain, as ``ldr-main``'s sampling gives.

    Returns:
      A dict of paths: ``src``, ``tgt``, ``dom``, ``vocab`` and ``ttm_vocab`` (the
      vocabulary with TTM's domain tokens).
    """
    from ldr_opennmt.models import ttm

    rng = random.Random(seed)
    words = ["w%d" % i for i in range(vocab_size)]
    paths = {k: os.path.join(directory, k) for k in ("src", "tgt", "dom", "vocab")}
    with open(paths["src"], "w") as src, open(paths["tgt"], "w") as tgt, open(
        paths["dom"], "w"
    ) as dom:
        for i in range(sentences):
            src.write(" ".join(rng.choices(words, k=length)) + "\n")
            tgt.write(" ".join(rng.choices(words, k=length)) + "\n")
            dom.write(DOMAINS[(i // block) % len(DOMAINS)] + "\n")
    with open(paths["vocab"], "w") as f:
        f.write("\n".join(["<blank>", "<s>", "</s>"] + words) + "\n")
    paths["ttm_vocab"] = os.path.join(directory, "ttm_vocab")
    with open(paths["ttm_vocab"], "w") as f:
        f.write("\n".join(["<blank>", "<s>", "</s>"] + words + ttm.domain_tokens(DOMAINS)) + "\n")
    return paths


def _inference_batches(config):
    """The inference sentences (token lists) in batches."""
    with open(config["paths"]["src"]) as f:
        sentences = [line.split() for _, line in zip(range(config["sentences"]), f)]
    size = config["infer_batch"]
    return [sentences[i : i + size] for i in range(0, len(sentences), size)]


# The measurements (each in its own process).


def _build_model(system, config):
    import opennmt

    from ldr_opennmt import models

    size = config["size"]
    if system == VANILLA:
        return opennmt.models.Transformer(**size)
    if system == "mixed":
        return models.mixed_transformer(**size)
    if system == "dc":
        return models.dc_transformer(**size)
    if system.startswith("ldr"):
        return models.ldr_transformer(**size)
    if system.startswith("mix_k"):
        return models.mixing_transformer(**size)
    if system == "adapters":  # Inner size 4x the model size, as 2048 for 512 units.
        return models.residual_adapter_transformer(adapter_dim=4 * size["num_units"], **size)
    if system in ("ttm", "ml", "advl"):
        return getattr(models, "%s_transformer" % system)(**size)
    if system.startswith("fact_"):
        design = system[len("fact_") :]
        if design == "df":
            d_inner = max(1, round(size["num_units"] * DF_INNER_RATIO))
            return models.factorized_transformer(design, d_inner=d_inner, **size)
        return models.factorized_transformer(design, **size)
    raise ValueError("unknown system %r" % system)


def system_domains(system):
    """The declared domains of a system (``None`` for vanilla)."""
    if system == VANILLA:
        return None
    if system.startswith("mix_k"):
        return ["d%d" % i for i in range(int(system[len("mix_k") :]))]
    return DOMAINS


def _label_file(system, config):
    """The training label file of a system: its domains by blocks of one batch."""
    domains = system_domains(system)
    if domains == DOMAINS:
        return config["paths"]["dom"]
    path = os.path.join(config["workdir"], "data", "dom_%d" % len(domains))
    if not os.path.exists(path):
        write_labels(path, config["data_sentences"], domains, config["batch"])
    return path


def _data_config(system, config):
    paths = config["paths"]
    data = {"source_vocabulary": paths["vocab"], "target_vocabulary": paths["vocab"]}
    if system == "ttm":  # The vocabulary with the domain tokens.
        data["target_vocabulary"] = paths["ttm_vocab"]
    if system != VANILLA:
        data["domains"] = system_domains(system)
    return data


def _measure_training(config, system):
    """Median step time of OpenNMT-tf's training step on cached batches."""
    import opennmt
    import tensorflow as tf

    import ldr_opennmt.models  # noqa: F401 (imports counted before the model)
    from ldr_opennmt import compat

    import_rss = peak_rss_mib()
    tf.random.set_seed(config["seed"])
    paths = config["paths"]
    model = _build_model(system, config)
    params = {"optimizer": "Adam", "learning_rate": 1e-4}
    if system in DOMAIN_TRAINING:
        params["domain_training"] = DOMAIN_TRAINING[system]
    model.initialize(_data_config(system, config), params=params)
    optimizer = model.get_optimizer()
    features_file = (
        paths["src"] if system == VANILLA else [paths["src"], _label_file(system, config)]
    )
    dataset = model.examples_inputter.make_training_dataset(
        features_file,
        paths["tgt"],
        batch_size=config["batch"],
        batch_type="examples",
        shuffle_buffer_size=1,
        length_bucket_width=None,
    )
    # The same 16 batches for every system, held in memory: the step time measures
    # the model, not the text pipeline.
    dataset = dataset.take(16).cache().repeat()
    tokens = [
        int(tf.reduce_sum(features["length"]) + tf.reduce_sum(labels["length"]))
        for features, labels in dataset.take(16)
    ]
    if getattr(model, "requires_base", False):
        optimizer.iterations.assign(1)  # As after restoring a trained base (adapters).
    trainer = opennmt.training.Trainer(model, optimizer)
    times = []
    start = time.perf_counter()
    for i, loss in enumerate(compat.training_steps(trainer, dataset, accum_steps=1)):
        now = time.perf_counter()
        if i >= config["warmup"]:
            times.append(now - start)
        start = now
        if len(times) == config["steps"]:
            break
    step = statistics.median(times)
    tokens_per_step = statistics.mean(tokens)
    return {
        "params": model.count_params(),
        "ms_per_step": 1000 * step,
        "tokens_per_step": tokens_per_step,
        "tokens_per_s": tokens_per_step / step,
        "steps": len(times),
        "last_loss": loss,
        "import_rss_mib": import_rss,
    }


def _model_dirs(config, system):
    root = config["workdir"]
    system = ENSEMBLE_BASE.get(system, system)
    return (
        os.path.join(root, "savedmodel", system),
        os.path.join(root, "ct2", system),
    )


def _ct2_model_dir(config, system):
    _, ct2_dir = _model_dirs(config, system)
    return ct2_dir if system == VANILLA else os.path.join(ct2_dir, INFER_DOMAIN)


def _prepare_inference(config):
    """Builds each inference system once and exports its SavedModel and CTranslate2 model."""
    import tensorflow as tf

    from ldr_opennmt.serving import ct2_export

    exported = {}
    tf_systems = selected(TF_SYSTEMS, config["families"])
    # An ensemble reads its base system's SavedModel.
    tf_systems = [s for s in tf_systems if s not in ENSEMBLE_BASE] + [
        ENSEMBLE_BASE[s]
        for s in tf_systems
        if s in ENSEMBLE_BASE and ENSEMBLE_BASE[s] not in tf_systems
    ]
    ct2_systems = selected(CT2_SYSTEMS, config["families"])
    for system in tf_systems + [s for s in ct2_systems if s not in tf_systems]:
        tf.random.set_seed(config["seed"])
        model = _build_model(system, config)
        params = {
            "beam_width": config["beam"],
            "maximum_decoding_length": config["decode_length"],
            "minimum_decoding_length": config["decode_length"],
        }
        model.initialize(_data_config(system, config), params=params)
        model.create_variables()
        savedmodel_dir, ct2_dir = _model_dirs(config, system)
        if system in tf_systems:
            model.export(savedmodel_dir)
        if system == VANILLA:
            ct2_export.convert(model, ct2_dir, quantization=config["quantization"])
        elif system in ct2_systems:
            ct2_export.export(
                model, ct2_dir, domains=[INFER_DOMAIN], quantization=config["quantization"]
            )
        exported[system] = {"params": model.count_params()}
    return exported


def _time_inference(config, translate, batches):
    """Times passes over the batches after one warm-up batch.

    Returns:
      (median seconds per pass, the outputs of the last pass).
    """
    translate(batches[0])
    times = []
    for _ in range(config["passes"]):
        outputs = []
        start = time.perf_counter()
        for batch in batches:
            outputs.extend(translate(batch))
        times.append(time.perf_counter() - start)
    return statistics.median(times), outputs


def _inference_result(seconds, outputs, model_dir, import_rss):
    tokens = sum(len(output) for output in outputs)
    return {
        "sentences_per_s": len(outputs) / seconds,
        "ms_per_sentence": 1000 * seconds / len(outputs),
        "tokens_per_s": tokens / seconds,
        "tokens_per_sentence": tokens / len(outputs),
        "sentences": len(outputs),
        "model_mib": directory_size_mib(model_dir),
        "import_rss_mib": import_rss,
        "outputs": outputs,
    }


def _measure_savedmodel(config, system):
    """Sentences/s of a SavedModel's ``serving_default`` signature (beam search)."""
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(config["threads"])
    import_rss = peak_rss_mib()
    model_dir, _ = _model_dirs(config, system)
    imported = tf.saved_model.load(model_dir)
    signature = imported.signatures["serving_default"]
    inputs = signature.structured_input_signature[1]
    feeds = []
    for batch in _inference_batches(config):
        length = max(len(tokens) for tokens in batch)
        feed = {
            # "<blank>" is OpenNMT-tf's padding token (opennmt.constants.PADDING_TOKEN).
            "tokens": tf.constant([t + ["<blank>"] * (length - len(t)) for t in batch]),
            "length": tf.constant([len(t) for t in batch], tf.int32),
        }
        if "domain" in inputs:
            if system in ENSEMBLE_BASE:
                labels = ["ens-uniform"] * len(batch)
            elif system in MIXED_DOMAIN_FEED:
                labels = [DOMAINS[i % len(DOMAINS)] for i in range(len(batch))]
            else:
                labels = [INFER_DOMAIN] * len(batch)
            feed["domain"] = tf.constant(labels)
        feeds.append(feed)

    def _translate(feed):
        outputs = signature(**feed)
        tokens = outputs["tokens"].numpy()[:, 0]
        lengths = outputs["length"].numpy()[:, 0]
        return [[t.decode("utf-8") for t in row[:n]] for row, n in zip(tokens, lengths)]

    seconds, outputs = _time_inference(config, _translate, feeds)
    return _inference_result(seconds, outputs, model_dir, import_rss)


def _measure_ctranslate2(config, system):
    """Sentences/s of a CTranslate2 model (beam search), without TensorFlow."""
    import ctranslate2

    import_rss = peak_rss_mib()
    model_dir = _ct2_model_dir(config, system)
    # CTranslate2's throughput setting: one batch per thread, batches in parallel.
    # Measured on the 2-vCPU AMD machine of BENCHMARKS.md: intra_threads=2 made one
    # sentence 6x slower than intra_threads=1 (66.5 vs 10.6 ms), and gave nothing at
    # batch 32 (118 vs 113 sentences/s), while inter_threads=2 doubled throughput.
    translator = ctranslate2.Translator(
        model_dir, device="cpu", inter_threads=config["threads"], intra_threads=1
    )
    length = config["decode_length"]

    def _translate(sentences):
        results = translator.translate_batch(
            sentences,
            max_batch_size=config["infer_batch"],
            beam_size=config["beam"],
            max_decoding_length=length,
            min_decoding_length=length,
        )
        return [result.hypotheses[0] for result in results]

    batches = _inference_batches(config)
    # One call per pass with every sentence (CTranslate2 splits them into batches of
    # max_batch_size); _time_inference's warm-up is then a whole pass.
    everything = [tokens for batch in batches for tokens in batch]
    seconds, outputs = _time_inference(config, _translate, [everything])
    result = _inference_result(seconds, outputs, model_dir, import_rss)
    if "tensorflow" in sys.modules:
        result["warning"] = "TensorFlow was imported in the CTranslate2 process"
    return result


def run_task(task, workdir):
    """Runs one measurement (in a process of its own) and writes its result file.

    Args:
      task: ``prepare``, ``train:<system>``, ``tf:<system>`` or ``ct2:<system>``.
      workdir: The run directory (``config.json`` is read from it).
    """
    with open(os.path.join(workdir, "config.json")) as f:
        config = json.load(f)
    kind, _, system = task.partition(":")
    if kind == "prepare":
        result = _prepare_inference(config)
    elif kind == TRAIN:
        result = _measure_training(config, system)
    elif kind == TF:
        result = _measure_savedmodel(config, system)
    elif kind == CT2:
        result = _measure_ctranslate2(config, system)
    else:
        raise ValueError("unknown task %r" % task)
    result["peak_rss_mib"] = peak_rss_mib()
    with open(_result_path(workdir, task), "w") as f:
        json.dump(result, f)


def _result_path(workdir, task):
    return os.path.join(workdir, "results", task.replace(":", "-") + ".json")


# The driver.


def _log(message):
    sys.stderr.write("[bench] %s\n" % message)
    sys.stderr.flush()


def _run_process(task, workdir, number, total):
    """Runs :func:`run_task` in a new process and returns its result (or an error)."""
    log_path = os.path.join(workdir, "logs", task.replace(":", "-") + ".log")
    command = [sys.executable, "-c", _BOOT, os.path.abspath(__file__)]
    command += ["--one", task, "--workdir", workdir]
    env = dict(os.environ)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    env.setdefault("PYTHONWARNINGS", "ignore")
    _log("%d/%d %s ..." % (number, total, task))
    start = time.perf_counter()
    with open(log_path, "w") as log:
        status = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, env=env).returncode
    elapsed = time.perf_counter() - start
    if status != 0:
        lines = [line for line in _read(log_path).splitlines() if line.strip()]
        error = lines[-1] if lines else "exit status %d" % status
        _log(
            "%s failed after %.1f s (exit status %d), last lines of %s:"
            % (task, elapsed, status, log_path)
        )
        for line in lines[-15:]:
            sys.stderr.write("    %s\n" % line)
        return {"error": error.replace("|", "/")}
    with open(_result_path(workdir, task)) as f:
        result = json.load(f)
    _log("%s done in %.1f s (peak RSS %.0f MiB)" % (task, elapsed, result["peak_rss_mib"]))
    if result.get("warning"):
        _log("warning: %s" % result["warning"])
    return result


def make_config(args, workdir):
    """The JSON-serializable configuration shared with the measurement processes."""
    keys = list(DEFAULTS) + ["threads", "quantization", "seed", "quick"]
    config = {key: getattr(args, key) for key in keys}
    config["parts"] = list(args.parts)
    config["families"] = list(getattr(args, "families", None) or FAMILIES)
    config["workdir"] = workdir
    config["size"] = dict(
        num_layers=args.layers,
        num_units=args.units,
        num_heads=args.heads,
        ffn_inner_dim=4 * args.units,
    )
    return config


def selected(systems, families):
    """The systems of :obj:`families` (names of :data:`FAMILIES`), vanilla always first."""
    chosen = {system for family in families for system in FAMILIES[family]}
    return [system for system in systems if system == VANILLA or system in chosen]


def _tasks(parts, families):
    tasks = []
    if TRAIN in parts:
        tasks += ["%s:%s" % (TRAIN, system) for system in selected(TRAIN_SYSTEMS, families)]
    if INFER in parts:
        tasks.append("prepare")
        tasks += ["%s:%s" % (TF, system) for system in selected(TF_SYSTEMS, families)]
        tasks += ["%s:%s" % (CT2, system) for system in selected(CT2_SYSTEMS, families)]
    return tasks


def make_workdir(path):
    """Creates the ``--workdir`` given by the user, or checks it is an empty directory.

    Checked again here, right before use (``parse_args`` checks it too): the run writes
    its data, models and logs there and must not overwrite anything it did not create.
    A symbolic link given as the directory is resolved once, with a message. The
    directory is never removed (only the temporary one made without ``--workdir`` is).

    Returns:
      The absolute path of the directory (of its target, for a link).

    Raises:
      SystemExit: with a one-line message, if the path is not a directory or not empty.
    """
    path = os.path.abspath(path)
    if os.path.islink(path):
        target = os.path.realpath(path)
        _log("--workdir %s is a symbolic link: writing into %s" % (path, target))
        path = target
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        os.mkdir(path)
        return path
    except FileExistsError:
        pass
    except OSError as e:
        raise SystemExit("run/bench.sh: error: --workdir %s: %s" % (path, e.strerror or e))
    if not os.path.isdir(path):
        raise SystemExit("run/bench.sh: error: --workdir %s is not a directory" % path)
    if os.listdir(path):
        raise SystemExit("run/bench.sh: error: --workdir %s is not empty" % path)
    return path


def run_benchmarks(args, workdir):
    """Runs every measurement in turn; returns (config, results, any failure)."""
    for name in ("data", "results", "logs"):
        os.makedirs(os.path.join(workdir, name), exist_ok=True)
    config = make_config(args, workdir)
    sentences = max(3000, config["sentences"], 16 * config["batch"])
    config["data_sentences"] = sentences
    config["paths"] = write_data(
        os.path.join(workdir, "data"),
        args.vocab,
        sentences,
        args.length,
        args.seed,
        block=config["batch"],
    )
    with open(os.path.join(workdir, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    results = {TRAIN: {}, INFER: {}}
    tasks = _tasks(args.parts, args.families)
    failed = False
    prepared = True
    for number, task in enumerate(tasks, start=1):
        kind, _, system = task.partition(":")
        if kind in (TF, CT2) and not prepared:
            results[INFER][task] = {"error": "the export failed"}
            continue
        result = _run_process(task, workdir, number, len(tasks))
        failed = failed or "error" in result
        if kind == "prepare":
            prepared = "error" not in result
        elif kind == TRAIN:
            results[TRAIN][system] = result
        else:
            results[INFER][task] = result
    for system in CT2_SYSTEMS:
        entry = results[INFER].get("%s:%s" % (CT2, system))
        reference = results[INFER].get("%s:%s" % (TF, system))
        if entry and "error" not in entry:
            entry["agreement"] = agreement(entry.get("outputs"), (reference or {}).get("outputs"))
    return config, results, failed


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        prog="run/bench.sh",
        description="Training and CPU inference speed and peak memory of vanilla OpenNMT-tf, "
        "Mixed, DC and LDR, side by side (markdown on standard output).",
    )
    parser.add_argument(
        "--quick", action="store_true", help="Tiny sizes (a 1-2 minute check, not figures)."
    )
    parser.add_argument("--out", help="Also write the markdown report to this file.")
    parser.add_argument(
        "--parts", nargs="+", choices=PARTS, default=list(PARTS), help="What to measure."
    )
    parser.add_argument(
        "--families",
        nargs="+",
        choices=list(FAMILIES),
        default=list(FAMILIES),
        help="The systems to measure besides vanilla (default: all): "
        + "; ".join("%s: %s" % (k, ", ".join(v)) for k, v in FAMILIES.items())
        + ".",
    )
    sizes = parser.add_argument_group(
        "sizes", "Unset options take the default (or --quick) values shown."
    )
    for key, help_text in (
        ("layers", "Encoder and decoder layers."),
        ("units", "Model units (FFN: 4x)."),
        ("heads", "Attention heads."),
        ("vocab", "Words in the synthetic (shared) vocabulary."),
        ("length", "Tokens in every synthetic source and target sentence."),
        ("batch", "Training batch size in sentences."),
        ("steps", "Timed training steps per system."),
        ("warmup", "Training steps before timing."),
        ("sentences", "Inference sentences."),
        ("infer_batch", "Inference batch size in sentences."),
        ("decode_length", "L: the length of every translation (min = max decoding length)."),
        ("beam", "Beam size."),
        ("passes", "Timed inference passes over all sentences (the median is reported)."),
    ):
        sizes.add_argument(
            "--" + key,
            type=int,
            help="%s Default: %d (--quick: %d)." % (help_text, DEFAULTS[key], QUICK[key]),
        )
    parser.add_argument(
        "--threads",
        type=int,
        default=len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        help="CPU threads for inference (TF intra-op, CTranslate2 intra_threads). "
        "Default: the usable CPUs.",
    )
    parser.add_argument(
        "--quantization",
        help="CTranslate2 weight type of the converted models (e.g. int8); default: "
        "float32 like the TF models.",
    )
    parser.add_argument("--seed", type=int, default=1, help="Data and weights seed.")
    parser.add_argument(
        "--workdir",
        help="Keep the data, exported models, logs and raw results in this new or empty "
        "directory (default: a temporary directory, removed at the end).",
    )
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        if not args.workdir:
            parser.error("--one needs --workdir")
        return args
    resolve_sizes(args)
    if args.threads is None:
        args.threads = os.cpu_count() or 1
    for key in list(DEFAULTS) + ["threads"]:
        minimum = 0 if key == "warmup" else 1
        if getattr(args, key) < minimum:
            parser.error("--%s must be >= %d" % (key, minimum))
    if args.quantization:
        from ctranslate2.specs.model_spec import ACCEPTED_MODEL_TYPES

        if args.quantization not in ACCEPTED_MODEL_TYPES:
            parser.error(
                "--quantization: %r is not a CTranslate2 weight type (%s)"
                % (args.quantization, ", ".join(ACCEPTED_MODEL_TYPES))
            )
    if args.workdir and os.path.lexists(args.workdir):
        if not os.path.isdir(args.workdir):
            parser.error("--workdir %s is not a directory" % args.workdir)
        if os.listdir(args.workdir):
            parser.error("--workdir %s is not empty" % args.workdir)
    return args


def main(argv=None):
    """The ``run/bench.sh`` entry point; returns the exit status (1 if a measurement failed)."""
    args = parse_args(argv)
    if args.one:
        run_task(args.one, os.path.abspath(args.workdir))
        return 0
    start = time.perf_counter()
    machine = machine_description()
    if args.workdir:
        workdir = make_workdir(args.workdir)
        config, results, failed = run_benchmarks(args, workdir)
    else:
        # Made here, exclusively: the only directory this script ever removes.
        workdir = tempfile.mkdtemp(prefix="ldr-bench-")
        try:
            config, results, failed = run_benchmarks(args, workdir)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
    report = format_report(config, results, machine, elapsed=time.perf_counter() - start)
    sys.stdout.write(report)
    sys.stdout.flush()
    if args.out:
        write_atomically(args.out, report)
        _log("report written to %s" % args.out)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
