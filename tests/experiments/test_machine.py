"""The one description of the machine a run ran on (ldr_experiments/machine.py)."""

import datetime
import os
import platform
import subprocess
import sys
import tempfile
import unittest
from unittest import mock

from ldr_experiments import machine

CPUINFO = (
    "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7B13\n\n"
    "processor\t: 1\nmodel name\t: AMD EPYC 7B13\n"
)
MEMINFO = "MemTotal:       24641536 kB\nMemFree:         1024 kB\n"
STATUS = "Name:\tpython\nVmHWM:\t  524288 kB\nVmRSS:\t 1024 kB\n"


def _cores(count, usable):
    """Patches the core counts :func:`machine.cores` reads."""
    return mock.patch.multiple(
        os,
        cpu_count=mock.Mock(return_value=count),
        sched_getaffinity=mock.Mock(return_value=set(range(usable))),
        create=True,
    )


class ParsersTest(unittest.TestCase):
    def test_cpu_model(self):
        self.assertEqual(machine.cpu_model(CPUINFO), "AMD EPYC 7B13")
        self.assertEqual(
            machine.cpu_model("processor\t: 0\nModel\t\t: Raspberry Pi 4\n"), "Raspberry Pi 4"
        )
        self.assertIsNone(machine.cpu_model("processor\t: 0\nmodel name\t:\n"))
        self.assertIsNone(machine.cpu_model(""))

    def test_memory_fields(self):
        self.assertEqual(machine.mem_total_gib("MemTotal:  2097152 kB\n"), 2.0)
        self.assertIsNone(machine.mem_total_gib(""))
        self.assertIsNone(machine.mem_total_gib("MemTotal: unknown\n"))
        self.assertEqual(machine.status_mib(STATUS, "VmHWM"), 512.0)
        self.assertEqual(machine.status_mib(STATUS, "VmRSS"), 1.0)
        self.assertIsNone(machine.status_mib("Name:\tpython\n", "VmHWM"))

    def test_this_process_memory(self):
        rss, peak = machine.process_memory_mib()
        if not os.path.exists("/proc/self/status"):
            self.assertEqual((rss, peak), (None, None))
            return
        self.assertGreater(rss, 1.0)
        self.assertGreaterEqual(peak, rss)
        self.assertGreaterEqual(machine.process_memory_mib(os.getpid())[1], peak)
        self.assertEqual(machine.process_memory_mib(2**31), (None, None))  # No such process.


class MachineTest(unittest.TestCase):
    def setUp(self):
        temporary = tempfile.TemporaryDirectory()
        self.addCleanup(temporary.cleanup)
        directory = temporary.name
        self.cpuinfo = os.path.join(directory, "cpuinfo")
        self.meminfo = os.path.join(directory, "meminfo")
        self.missing = os.path.join(directory, "none")
        with open(self.cpuinfo, "w") as f:
            f.write(CPUINFO)
        with open(self.meminfo, "w") as f:
            f.write(MEMINFO)

    def test_the_cpu_and_its_cores(self):
        with _cores(2, 2):
            self.assertEqual(machine.cores(), (2, 2))
            self.assertEqual(machine.machine(self.cpuinfo), "AMD EPYC 7B13 (2 cores)")
        with _cores(8, 2):
            self.assertEqual(machine.machine(self.cpuinfo), "AMD EPYC 7B13 (8 cores, 2 usable)")
        # No /proc/cpuinfo: what the platform says, still with the cores.
        with _cores(4, 4), mock.patch.object(platform, "processor", return_value="arm"):
            self.assertEqual(machine.machine(self.missing), "arm (4 cores)")

    def test_description_names_the_architecture_and_memory(self):
        with _cores(2, 2), mock.patch.object(platform, "machine", return_value="x86_64"):
            self.assertEqual(
                machine.description(self.cpuinfo, self.meminfo),
                "AMD EPYC 7B13 (2 cores), x86_64, 23.5 GiB RAM",
            )
            # Unknown memory: left out, not "n/a".
            self.assertEqual(
                machine.description(self.cpuinfo, self.missing), "AMD EPYC 7B13 (2 cores), x86_64"
            )
        self.assertEqual(machine.memory(self.meminfo), "23.5 GiB RAM")
        self.assertIsNone(machine.memory(self.missing))

    def test_load_average(self):
        with mock.patch.object(os, "getloadavg", return_value=(1.255, 1.1, 0.981)):
            self.assertEqual(machine.load_average(), "1.25 1.10 0.98")
        with mock.patch.object(os, "getloadavg", side_effect=OSError):
            self.assertEqual(machine.load_average(), "n/a")

    def test_software(self):
        versions = {"tensorflow": "2.13.1", "ctranslate2": "3.24.0"}
        with mock.patch.object(machine, "version", side_effect=versions.get), mock.patch.object(
            platform, "python_version", return_value="3.11.9"
        ):
            self.assertEqual(
                machine.software(),
                "Python 3.11.9, TensorFlow 2.13.1, OpenNMT-tf not installed, CTranslate2 3.24.0",
            )
            self.assertEqual(
                machine.software([("ctranslate2", "CTranslate2")]),
                "Python 3.11.9, CTranslate2 3.24.0",
            )
        self.assertIsNone(machine.version("no-such-distribution-of-ldr"))
        self.assertRegex(machine.version("PyYAML"), r"^\d+\.")  # Read, never imported.

    def test_describe(self):
        record = machine.describe()
        self.assertEqual(sorted(record), ["date", "load", "machine", "software"])
        self.assertRegex(record["date"], r"^\d{4}-\d\d-\d\d \d\d:\d\d UTC$")
        self.assertTrue(record["machine"].startswith(machine.machine()))
        self.assertIn("CTranslate2 ", record["software"])


class ProvenanceTest(unittest.TestCase):
    """The demo report's first line: when (UTC), on which machine and by which command."""

    def test_the_line_is_utc_and_names_the_command(self):
        paris = datetime.timezone(datetime.timedelta(hours=1))
        with mock.patch.object(machine, "machine", return_value="AMD EPYC 7B13 (2 cores)"):
            record = machine.provenance(
                ["bash", "run/demo.sh", "--quick", "--out", "my results"],
                now=datetime.datetime(2026, 11, 24, 14, 5, tzinfo=paris),
            )
        self.assertEqual(
            record,
            {
                "written": "2026-11-24 13:05 UTC",
                "machine": "AMD EPYC 7B13 (2 cores)",
                "command": "bash run/demo.sh --quick --out 'my results'",
            },
        )
        self.assertEqual(
            machine.provenance_line(record),
            "Written 2026-11-24 13:05 UTC on AMD EPYC 7B13 (2 cores) by"
            " `bash run/demo.sh --quick --out 'my results'`.",
        )


class ImportTest(unittest.TestCase):
    def test_imports_the_standard_library_only(self):
        code = (
            "import sys; from ldr_experiments import machine; machine.describe(); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('tensorflow', 'ldr_opennmt', 'opennmt', 'ctranslate2')))"
        )
        output = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        )
        self.assertEqual(output.stdout.splitlines(), ["[]"], output.stderr)


if __name__ == "__main__":
    unittest.main()
