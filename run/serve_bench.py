"""Throughput, latency, startup time and memory of ``ldr-serve``, against offline batches.

::

    python run/serve_bench.py --model_dir export/ct2 --sentences test.medical.en \\
        [--domain medical] [--clients 1 8 32] [--seconds 20] [--saved_model export/ldr] \\
        [--parts load startup lazy savedmodel] [--out figures.md] [-- SERVER OPTIONS]

Parts (all by default):

* ``load``: the sentences translated offline by CTranslate2 (the domain's model, in this
  process, ``translate_batch`` in batches of ``--max_batch_size``: sentences per second and
  the time of one batch), then ``ldr-serve`` on ``--model_dir`` under 1, 8 and 32
  concurrent clients, each sending one sentence per request (a keep-alive connection per
  client) for ``--seconds``: p50 and p99 latency and sentences per second. The issue's
  targets, printed PASS or MISS: with 32 clients at least 70% of the offline throughput,
  and p99 latency within 3 times one batch's time.
* ``startup``: seconds from starting ``ldr-serve`` to its first answer, and its memory
  (VmRSS; VmHWM: the peak) with every domain loaded.
* ``lazy``: the same with ``--lazy`` (nothing loaded at start; memory after one request to
  each domain), and with ``--max_loaded_models 1``: memory after every domain was used, and
  the latency of requests that alternate two domains (each loads its model again) against
  requests of one domain.
* ``savedmodel``: with ``--saved_model`` (the same model exported by ``ldr-main export``),
  the ``load`` part on the SavedModel: offline batches by ``ldr-translate``'s Translator,
  then ``ldr-serve --model_dir SAVED_MODEL``.

The decoding options are the same everywhere: greedy, ``--max_decoding_length``, one
decoding thread per batch (``--intra_threads``) and ``--inter_threads`` batches at once.
Client, server and offline runs share the machine's cores: run nothing else meanwhile (the
load average is printed with the figures). Standard library only, plus ctranslate2 (and
the package for ``savedmodel``).
"""

import argparse
import http.client
import itertools
import json
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import threading
import time

#: The issue's targets for 32 clients.
THROUGHPUT_TARGET = 0.7
LATENCY_TARGET = 3.0


def percentile(values, fraction):
    """The nearest-rank percentile of a non-empty list."""
    ordered = sorted(values)
    rank = max(1, int(round(fraction * len(ordered) + 0.5 - 1e-9)))
    return ordered[min(rank, len(ordered)) - 1]


def machine():
    """The CPU model, core count and load average, in one line."""
    model = platform.processor() or "unknown CPU"
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return "%s, %d cores, load average %s" % (model, os.cpu_count(), load_average())


def load_average():
    try:
        return "%.2f %.2f %.2f" % os.getloadavg()
    except OSError:
        return "unknown"


def memory_mib(pid):
    """``(VmRSS, VmHWM)`` of a process, in MiB."""
    values = {}
    with open("/proc/%d/status" % pid, encoding="utf-8") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                values[key] = int(value.split()[0]) / 1024.0
    return values.get("VmRSS"), values.get("VmHWM")


