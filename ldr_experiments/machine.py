"""The machine a run ran on, described once for every report of the experiments.

The demo's report begins with :func:`provenance_line` (when, on which machine, by which
command); the benchmarks, the GPU check and the serving benchmarks head their reports with
:func:`describe` (the date, :func:`description`, :func:`software` and the load average);
:func:`process_memory_mib` reads a process's resident memory for those that measure it.

What is read, and from where:

* the CPU model: the first ``model name`` (``Model`` or ``cpu model`` on other
  architectures) of ``/proc/cpuinfo`` (:func:`cpu_model`), else
  :func:`platform.processor`; the cores: :func:`os.cpu_count`, and those this process may
  run on (:func:`os.sched_getaffinity`) when fewer (:func:`machine`);
* the memory: ``MemTotal`` of ``/proc/meminfo`` (:func:`mem_total_gib`);
* the libraries: the installed distributions' versions (:func:`importlib.metadata`, never
  an import: a CTranslate2 process stays without TensorFlow);
* the load average: :func:`os.getloadavg`.

The standard library only: the benchmark's CTranslate2 processes and the serving
benchmark's clients import this module without TensorFlow.
"""

import datetime
import importlib.metadata
import os
import platform
import shlex

#: The report's first line (:func:`provenance_line`): when (UTC), on which machine and by
#: which command. ``docs/_ext/ldr_docs.py`` reads it back (``DEMO_PROVENANCE``).
PROVENANCE = "Written %(written)s on %(machine)s by `%(command)s`."
#: The libraries a report names: ``(distribution, title)``.
LIBRARIES = (
    ("tensorflow", "TensorFlow"),
    ("opennmt-tf", "OpenNMT-tf"),
    ("ctranslate2", "CTranslate2"),
)


def read_text(path):
    """The text of :obj:`path`, or ``""`` if it cannot be read (not on Linux)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def cpu_model(cpuinfo):
    """The CPU model of a ``/proc/cpuinfo`` text (its first ``model name``; ``Model`` or
    ``cpu model`` on other architectures), or ``None``."""
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("model name", "Model", "cpu model") and value.strip():
            return value.strip()
    return None


def _kib_field(text, name):
    """The value of a ``NAME:  1234 kB`` line of a ``/proc`` text in KiB, or ``None``."""
    for line in text.splitlines():
        if line.startswith(name + ":"):
            fields = line.split()
            if len(fields) >= 2 and fields[1].isdigit():
                return int(fields[1])
    return None


def mem_total_gib(meminfo):
    """``MemTotal`` of a ``/proc/meminfo`` text in GiB, or ``None``."""
    kib = _kib_field(meminfo, "MemTotal")
    return None if kib is None else kib / (1024 * 1024)


def status_mib(status, name):
    """A memory field (``VmRSS``, ``VmHWM``...) of a ``/proc/<pid>/status`` text in MiB,
    or ``None``."""
    kib = _kib_field(status, name)
    return None if kib is None else kib / 1024


def process_memory_mib(pid="self"):
    """``(VmRSS, VmHWM)`` of a process in MiB: its resident memory now and at its peak
    (each ``None`` where ``/proc`` does not say)."""
    status = read_text("/proc/%s/status" % pid)
    return status_mib(status, "VmRSS"), status_mib(status, "VmHWM")


def cores():
    """``(logical CPUs, those this process may run on)``."""
    count = os.cpu_count() or 0
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:  # Not on Linux.
        usable = count
    return count, usable


def machine(cpuinfo_path="/proc/cpuinfo"):
    """This machine in a few words: its CPU model (:func:`cpu_model` of
    :obj:`cpuinfo_path`, else :func:`platform.processor`) and core count, e.g.
    ``AMD EPYC 7B13 (2 cores)``; ``(8 cores, 2 usable)`` when this process may run on
    fewer."""
    model = cpu_model(read_text(cpuinfo_path))
    model = model or platform.processor() or platform.machine() or "an unknown CPU"
    count, usable = cores()
    if usable and usable != count:
        return "%s (%d cores, %d usable)" % (model, count, usable)
    return "%s (%d cores)" % (model, count)


def memory(meminfo_path="/proc/meminfo"):
    """The machine's memory, e.g. ``23.5 GiB RAM``, or ``None`` if unknown."""
    total = mem_total_gib(read_text(meminfo_path))
    return None if total is None else "%.1f GiB RAM" % total


def description(cpuinfo_path="/proc/cpuinfo", meminfo_path="/proc/meminfo"):
    """:func:`machine`, its architecture and its memory in one line, e.g.
    ``AMD EPYC 7B13 (2 cores), x86_64, 23.5 GiB RAM``."""
    parts = [machine(cpuinfo_path), platform.machine(), memory(meminfo_path)]
    return ", ".join(part for part in parts if part)


def load_average():
    """The 1-, 5- and 15-minute load averages, e.g. ``1.26 1.10 0.98``, or ``n/a``."""
    try:
        return "%.2f %.2f %.2f" % os.getloadavg()
    except (AttributeError, OSError):
        return "n/a"


def version(distribution):
    """The installed version of a distribution (``tensorflow``...), or ``None``."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def software(libraries=LIBRARIES):
    """Python's version and those of :obj:`libraries` (``(distribution, title)`` pairs), e.g.
    ``Python 3.11.9, TensorFlow 2.13.1, OpenNMT-tf 2.32.0, CTranslate2 3.24.0``; a library
    that is not installed is named so."""
    parts = ["Python %s" % platform.python_version()]
    for distribution, title in libraries:
        found = version(distribution)
        parts.append("%s %s" % (title, found or "not installed"))
    return ", ".join(parts)


def utc_text(when=None):
    """A time as the reports write it, ``YYYY-MM-DD HH:MM UTC`` (:obj:`when`: an aware
    :class:`datetime.datetime`, default now)."""
    when = when or datetime.datetime.now(datetime.timezone.utc)
    return when.astimezone(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def describe(libraries=LIBRARIES):
    """What a report's header says of its run: ``{"date": utc_text(), "machine":
    description(), "software": software(libraries), "load": load_average()}``."""
    return {
        "date": utc_text(),
        "machine": description(),
        "software": software(libraries),
        "load": load_average(),
    }


def provenance(command, now=None):
    """What the report's first line says: ``{"written": "YYYY-MM-DD HH:MM UTC", "machine":
    ..., "command": ...}`` (:obj:`command`: a list, shell-quoted here; :obj:`now`: an aware
    :class:`datetime.datetime`, default the current time)."""
    return {"written": utc_text(now), "machine": machine(), "command": shlex.join(command)}


def provenance_line(record):
    """The report's first line (:data:`PROVENANCE`) from a :func:`provenance` record."""
    return PROVENANCE % record
