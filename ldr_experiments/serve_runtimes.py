"""The serving runtime without TensorFlow (``.venv-serve``: Python 3.12+, CTranslate2 4) against
the training environment's (``.venv``: Python 3.11, TensorFlow 2.13, CTranslate2 3.24), on one
``ldr-export ctranslate2`` directory.

::

    ldr-experiments serve-runtimes --model_dir export/ct2 --sentences test.medical.en \\
        --serve_bin .venv-serve/bin [--train_bin .venv/bin] [--seconds 10] [--out figures.md] \\
        [--benchmarks BENCHMARKS.md]

For each environment:

* ``ldr-serve`` from its ``bin``: seconds from start to the first ``/health`` answer, memory
  (VmRSS) when it answers and after one request per domain (VmHWM: the peak), then 1, 8 and
  32 concurrent clients (one sentence per request, ``--seconds`` each): sentences per second,
  p50 and p99 latency (``ldr_experiments/serve_bench.py``'s clients);
* CTranslate2 offline in that environment's Python (``ldr_opennmt.serving.ct2_models``, the
  server's model class): the sentences in batches of 32 with ``compute_type`` float32 and
  int8 (the weights are converted at load), sentences per second (best of 3) and one batch's
  median time (best of two runs).

Both servers run at once (idle but for the one measured), and each measurement is taken for
one environment then the other, in alternating order: drift on a shared machine falls on
both.

``bash run/serve_bench.sh`` runs it after its own parts (``--runtimes``). Run nothing else
meanwhile: both environments share the machine's cores, one at a time.
"""

import argparse
import datetime
import json
import os
import subprocess
import sys

from ldr_experiments import machine, serve_bench, serve_bench_report
from ldr_experiments.standalone import markdown_table

#: Issue 44's targets with 32 clients: the share of offline throughput, and p99 latency in
#: offline batch times.
THROUGHPUT_TARGET = 0.85
LATENCY_TARGET = 2.0
SECTION = "## Serving runtimes: `.venv-serve` (no TensorFlow, CTranslate2 4) against `.venv`"
SECTION_INTRO = (
    "`ldr-serve` and CTranslate2 in the serving runtime of `source run/setup_serve.sh` "
    "(Python 3.12, CTranslate2 4, no TensorFlow) against the training environment (Python "
    "3.11, TensorFlow 2.13, CTranslate2 3.24), on the same export and machine. Measured by "
    "`bash run/serve_bench.sh` (script `ldr_experiments/serve_runtimes.py`)."
)

#: Run in each environment's Python: offline CTranslate2 figures, as JSON.
OFFLINE = """
import json, statistics, sys, time
import ctranslate2
from ldr_opennmt.serving import ct2_models
model_dir, domain, path, compute_type, batch_size, max_length = sys.argv[1:7]
batch_size, max_length = int(batch_size), int(max_length)
with open(path, encoding="utf-8") as f:
    sentences = [line.strip() for line in f if line.strip()][: int(sys.argv[7])]
model = ct2_models.DomainModel(domain, model_dir + "/" + domain, intra_threads=1,
                               compute_type=compute_type)
tokens = [model.tokenize(s) for s in sentences]
def run(batch):
    return model.translator.translate_batch(batch, max_batch_size=batch_size, beam_size=1,
                                            max_decoding_length=max_length, max_input_length=0)
run(tokens)
times = []
for _ in range(3):
    start = time.perf_counter(); run(tokens); times.append(time.perf_counter() - start)
batches = []
for first in range(0, len(tokens) - batch_size + 1, batch_size):
    start = time.perf_counter(); run(tokens[first:first + batch_size])
    batches.append(time.perf_counter() - start)
print(json.dumps({"ctranslate2": ctranslate2.__version__,
                  "python": "%d.%d" % sys.version_info[:2],
                  "compute_type": model.translator.compute_type,
                  "sentences_per_s": len(tokens) / min(times),
                  "batch_ms": 1000 * statistics.median(batches)}))
"""


