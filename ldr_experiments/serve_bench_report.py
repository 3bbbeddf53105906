"""The report of ``ldr-experiments serve-bench`` (:mod:`ldr_experiments.serve_bench`): its
targets, its Markdown lines (a run's heading, the ``load`` and ``startup`` parts, PASS or
MISS against the targets) and its section of ``BENCHMARKS.md`` (:func:`update_benchmarks`,
each run before the earlier ones). Standard library only, as the client side."""

import os
import tempfile

from ldr_experiments import machine
from ldr_experiments.standalone import markdown_table

#: The targets for 32 clients (:data:`TARGET_CLIENTS`; the most clients measured if 32 were
#: not): issue 58's, raised from issue 35's 70% and 3 batches.
THROUGHPUT_TARGET = 0.85
LATENCY_TARGET = 2.0
TARGET_CLIENTS = 32
#: One client's p50 latency at most ``ONE_SENTENCE_FACTOR`` times the offline time of one
#: sentence plus ``ONE_SENTENCE_MARGIN_MS`` (issue 58), kept-alive or not.
ONE_SENTENCE_FACTOR = 1.5
ONE_SENTENCE_MARGIN_MS = 2.0
#: ``--connections``: one kept-alive connection per client, or a new one per request.
KEEP_ALIVE, NEW = "keep-alive", "new"
#: The heading of this benchmark's section of ``BENCHMARKS.md``; each run is a
#: subsection headed :data:`RUN_HEADING` and its date.
SECTION = "## Serving: `ldr-serve` under concurrent clients, against offline batches"
RUN_HEADING = "### Run of "
#: The first paragraph of a new section (``--benchmarks`` on a file without one).
SECTION_INTRO = (
    "What `ldr-serve` gives under 1, 8, 32 and 128 concurrent clients, each sending one "
    "sentence per request on a kept-alive connection or a new one, against the same sentences "
    "translated offline in batches and one at a time, with its startup time and memory "
    "(docs/serving-benchmark.md: what is measured, and how to read it). "
    "Targets (issue 58), with 32 clients: at least 85% of the offline throughput, and a p99 "
    "latency within 2 times one offline batch's time; one client's p50 latency "
    "within 1.5 times one sentence's offline time plus 2 ms, kept-alive or not. Measured by "
    "`bash run/serve_bench.sh` "
    "(`ldr-experiments serve-bench`); `bash run/serve_bench.sh -- --benchmarks BENCHMARKS.md` "
    "adds its run here, before the earlier ones."
)


def percentile(values, fraction):
    """The nearest-rank percentile of a non-empty list."""
    ordered = sorted(values)
    rank = max(1, int(round(fraction * len(ordered) + 0.5 - 1e-9)))
    return ordered[min(rank, len(ordered)) - 1]


def header_lines(date, fields):
    """The heading of a run (:data:`RUN_HEADING` and :obj:`date`, a ``datetime`` in UTC)
    and its ``- name: value`` lines, for the ``(name, value)`` of :obj:`fields` whose value
    is not ``None``."""
    lines = [RUN_HEADING + machine.utc_text(date), ""]
    lines += ["- %s: %s" % (name, value) for name, value in fields if value is not None]
    return lines + [""]


