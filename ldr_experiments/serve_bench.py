"""Throughput, latency, startup time and memory of ``ldr-serve``, against offline batches.

::

    ldr-experiments serve-bench --model_dir export/ct2 --sentences test.medical.en \\
        [--domain medical] [--clients 1 8 32 128] [--seconds 10] [--saved_model export/ldr] \\
        [--connections keep-alive new] [--compute_types float32 int8] \\
        [--parts load startup lazy savedmodel] [--out figures.md] \\
        [--benchmarks BENCHMARKS.md] [-- SERVER OPTIONS]
    ldr-experiments serve-bench --url http://127.0.0.1:8000 --sentences test.medical.en \\
        [--model_dir export/ct2] [--sentences_per_request 4] ...   # a server already running

Parts (all by default):

* ``load``: for each of ``--compute_types`` (CTranslate2's ``compute_type``: float32, int8),
  the sentences translated offline by CTranslate2 (the domain's model, in this process,
  ``translate_batch`` in batches of ``--max_batch_size``: sentences per second and the time of
  one batch; and one sentence at a time: the median time of one), then ``ldr-serve`` on
  ``--model_dir`` with that compute type under 1, 8, 32 and 128 concurrent clients, each
  sending one sentence per request (``--sentences_per_request``) for ``--seconds``, on one
  kept-alive connection (``keep-alive``) and on a new connection per request (``new``): p50
  and p99 latency and sentences per second, and the server's memory after the load. The
  targets (issue 58), printed PASS or MISS: with 32 clients on kept-alive connections, at
  least 85% of the offline throughput and p99 latency within 2 times one batch's time; one
  client's p50 latency within 1.5 times one sentence's offline time plus 2 ms, for each kind
  of connection.
* ``startup``: seconds from starting ``ldr-serve`` to its first answer, and its memory
  (VmRSS; VmHWM: the peak) with every domain loaded.
* ``lazy``: the same with ``--lazy`` (nothing loaded at start; memory after one request to
  each domain), and with ``--max_loaded_models 1``: memory after every domain was used, and
  the latency of requests that alternate two domains (each loads its model again) against
  requests of one domain.
* ``savedmodel``: with ``--saved_model`` (the same model exported by ``ldr-main export``),
  the ``load`` part on the SavedModel: offline batches by ``ldr-translate``'s Translator,
  then ``ldr-serve --model_dir SAVED_MODEL``.

With ``--url``, the ``load`` part only, on a server already running (started with its own
options): the offline figures and the targets need ``--model_dir`` (the model it serves).

The decoding options are the same everywhere: greedy, ``--max_decoding_length``, one
decoding thread per batch (``--intra_threads``) and ``--inter_threads`` batches at once. The
servers it starts take twice the most clients in requests at once and in waiting connections
per client address (``--limit_concurrency``, ``--max_waiting_per_client``, at least their
default 64, unless given after ``--``). Client, server and offline runs share the
machine's cores (the clients are Python threads: with 128 of them on 2 cores, the clients'
own time is part of the figures): run nothing else meanwhile (the load average is printed
with the figures).

The report (printed; ``--out``: also written to a file) is one dated run, in Markdown
(:mod:`ldr_experiments.serve_bench_report`). ``--benchmarks BENCHMARKS.md`` adds it to that
file's section :data:`~ldr_experiments.serve_bench_report.SECTION` (created at
the end of the file if missing), before the runs already there: ``BENCHMARKS.md``'s serving
figures come from this command (``bash run/serve_bench.sh -- --benchmarks BENCHMARKS.md``).
The client side imports the standard library only (the machine's description from
:mod:`ldr_experiments.machine`, the Markdown table from :mod:`ldr_experiments.standalone`); the
offline figures need ctranslate2 and the package.
"""

import argparse
import datetime
import functools
import http.client
import itertools
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.parse

from ldr_experiments import machine
from ldr_experiments.serve_bench_report import (
    KEEP_ALIVE,
    NEW,
    header_lines,
    load_lines,
    startup_lines,
    update_benchmarks,
)

PARTS = ("load", "startup", "lazy", "savedmodel")


