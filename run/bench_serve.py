"""Latency and throughput of ``ldr-serve`` with 1, 8 and 32 concurrent clients.

::

    python run/bench_serve.py --model_dir export/ct2 [--clients 1 8 32] [--requests 20]
    python run/bench_serve.py --url http://127.0.0.1:8000 ...   # a server already running

With ``--model_dir`` the script starts ``ldr-serve`` on a free port (the options after
``--`` go to it) and stops it at the end. Each client sends ``--requests`` requests one
after the other (``--sentences`` sentences each, domain ``--domain``). One line per number
of clients: p50 and p99 latency of a request, and sentences translated per second.
Standard library only.
"""

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

SENTENCES = ["the big cell", "a host is here", "spirit", "cell host spirit now", "small red host"]


def percentile(values, fraction):
    """The nearest-rank percentile of a non-empty list."""
    ordered = sorted(values)
    rank = max(1, int(round(fraction * len(ordered) + 0.5 - 1e-9)))
    return ordered[min(rank, len(ordered)) - 1]


def run_clients(url, clients, requests, sentences, domain):
    """Runs :obj:`clients` threads of :obj:`requests` requests each.

    Returns:
      ``{"clients", "requests", "errors", "p50_ms", "p99_ms", "sentences_per_s"}``.
    """
    body = {"sentences": [SENTENCES[i % len(SENTENCES)] for i in range(sentences)]}
    if domain:
        body["domain"] = domain
    data = json.dumps(body).encode("utf-8")
    latencies, errors, lock = [], [], threading.Lock()
    barrier = threading.Barrier(clients)

    def _client():
        barrier.wait()
        for _ in range(requests):
            request = urllib.request.Request(
                url + "/translate", data=data, headers={"Content-Type": "application/json"}
            )
            start = time.perf_counter()
            try:
                with urllib.request.urlopen(request, timeout=120) as response:
                    response.read()
                ok = True
            except (urllib.error.URLError, OSError) as e:
                ok = False
                error = str(e)
            elapsed = time.perf_counter() - start
            with lock:
                if ok:
                    latencies.append(elapsed)
                else:
                    errors.append(error)

    threads = [threading.Thread(target=_client) for _ in range(clients)]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - start
    return {
        "clients": clients,
        "requests": len(latencies),
        "errors": len(errors),
        "p50_ms": 1000 * percentile(latencies, 0.5) if latencies else None,
        "p99_ms": 1000 * percentile(latencies, 0.99) if latencies else None,
        "sentences_per_s": len(latencies) * sentences / wall,
    }


def _free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _start_server(model_dir, options):
    port = _free_port()
    executable = shutil.which("ldr-serve")
    command = [executable] if executable else [sys.executable, "-m", "ldr_opennmt.cli.serve"]
    command += ["--model_dir", model_dir, "--port", str(port), "--log_level", "warning"]
    process = subprocess.Popen(command + options, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    url = "http://127.0.0.1:%d" % port
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and process.poll() is None:
        try:
            with urllib.request.urlopen(url + "/health", timeout=5):
                return process, url
        except OSError:
            time.sleep(0.2)
    process.kill()
    raise SystemExit("bench_serve: ldr-serve did not start")


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    server_options = []
    if "--" in argv:
        server_options = argv[argv.index("--") + 1 :]
        argv = argv[: argv.index("--")]
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--model_dir", help="An ldr-export ctranslate2 directory to serve.")
    target.add_argument("--url", help="A running ldr-serve, e.g. http://127.0.0.1:8000.")
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--requests", type=int, default=20, help="Requests per client.")
    parser.add_argument("--sentences", type=int, default=1, help="Sentences per request.")
    parser.add_argument("--domain", default="medical", help="Domain of every request.")
    args = parser.parse_args(argv)
    process = None
    url = args.url
    if args.model_dir:
        process, url = _start_server(args.model_dir, server_options)
    try:
        print("clients  requests  errors  p50_ms  p99_ms  sentences/s")
        for clients in args.clients:
            result = run_clients(url, clients, args.requests, args.sentences, args.domain)
            print(
                "%7d  %8d  %6d  %6.1f  %6.1f  %11.1f"
                % (
                    result["clients"],
                    result["requests"],
                    result["errors"],
                    result["p50_ms"] or 0.0,
                    result["p99_ms"] or 0.0,
                    result["sentences_per_s"],
                )
            )
            sys.stdout.flush()
    finally:
        if process is not None:
            process.terminate()
            process.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