def offline(python, args, compute_type):
    """The offline figures of one environment's CTranslate2 (:data:`OFFLINE`)."""
    result = subprocess.run(
        [python, "-c", OFFLINE, args.model_dir, args.domain, args.sentences, compute_type]
        + [str(args.max_batch_size), str(args.max_decoding_length), str(args.limit)],
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode:
        raise SystemExit("serve_runtimes: offline run failed:\n" + result.stderr)
    return json.loads(result.stdout.strip().splitlines()[-1])


def start(bin_dir, args, domains, sentences):
    """``BIN_DIR/ldr-serve`` started, with its startup time and memory figures."""
    options = ["--max_batch_size", str(args.max_batch_size)]
    options += ["--max_decoding_length", str(args.max_decoding_length), "--intra_threads", "1"]
    server = serve_bench.Server.start(
        args.model_dir, options, executable=os.path.join(bin_dir, "ldr-serve")
    )
    figures = {"startup_s": server.startup_s, "rss_start": server.memory()[0], "load": []}
    for domain in domains:
        server.translate(sentences[:4], domain)
    figures["rss_after"], figures["hwm_after"] = server.memory()
    return server, figures


def measure(environments, args, sentences, domains):
    """Both servers running; each load point and each offline setting measured for one
    environment then the other, in alternating order (a busy machine's drift falls on both)."""
    servers = {}
    names = list(environments)
    try:
        for name in names:
            servers[name], environments[name]["serve"] = start(
                environments[name]["bin"], args, domains, sentences
            )
        for i, clients in enumerate(args.clients):
            for name in names if i % 2 == 0 else names[::-1]:
                environments[name]["serve"]["load"].append(
                    serve_bench.run_clients(
                        servers[name], clients, args.seconds, sentences, args.domain
                    )
                )
    finally:
        for server in servers.values():
            server.stop()
    for name in names:
        environments[name]["offline"] = []
    for i, kind in enumerate(("float32", "int8")):
        for name in names if i % 2 == 0 else names[::-1]:
            python = os.path.join(environments[name]["bin"], "python")
            runs = [offline(python, args, kind) for _ in range(2)]
            environments[name]["offline"].append(max(runs, key=lambda r: r["sentences_per_s"]))


def report(args, date, environments, sentences, load):
    """The Markdown report of one run (:obj:`load`: the load average at its start)."""
    lines = [
        serve_bench_report.RUN_HEADING + machine.utc_text(date),
        "",
        "- machine: %s; load average at start: %s" % (machine.description(), load),
        "- command: `%s`" % (args.invoked_as or "ldr-experiments serve-runtimes"),
        "- model: `%s`; %d sentences of `%s`, domain %s; greedy, max_decoding_length %d, "
        "batches of %d, intra_threads 1"
        % (
            args.model_dir,
            len(sentences),
            args.sentences,
            args.domain,
            args.max_decoding_length,
            args.max_batch_size,
        ),
        "",
    ]
    rows = []
    for name, env in environments.items():
        serve = env["serve"]
        rows.append(
            [
                name,
                "%.1f" % serve["startup_s"],
                "%.0f" % serve["rss_start"],
                "%.0f / %.0f" % (serve["rss_after"], serve["hwm_after"]),
            ]
        )
    lines += markdown_table(
        [
            "`ldr-serve` of",
            "startup (s)",
            "RSS at start (MiB)",
            "RSS / peak after a request per domain (MiB)",
        ],
        rows,
    ).splitlines()
    lines.append("")
    rows = []
    for name, env in environments.items():
        # The server's float32 model against the same model offline, in the same environment.
        offline = env["offline"][0]
        for point in env["serve"]["load"]:
            share = point["sentences_per_s"] / offline["sentences_per_s"]
            batches = point["p99_ms"] / offline["batch_ms"]
            verdict = ""
            if point["clients"] == 32:
                verdict = (
                    "PASS" if share >= THROUGHPUT_TARGET and batches <= LATENCY_TARGET else "MISS"
                )
            rows.append(
                [
                    name,
                    point["clients"],
                    "%.1f" % point["sentences_per_s"],
                    "%.0f%%" % (100 * share),
                    "%.0f" % point["p50_ms"],
                    "%.0f" % point["p99_ms"],
                    "%.1f" % batches,
                    point["errors"],
                    verdict,
                ]
            )
    lines += markdown_table(
        [
            "`ldr-serve` of",
            "clients",
            "sentences/s",
            "of offline float32",
            "p50 (ms)",
            "p99 (ms)",
            "p99 / offline batch",
            "errors",
            "targets (32 clients)",
        ],
        rows,
    ).splitlines()
    lines.append("")
    rows = []
    for name, env in environments.items():
        for figures in env["offline"]:
            rows.append(
                [
                    name,
                    "CTranslate2 %s (Python %s)" % (figures["ctranslate2"], figures["python"]),
                    figures["compute_type"],
                    "%.1f" % figures["sentences_per_s"],
                    "%.0f" % figures["batch_ms"],
                ]
            )
    lines += markdown_table(
        ["environment", "engine", "compute type", "offline sentences/s", "batch of 32 (ms)"], rows
    ).splitlines()
    return "\n".join(lines) + "\n"


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model_dir", required=True, help="An ldr-export ctranslate2 directory.")
    parser.add_argument("--sentences", required=True, help="Raw source sentences, one a line.")
    parser.add_argument("--serve_bin", required=True, help="The bin folder of .venv-serve.")
    parser.add_argument("--train_bin", default=os.path.dirname(sys.executable))
    parser.add_argument("--limit", type=int, default=256, help="Sentences used (the first N).")
    parser.add_argument("--domain", default="medical")
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--seconds", type=float, default=10, help="Per number of clients.")
    parser.add_argument("--max_batch_size", type=int, default=32)
    parser.add_argument("--max_decoding_length", type=int, default=64)
    parser.add_argument("--out", help="Also write the report (Markdown) to this file.")
    parser.add_argument("--benchmarks", help="Also add the report to this file (BENCHMARKS.md).")
    parser.add_argument("--invoked_as", help="The command the report names.")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    date = datetime.datetime.now(datetime.timezone.utc)
    load = machine.load_average()
    with open(args.sentences, encoding="utf-8") as f:
        sentences = [line.strip() for line in f if line.strip()][: args.limit]
    with open(os.path.join(args.model_dir, "manifest.json"), encoding="utf-8") as f:
        domains = list(json.load(f)["domains"])
    environments = {
        "`.venv` (training)": {"bin": args.train_bin},
        "`.venv-serve`": {"bin": args.serve_bin},
    }
    measure(environments, args, sentences, domains)
    text = report(args, date, environments, sentences, load)
    print(text)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text)
    if args.benchmarks:
        serve_bench_report.update_benchmarks(
            args.benchmarks, text, section=SECTION, intro=SECTION_INTRO
        )
        print("serve_runtimes: run added to %s" % args.benchmarks, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