def _free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Server:
    """``ldr-serve`` in a subprocess; :attr:`startup_s`: seconds until it answered."""

    def __init__(self, model_dir, options):
        self.port = _free_port()
        executable = shutil.which("ldr-serve")
        command = [executable] if executable else [sys.executable, "-m", "ldr_opennmt.cli.serve"]
        command += ["--model_dir", model_dir, "--port", str(self.port), "--log_level", "warning"]
        start = time.perf_counter()
        self.process = subprocess.Popen(
            command + list(options), env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
        )
        deadline = time.monotonic() + 300
        while True:
            if self.process.poll() is not None:
                raise SystemExit(
                    "serve_bench: ldr-serve exited with status %d" % self.process.poll()
                )
            try:
                if self.request("GET", "/health")[0] == 200:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise SystemExit("serve_bench: ldr-serve did not answer within 300 s")
            time.sleep(0.05)
        self.startup_s = time.perf_counter() - start

    def request(self, method, path, body=None, connection=None):
        own = connection is None
        connection = connection or http.client.HTTPConnection("127.0.0.1", self.port, timeout=300)
        try:
            data = None if body is None else json.dumps(body).encode("utf-8")
            headers = {"Content-Type": "application/json"} if data else {}
            connection.request(method, path, body=data, headers=headers)
            response = connection.getresponse()
            return response.status, json.loads(response.read())
        finally:
            if own:
                connection.close()

    def translate(self, sentences, domain, connection=None):
        body = {"sentences": sentences}
        if domain:
            body["domain"] = domain
        status, answer = self.request("POST", "/translate", body, connection)
        if status != 200:
            raise RuntimeError("ldr-serve answered %d: %s" % (status, answer))
        return answer

    def memory(self):
        return memory_mib(self.process.pid)

    def stop(self):
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def run_clients(server, clients, seconds, sentences, domain):
    """:obj:`clients` threads sending one sentence per request for :obj:`seconds`.

    Returns:
      ``{"clients", "requests", "errors", "p50_ms", "p99_ms", "sentences_per_s"}``.
    """
    latencies, errors, lock = [], [], threading.Lock()
    counter = itertools.count()
    stop = [None]

    def _start():
        stop[0] = time.perf_counter() + seconds

    barrier = threading.Barrier(clients, action=_start)

    def _client():
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=300)
        # Warm-up: the connection and one request, not counted.
        server.translate([sentences[0]], domain, connection)
        barrier.wait()
        while time.perf_counter() < stop[0]:
            sentence = sentences[next(counter) % len(sentences)]
            start = time.perf_counter()
            try:
                server.translate([sentence], domain, connection)
            except (OSError, RuntimeError, http.client.HTTPException) as e:
                with lock:
                    errors.append(str(e))
                connection.close()
                connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=300)
                continue
            elapsed = time.perf_counter() - start
            with lock:
                latencies.append(elapsed)
        connection.close()

    threads = [threading.Thread(target=_client) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - (stop[0] - seconds)
    return {
        "clients": clients,
        "requests": len(latencies),
        "errors": len(errors),
        "p50_ms": 1000 * percentile(latencies, 0.5) if latencies else float("nan"),
        "p99_ms": 1000 * percentile(latencies, 0.99) if latencies else float("nan"),
        "sentences_per_s": len(latencies) / wall,
    }


def offline_ctranslate2(model_dir, domain, sentences, args):
    """The sentences translated by the domain's CTranslate2 model in batches, in this
    process (tokenized and detokenized as the server does).

    Returns:
      ``{"sentences_per_s", "batch_ms"}``: the best of 3 runs over every sentence, and the
      median time of one ``translate_batch`` call of ``--max_batch_size`` sentences.
    """
    import ctranslate2  # pylint: disable=import-outside-toplevel

    from ldr_opennmt.serving import ct2_models  # pylint: disable=import-outside-toplevel

    model = ct2_models.DomainModel(
        domain,
        os.path.join(model_dir, domain),
        inter_threads=args.inter_threads,
        intra_threads=args.intra_threads,
    )
    assert isinstance(model.translator, ctranslate2.Translator)

    def _all():
        tokens = [model.tokenize(s) for s in sentences]
        results = model.translator.translate_batch(
            tokens,
            max_batch_size=args.max_batch_size,
            beam_size=1,
            max_decoding_length=args.max_decoding_length,
            max_input_length=0,
        )
        return [model.detokenize(r.hypotheses[0]) for r in results]

    return _offline(
        _all,
        lambda batch: model.translate(
            [model.tokenize(s) for s in batch], max_decoding_length=args.max_decoding_length
        ),
        sentences,
        args.max_batch_size,
    )


def offline_saved_model(export_dir, domain, sentences, args):
    """The sentences translated by the SavedModel in batches (``ldr-translate``'s
    Translator), as :func:`offline_ctranslate2`."""
    from ldr_opennmt import assets  # pylint: disable=import-outside-toplevel
    from ldr_opennmt.serving import client  # pylint: disable=import-outside-toplevel

    translator = client.Translator(export_dir)
    source = assets.load_tokenizer(export_dir, "source")
    target = assets.load_tokenizer(export_dir, "target")

    def _batch(batch):
        tokens = [client._tokenize(source, s) for s in batch]
        return [client._detokenize(target, t) for t in translator(tokens, [domain] * len(batch))]

    def _all():
        return [
            t
            for start in range(0, len(sentences), args.max_batch_size)
            for t in _batch(sentences[start : start + args.max_batch_size])
        ]

    _batch(sentences[:2])  # Warm-up.
    return _offline(_all, _batch, sentences, args.max_batch_size)


def _offline(translate_all, translate_batch, sentences, batch_size):
    translate_all()  # Warm-up.
    times = []
    for _ in range(3):
        start = time.perf_counter()
        translate_all()
        times.append(time.perf_counter() - start)
    batch_times = []
    for start in range(0, len(sentences) - batch_size + 1, batch_size):
        began = time.perf_counter()
        translate_batch(sentences[start : start + batch_size])
        batch_times.append(time.perf_counter() - began)
    return {
        "sentences_per_s": len(sentences) / min(times),
        "batch_ms": 1000 * statistics.median(batch_times),
    }


def server_options(args, extra=()):
    return [
        "--max_batch_size", str(args.max_batch_size),
        "--max_decoding_length", str(args.max_decoding_length),
        "--inter_threads", str(args.inter_threads),
        "--intra_threads", str(args.intra_threads),
        *args.server_options,
        *extra,
    ]  # fmt: skip


def load_part(name, model_dir, offline, args, sentences, report):
    """Offline figures, then the server under each number of clients."""
    report.append("### %s\n" % name)
    report.append(
        "Offline, batches of %d: **%.1f sentences/s**, one batch %.1f ms (load: %s).\n"
        % (args.max_batch_size, offline["sentences_per_s"], offline["batch_ms"], load_average())
    )
    server = Server(model_dir, server_options(args))
    try:
        rows = []
        for clients in args.clients:
            rows.append(run_clients(server, clients, args.seconds, sentences, args.domain))
            rows[-1]["load"] = load_average()
            print("  %s: %s" % (name, json.dumps(rows[-1])), file=sys.stderr)
        batches = server.request("GET", "/health")[1]["queues"]
    finally:
        server.stop()
    report.append(
        "| clients | requests | errors | p50 ms | p99 ms | sentences/s | of offline | load |"
    )
    report.append("|---|---|---|---|---|---|---|---|")
    for row in rows:
        report.append(
            "| %d | %d | %d | %.1f | %.1f | %.1f | %.0f%% | %s |"
            % (
                row["clients"],
                row["requests"],
                row["errors"],
                row["p50_ms"],
                row["p99_ms"],
                row["sentences_per_s"],
                100 * row["sentences_per_s"] / offline["sentences_per_s"],
                row["load"],
            )
        )
    largest = max(stats["largest_batch"] for stats in batches.values())
    report.append("\nLargest batch the server decoded: %d sentences.\n" % largest)
    top = [row for row in rows if row["clients"] == max(args.clients)][0]
    ratio = top["sentences_per_s"] / offline["sentences_per_s"]
    latency = top["p99_ms"] / offline["batch_ms"]
    for label, value, target, ok in (
        (
            "throughput with %d clients" % top["clients"],
            "%.0f%% of offline" % (100 * ratio),
            ">= %.0f%%" % (100 * THROUGHPUT_TARGET),
            ratio >= THROUGHPUT_TARGET,
        ),
        (
            "p99 latency with %d clients" % top["clients"],
            "%.1fx one batch" % latency,
            "<= %.0fx" % LATENCY_TARGET,
            latency <= LATENCY_TARGET,
        ),
    ):
        line = "%s %s: %s (target %s)" % ("PASS" if ok else "MISS", label, value, target)
        print(line)
        report.append("* " + line)
    report.append("")


def startup_part(args, sentences, domains, report):
    """Startup time and memory: every model at start, on first use, at most one."""
    report.append("### Startup and memory\n")
    report.append("| server | startup s | RSS MiB after start | RSS MiB after a request per "
                  "domain | peak (VmHWM) MiB |")  # fmt: skip
    report.append("|---|---|---|---|---|")
    alternating = None
    for label, extra in (
        ("every domain loaded at start", ()),
        ("--lazy", ("--lazy",)),
        ("--max_loaded_models 1", ("--max_loaded_models", "1")),
    ):
        if ("lazy" if extra else "startup") not in args.parts:
            continue
        server = Server(args.model_dir, server_options(args, extra))
        try:
            started = server.memory()[0]
            for domain in domains:
                server.translate(sentences[:8], domain)
            rss, peak = server.memory()
            report.append(
                "| %s | %.1f | %.0f | %.0f | %.0f |" % (label, server.startup_s, started, rss, peak)
            )
            if extra == ("--max_loaded_models", "1"):
                alternating = _alternating(server, sentences, domains[:2])
        finally:
            server.stop()
    report.append("")
    if alternating:
        report.append(
            "With `--max_loaded_models 1`, requests of one sentence alternating %s and %s "
            "(each loads its model again): mean %.1f ms, against %.1f ms for requests of one "
            "domain.\n" % (domains[0], domains[1], alternating[0], alternating[1])
        )


def _alternating(server, sentences, domains, count=20):
    def _mean(labels):
        times = []
        for i, domain in enumerate(labels):
            start = time.perf_counter()
            server.translate([sentences[i % len(sentences)]], domain)
            times.append(time.perf_counter() - start)
        return 1000 * statistics.mean(times)

    return _mean([domains[i % 2] for i in range(count)]), _mean([domains[0]] * count)


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    server_extra = []
    if "--" in argv:
        server_extra = argv[argv.index("--") + 1 :]
        argv = argv[: argv.index("--")]
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model_dir", required=True, help="An ldr-export ctranslate2 directory.")
    parser.add_argument("--saved_model", help="The same model exported by ldr-main export.")
    parser.add_argument("--sentences", required=True, help="Raw source sentences, one a line.")
    parser.add_argument("--limit", type=int, default=512, help="Sentences used (the first N).")
    parser.add_argument("--domain", default="medical", help="The domain of every request.")
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--seconds", type=float, default=20, help="Per number of clients.")
    parser.add_argument("--max_batch_size", type=int, default=32)
    parser.add_argument("--max_decoding_length", type=int, default=64)
    parser.add_argument("--inter_threads", type=int, default=1)
    parser.add_argument("--intra_threads", type=int, default=1)
    parser.add_argument(
        "--parts",
        nargs="+",
        default=["load", "startup", "lazy", "savedmodel"],
        choices=["load", "startup", "lazy", "savedmodel"],
    )
    parser.add_argument("--out", help="Also write the report (Markdown) to this file.")
    args = parser.parse_args(argv)
    args.server_options = server_extra
    with open(args.sentences, encoding="utf-8") as f:
        sentences = [line.strip() for line in f if line.strip()][: args.limit]
    with open(os.path.join(args.model_dir, "manifest.json"), encoding="utf-8") as f:
        domains = list(json.load(f)["domains"])
    report = [
        "Machine: %s. Python %s. Command: `python run/serve_bench.py %s`. %d sentences of %s, "
        "domain %s; greedy, max_decoding_length %d, batches of %d, inter_threads %d, "
        "intra_threads %d.\n"
        % (
            machine(),
            platform.python_version(),
            " ".join(argv + (["--"] + server_extra if server_extra else [])),
            len(sentences),
            args.sentences,
            args.domain,
            args.max_decoding_length,
            args.max_batch_size,
            args.inter_threads,
            args.intra_threads,
        )
    ]
    if "load" in args.parts:
        offline = offline_ctranslate2(args.model_dir, args.domain, sentences, args)
        load_part("CTranslate2 (`%s`)" % args.model_dir, args.model_dir, offline, args,
                  sentences, report)  # fmt: skip
    if "startup" in args.parts or "lazy" in args.parts:
        startup_part(args, sentences, domains, report)
    if "savedmodel" in args.parts and args.saved_model:
        offline = offline_saved_model(args.saved_model, args.domain, sentences, args)
        load_part("SavedModel (`%s`)" % args.saved_model, args.saved_model, offline, args,
                  sentences, report)  # fmt: skip
    text = "\n".join(report) + "\n"
    print(text)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