def percentile(values, fraction):
    """The nearest-rank percentile of a non-empty list."""
    ordered = sorted(values)
    rank = max(1, int(round(fraction * len(ordered) + 0.5 - 1e-9)))
    return ordered[min(rank, len(ordered)) - 1]


def _free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Server:
    """An ``ldr-serve``: :meth:`start` runs one in a subprocess (:attr:`startup_s`: seconds
    until it answered), :meth:`at` talks to one already running."""

    def __init__(self, host, port, process=None, startup_s=None):
        self.host, self.port = host, port
        self.process, self.startup_s = process, startup_s

    @classmethod
    def start(cls, model_dir, options, executable=None):
        """``ldr-serve --model_dir MODEL_DIR OPTIONS`` on a free port, answering
        (:obj:`executable`: that ``ldr-serve``, default the one on ``PATH``)."""
        port = _free_port()
        executable = executable or shutil.which("ldr-serve")
        command = [executable] if executable else [sys.executable, "-m", "ldr_opennmt.cli.serve"]
        command += ["--model_dir", model_dir, "--port", str(port), "--log_level", "warning"]
        start = time.perf_counter()
        process = subprocess.Popen(
            command + list(options), env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
        )
        server = cls("127.0.0.1", port, process)
        deadline = time.monotonic() + 300
        while True:
            if process.poll() is not None:
                raise SystemExit("serve_bench: ldr-serve exited with status %d" % process.poll())
            try:
                if server.request("GET", "/health")[0] == 200:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                server.stop()
                raise SystemExit("serve_bench: ldr-serve did not answer within 300 s")
            time.sleep(0.05)
        server.startup_s = time.perf_counter() - start
        return server

    @classmethod
    def at(cls, url):
        """The server answering at :obj:`url` (``http://HOST:PORT``)."""
        parsed = urllib.parse.urlsplit(url)
        if parsed.scheme != "http" or not parsed.hostname or parsed.path not in ("", "/"):
            raise SystemExit("serve_bench: --url: %r is not http://HOST:PORT" % url)
        server = cls(parsed.hostname, parsed.port or 80)
        try:
            status = server.request("GET", "/health")[0]
        except OSError as e:
            raise SystemExit("serve_bench: --url: no server at %s (%s)" % (url, e)) from e
        if status != 200:
            raise SystemExit("serve_bench: --url: %s/health answered %d" % (url, status))
        return server

    def connection(self):
        return http.client.HTTPConnection(self.host, self.port, timeout=300)

    def request(self, method, path, body=None, connection=None):
        """``(status, answer)`` of a request on :obj:`connection` (``None``: a new one,
        closed after)."""
        own = connection is None
        connection = connection or self.connection()
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
        """``(VmRSS, VmHWM)`` of the server's process, in MiB."""
        return machine.process_memory_mib(self.process.pid)

    def stop(self):
        """Stops the server this script started (not one given by :meth:`at`)."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def run_clients(server, clients, seconds, sentences, domain, per_request=1, connection=KEEP_ALIVE):
    """:obj:`clients` threads sending :obj:`per_request` sentences per request for
    :obj:`seconds`, each on one kept-alive connection (:data:`KEEP_ALIVE`) or on a new
    connection per request (:data:`NEW`: its time includes connecting).

    Returns:
      ``{"connection", "clients", "requests", "errors", "p50_ms", "p99_ms",
      "sentences_per_s"}``.
    """
    kept_alive = connection == KEEP_ALIVE
    latencies, errors, lock = [], [], threading.Lock()
    counter = itertools.count()
    stop = [None]

    def _start():
        stop[0] = time.perf_counter() + seconds

    barrier = threading.Barrier(clients, action=_start)

    def _client():
        connection = server.connection()
        # Warm-up: the connection and one request, not counted.
        server.translate(sentences[:per_request], domain, connection)
        if not kept_alive:
            connection.close()
        barrier.wait()
        while time.perf_counter() < stop[0]:
            first = next(counter) * per_request
            batch = [sentences[(first + i) % len(sentences)] for i in range(per_request)]
            start = time.perf_counter()
            try:
                server.translate(batch, domain, connection if kept_alive else None)
            except (OSError, RuntimeError, http.client.HTTPException) as e:
                with lock:
                    errors.append(str(e))
                connection.close()
                connection = server.connection()
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
        "connection": connection,
        "clients": clients,
        "requests": len(latencies),
        "errors": len(errors),
        "p50_ms": 1000 * percentile(latencies, 0.5) if latencies else float("nan"),
        "p99_ms": 1000 * percentile(latencies, 0.99) if latencies else float("nan"),
        "sentences_per_s": len(latencies) * per_request / wall,
    }


def offline_ctranslate2(model_dir, domain, sentences, args, compute_type="default"):
    """The sentences translated by the domain's CTranslate2 model (with
    :obj:`compute_type`) in batches, in this process (tokenized and detokenized as the
    server does).

    Returns:
      ``{"sentences_per_s", "batch_ms", "sentence_ms", "load"}``: the best of 3 runs over
      every sentence, the median time of one ``translate_batch`` call of
      ``--max_batch_size`` sentences, and the median time of one sentence alone.
    """
    import ctranslate2  # pylint: disable=import-outside-toplevel

    from ldr_opennmt.serving import ct2_models  # pylint: disable=import-outside-toplevel

    model = ct2_models.DomainModel(
        domain,
        os.path.join(model_dir, domain),
        inter_threads=args.inter_threads,
        intra_threads=args.intra_threads,
        compute_type=compute_type,
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
    from ldr_opennmt.serving import savedmodel_translate  # pylint: disable=import-outside-toplevel

    translator = savedmodel_translate.SignatureRunner(export_dir)
    source = assets.load_tokenizer(export_dir, "source")
    target = assets.load_tokenizer(export_dir, "target")

    def _batch(batch):
        tokens = [savedmodel_translate._tokenize(source, s) for s in batch]
        return [
            savedmodel_translate._detokenize(target, t)
            for t in translator(tokens, [domain] * len(batch))
        ]

    def _all():
        return [
            t
            for start in range(0, len(sentences), args.max_batch_size)
            for t in _batch(sentences[start : start + args.max_batch_size])
        ]

    _batch(sentences[:2])  # Warm-up.
    return _offline(_all, _batch, sentences, args.max_batch_size)


def _offline(translate_all, translate_batch, sentences, batch_size, singles=100):
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
    sentence_times = []
    for sentence in sentences[:singles]:
        began = time.perf_counter()
        translate_batch([sentence])
        sentence_times.append(time.perf_counter() - began)
    return {
        "sentences_per_s": len(sentences) / min(times),
        "batch_ms": 1000 * statistics.median(batch_times),
        "sentence_ms": 1000 * statistics.median(sentence_times),
        "load": machine.load_average(),
    }


def server_options(args, extra=()):
    """The options of the servers this script starts: the decoding options, enough
    requests and waiting connections for the most clients (``--limit_concurrency``,
    ``--max_waiting_per_client``, unless given after ``--``),
    the options after ``--``, then :obj:`extra`."""
    limit = []
    # All clients come from one address, and kept alive, each waits between its requests.
    for option in ("--limit_concurrency", "--max_waiting_per_client"):
        if option not in args.server_options:
            limit += [option, str(max(64, 2 * max(args.clients)))]
    return [
        "--max_batch_size", str(args.max_batch_size),
        "--max_decoding_length", str(args.max_decoding_length),
        "--inter_threads", str(args.inter_threads),
        "--intra_threads", str(args.intra_threads),
        *limit,
        *args.server_options,
        *extra,
    ]  # fmt: skip


# The report: Markdown, from the measurements alone (the functions below measure nothing).


def load_part(name, server_at, offline, args, sentences):
    """Offline figures (given), then the server under each number of clients.

    Args:
      name: The subsection's heading.
      server_at: A function starting the server (stopped at the end), or a running
        :class:`Server` (left running).
      offline: See :func:`load_lines`.
      args: The command line.
      sentences: The source sentences.

    Returns:
      See :func:`load_lines`.
    """
    server = server_at() if callable(server_at) else server_at
    try:
        rows = []
        for connection in args.connections:
            for clients in args.clients:
                rows.append(
                    run_clients(
                        server,
                        clients,
                        args.seconds,
                        sentences,
                        args.domain,
                        per_request=args.sentences_per_request,
                        connection=connection,
                    )
                )
                rows[-1]["load"] = machine.load_average()
                rows[-1]["per_request"] = args.sentences_per_request
                print("  %s: %s" % (name, json.dumps(rows[-1])), file=sys.stderr)
        batches = server.request("GET", "/health")[1]["queues"]
        memory = server.memory() if server.process is not None else None
    finally:
        if callable(server_at):
            server.stop()
    largest = max(stats["largest_batch"] for stats in batches.values())
    return load_lines(name, args.max_batch_size, offline, rows, largest, memory)


def startup_part(args, sentences, domains):
    """Startup time and memory: every model at start, on first use, at most one."""
    rows = []
    alternating = None
    for label, extra in (
        ("every domain loaded at start", ()),
        ("`--lazy`", ("--lazy",)),
        ("`--max_loaded_models 1`", ("--max_loaded_models", "1")),
    ):
        if ("lazy" if extra else "startup") not in args.parts:
            continue
        server = Server.start(args.model_dir, server_options(args, extra))
        try:
            started = server.memory()[0]
            for domain in domains:
                server.translate(sentences[:8], domain)
            rss, peak = server.memory()
            rows.append((label, server.startup_s, started, rss, peak))
            if extra == ("--max_loaded_models", "1"):
                pair = domains[:2]
                alternating = tuple(pair) + _alternating(server, sentences, pair)
        finally:
            server.stop()
    return startup_lines(rows, alternating)


def _alternating(server, sentences, domains, count=20):
    def _mean(labels):
        times = []
        for i, domain in enumerate(labels):
            start = time.perf_counter()
            server.translate([sentences[i % len(sentences)]], domain)
            times.append(time.perf_counter() - start)
        return 1000 * statistics.mean(times)

    return _mean([domains[i % 2] for i in range(count)]), _mean([domains[0]] * count)


def model_description(model_dir, domains):
    """The domains of a CTranslate2 directory and the size of their ``model.bin``."""
    sizes = []
    for domain in domains:
        try:
            sizes.append(os.path.getsize(os.path.join(model_dir, domain, "model.bin")))
        except OSError:
            pass
    size = ", %.1f MB of `model.bin` per domain" % (statistics.mean(sizes) / 1e6) if sizes else ""
    return "`%s`: %s%s" % (model_dir, ", ".join(domains), size)


def parse_args(argv):
    """The command line: :obj:`argv` without the server options after ``--``, which go to
    ``server_options``."""
    server_extra = []
    if "--" in argv:
        server_extra = argv[argv.index("--") + 1 :]
        argv = argv[: argv.index("--")]
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model_dir", help="An ldr-export ctranslate2 directory.")
    parser.add_argument("--url", help="A running ldr-serve (http://HOST:PORT): the load part.")
    parser.add_argument("--saved_model", help="The same model exported by ldr-main export.")
    parser.add_argument("--sentences", required=True, help="Raw source sentences, one a line.")
    parser.add_argument("--limit", type=int, default=512, help="Sentences used (the first N).")
    parser.add_argument("--domain", default="medical", help="The domain of every request.")
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 8, 32, 128])
    parser.add_argument(
        "--connections",
        nargs="+",
        choices=(KEEP_ALIVE, NEW),
        default=[KEEP_ALIVE, NEW],
        help="One kept-alive connection per client, and/or a new connection per request.",
    )
    parser.add_argument(
        "--compute_types",
        nargs="+",
        default=["float32", "int8"],
        help="CTranslate2's compute types of the load part (offline and --compute_type of "
        "the server).",
    )
    parser.add_argument(
        "--seconds", type=float, default=10, help="Per number of clients and connection kind."
    )
    parser.add_argument("--sentences_per_request", type=int, default=1)
    parser.add_argument("--max_batch_size", type=int, default=32)
    parser.add_argument("--max_decoding_length", type=int, default=64)
    parser.add_argument("--inter_threads", type=int, default=1)
    parser.add_argument("--intra_threads", type=int, default=1)
    parser.add_argument("--parts", nargs="+", choices=PARTS, help="Default: all (--url: load).")
    parser.add_argument("--out", help="Also write the report (Markdown) to this file.")
    parser.add_argument(
        "--benchmarks", help="Also add the report to this file's serving section (BENCHMARKS.md)."
    )
    parser.add_argument("--invoked_as", help="The command the report names (default: this one).")
    args = parser.parse_args(argv)
    args.server_options = server_extra
    if args.parts is None:
        args.parts = ["load"] if args.url else list(PARTS)
    if not args.url and not args.model_dir:
        parser.error("--model_dir or --url is required")
    if args.url and set(args.parts) - {"load"}:
        parser.error("--url measures the load part only (the others start their own servers)")
    if args.url and server_extra:
        parser.error("--url: the server runs with its own options (none after --)")
    if args.sentences_per_request < 1:
        parser.error("--sentences_per_request must be at least 1")
    return args, argv + (["--"] + server_extra if server_extra else [])


def main(argv=None):
    args, argv = parse_args(list(sys.argv[1:] if argv is None else argv))
    date = datetime.datetime.now(datetime.timezone.utc)
    with open(args.sentences, encoding="utf-8") as f:
        sentences = [line.strip() for line in f if line.strip()][: args.limit]
    server = Server.at(args.url) if args.url else None
    if args.model_dir:
        with open(os.path.join(args.model_dir, "manifest.json"), encoding="utf-8") as f:
            domains = list(json.load(f)["domains"])
        model = model_description(args.model_dir, domains)
    else:
        model = "%s: %s" % (args.url, ", ".join(server.request("GET", "/domains")[1]["domains"]))
    report = header_lines(
        date,
        [
            (
                "machine",
                "%s; load average at start: %s" % (machine.description(), machine.load_average()),
            ),
            ("software", machine.software()),
            (
                "command",
                "`%s`" % (args.invoked_as or "ldr-experiments serve-bench " + " ".join(argv)),
            ),
            ("model", model),
            ("saved model", "`%s`" % args.saved_model if args.saved_model else None),
            (
                "requests",
                "%d sentences of `%s`, domain %s, %d per request, %g s per number of clients "
                "and connection kind (%s)"
                % (
                    len(sentences),
                    args.sentences,
                    args.domain,
                    args.sentences_per_request,
                    args.seconds,
                    ", ".join(args.connections),
                ),
            ),
            (
                "decoding",
                "greedy, max_decoding_length %d, batches of %d, inter_threads %d, intra_threads %d"
                % (
                    args.max_decoding_length,
                    args.max_batch_size,
                    args.inter_threads,
                    args.intra_threads,
                ),
            ),
            ("server options", " ".join(args.server_options) or None),
        ],
    )
    verdicts = []
    if "load" in args.parts and server is not None:
        offline = None
        if args.model_dir:
            offline = offline_ctranslate2(args.model_dir, args.domain, sentences, args)
        name = "`ldr-serve` at %s" % args.url
        lines, found = load_part(name, server, offline, args, sentences)
        report += lines
        verdicts += found
    elif "load" in args.parts:
        for compute_type in args.compute_types:
            offline = offline_ctranslate2(
                args.model_dir, args.domain, sentences, args, compute_type=compute_type
            )
            name = "CTranslate2 (`%s`, compute type %s)" % (args.model_dir, compute_type)
            options = server_options(args, ("--compute_type", compute_type))
            target = functools.partial(Server.start, args.model_dir, options)
            lines, found = load_part(name, target, offline, args, sentences)
            report += lines
            verdicts += ["%s [%s]" % (verdict, compute_type) for verdict in found]
    if "startup" in args.parts or "lazy" in args.parts:
        report += startup_part(args, sentences, domains)
    if "savedmodel" in args.parts and args.saved_model:
        offline = offline_saved_model(args.saved_model, args.domain, sentences, args)
        lines, found = load_part(
            "SavedModel (`%s`)" % args.saved_model,
            functools.partial(Server.start, args.saved_model, server_options(args)),
            offline,
            args,
            sentences,
        )
        report += lines
        verdicts += ["%s [SavedModel]" % verdict for verdict in found]
    text = "\n".join(report).rstrip("\n") + "\n"
    print(text)
    for verdict in verdicts:
        print(verdict)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text)
    if args.benchmarks:
        update_benchmarks(args.benchmarks, text)
        print("serve_bench: run added to %s" % args.benchmarks, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