def load_lines(name, batch_size, offline, rows, largest, memory=None):
    """The ``load`` part of a report.

    Args:
      name: What was served (the subsection's heading).
      batch_size: The offline batches' size.
      offline: ``{"sentences_per_s", "batch_ms", "load"}`` and optionally ``"sentence_ms"``
        (:func:`offline_ctranslate2`), or ``None`` (not measured: no ratio, no target).
      rows: The :func:`run_clients` results, each with its ``"load"`` too (a row without
        ``"connection"`` is of kept-alive connections).
      largest: The largest batch the server decoded (``None``: not known).
      memory: ``(VmRSS, VmHWM)`` of the server after the load, in MiB (``None``: not known).

    Returns:
      ``(lines, verdicts)``: the Markdown lines, and the targets' ``PASS ...`` or
      ``MISS ...`` lines (in the Markdown too).
    """
    lines = ["#### %s" % name, ""]
    if offline:
        single = (
            ", one sentence alone %.2f ms" % offline["sentence_ms"]
            if offline.get("sentence_ms") is not None
            else ""
        )
        lines += [
            "Offline, batches of %d: **%.1f sentences/s**, one batch %.1f ms%s (load: %s)."
            % (
                batch_size,
                offline["sentences_per_s"],
                offline["batch_ms"],
                single,
                offline["load"],
            ),
            "",
        ]
    header = ["clients", "requests", "errors", "p50 ms", "p99 ms", "sentences/s", "of offline"]
    table = [
        [
            "%d" % row["clients"],
            "%d" % row["requests"],
            "%d" % row["errors"],
            "%.1f" % row["p50_ms"],
            "%.1f" % row["p99_ms"],
            "%.1f" % row["sentences_per_s"],
            (
                "%.0f%%" % (100 * row["sentences_per_s"] / offline["sentences_per_s"])
                if offline
                else "n/a"
            ),
            row["load"],
            row.get("connection", KEEP_ALIVE),
        ]
        for row in rows
    ]
    lines += [markdown_table(header + ["load", "connection"], table, align="l" * 9), ""]
    if largest is not None:
        lines += ["Largest batch the server decoded: %d sentences." % largest, ""]
    if memory is not None:
        lines += [
            "Server memory after the load: %.0f MiB resident (VmRSS), peak %.0f MiB (VmHWM)."
            % memory,
            "",
        ]
    verdicts = []
    if offline:
        kept = [row for row in rows if row.get("connection", KEEP_ALIVE) == KEEP_ALIVE] or rows
        top = next(
            (row for row in kept if row["clients"] == TARGET_CLIENTS),
            max(kept, key=lambda row: row["clients"]),
        )
        ratio = top["sentences_per_s"] / offline["sentences_per_s"]
        latency = top["p99_ms"] / offline["batch_ms"]
        for label, value, target, ok in (
            (
                "throughput with %d clients" % top["clients"],
                "%.1f%% of offline" % (100 * ratio),
                ">= %.0f%%" % (100 * THROUGHPUT_TARGET),
                ratio >= THROUGHPUT_TARGET,
            ),
            (
                "p99 latency with %d clients" % top["clients"],
                "%.2fx one batch" % latency,
                "<= %.0fx" % LATENCY_TARGET,
                latency <= LATENCY_TARGET,
            ),
        ):
            verdicts.append(
                "%s %s: %s (target %s)" % ("PASS" if ok else "MISS", label, value, target)
            )
        if offline.get("sentence_ms") is not None:
            bound = ONE_SENTENCE_FACTOR * offline["sentence_ms"] + ONE_SENTENCE_MARGIN_MS
            for row in rows:
                if row["clients"] != 1 or row.get("per_request", 1) != 1:
                    continue
                verdicts.append(
                    "%s p50 latency of one client, %s connection: %.2f ms (target <= %gx one "
                    "sentence + %g ms = %.2f ms)"
                    % (
                        "PASS" if row["p50_ms"] <= bound else "MISS",
                        row.get("connection", KEEP_ALIVE),
                        row["p50_ms"],
                        ONE_SENTENCE_FACTOR,
                        ONE_SENTENCE_MARGIN_MS,
                        bound,
                    )
                )
        lines += ["* " + verdict for verdict in verdicts] + [""]
    return lines, verdicts


def startup_lines(rows, alternating=None):
    """The ``startup`` and ``lazy`` parts of a report.

    Args:
      rows: ``(server, startup s, RSS MiB after start, RSS MiB after a request per domain,
        peak MiB)`` per server.
      alternating: ``(domain, domain, mean ms alternating them, mean ms for one domain)``
        with ``--max_loaded_models 1``, or ``None``.
    """
    header = ["server", "startup s", "RSS MiB after start", "RSS MiB after a request per domain"]
    table = [
        [label, "%.1f" % startup, "%.0f" % started, "%.0f" % rss, "%.0f" % peak]
        for label, startup, started, rss, peak in rows
    ]
    lines = ["#### Startup and memory", ""]
    lines += [markdown_table(header + ["peak (VmHWM) MiB"], table, align="l" * 5), ""]
    if alternating:
        lines += [
            "With `--max_loaded_models 1`, requests of one sentence alternating %s and %s "
            "(each loads its model again): mean %.1f ms, against %.1f ms for requests of one "
            "domain." % alternating,
            "",
        ]
    return lines


# The measurements.


def add_run(text, run, section=SECTION, intro=SECTION_INTRO):
    """:obj:`text` (a ``BENCHMARKS.md``) with :obj:`run` (a report) first among the runs of
    its section :obj:`section` (default :data:`SECTION`): before the section's first
    :data:`RUN_HEADING` heading, or at its end. A file without the section gets it at its
    end, with :obj:`intro`."""
    lines = text.splitlines()
    run_lines = run.strip("\n").splitlines()
    if section not in lines:
        while lines and not lines[-1].strip():
            lines.pop()
        return "\n".join(lines + ["", section, "", intro, ""] + run_lines) + "\n"
    start = lines.index(section) + 1
    end = next((i for i in range(start, len(lines)) if lines[i].startswith("## ")), len(lines))
    at = next((i for i in range(start, end) if lines[i].startswith(RUN_HEADING)), None)
    if at is None:  # After the section's text, before the blank lines that end it.
        at = end
        while at > start and not lines[at - 1].strip():
            at -= 1
        run_lines = [""] + run_lines
    else:  # Before the latest run.
        run_lines = run_lines + [""]
    return "\n".join(lines[:at] + run_lines + lines[at:]) + "\n"


def update_benchmarks(path, run, section=SECTION, intro=SECTION_INTRO):
    """Adds :obj:`run` to the file :obj:`path` (:func:`add_run`), atomically."""
    with open(path, encoding="utf-8") as f:
        text = add_run(f.read(), run, section, intro)
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
