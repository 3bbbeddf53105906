"""ldr_experiments/serve_bench.py's report and its section of BENCHMARKS.md, without a server (the
server's runs: tests/serving/test_server.py)."""

import datetime
import os
import unittest
from unittest import mock

from ldr_experiments import machine, serve_bench, serve_bench_report

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATE = datetime.datetime(2026, 11, 25, 6, 0, tzinfo=datetime.timezone.utc)


def _run(date=DATE, offline=True):
    rows = [
        dict(clients=1, requests=10, errors=0, p50_ms=9.2, p99_ms=11.4, sentences_per_s=106.7),
        dict(clients=32, requests=99, errors=1, p50_ms=55.0, p99_ms=128.5, sentences_per_s=532.6),
    ]
    for row in rows:
        row["load"] = "1.14 1.10 1.00"
    offline = {"sentences_per_s": 721.3, "batch_ms": 51.9, "load": "1.08"} if offline else None
    lines = serve_bench_report.header_lines(
        date, [("machine", "AMD EPYC, 2 cores"), ("none", None)]
    )
    load, verdicts = serve_bench_report.load_lines("CTranslate2 (`ct2`)", 32, offline, rows, 32)
    startup = serve_bench_report.startup_lines(
        [("`--lazy`", 1.8, 465.0, 520.0, 520.0)], ("medical", "religious", 17.6, 10.4)
    )
    return "\n".join(lines + load + startup), verdicts


class ReportTest(unittest.TestCase):
    def test_report(self):
        text, verdicts = _run()
        self.assertEqual(
            verdicts,
            [
                "MISS throughput with 32 clients: 73.8% of offline (target >= 85%)",
                "MISS p99 latency with 32 clients: 2.48x one batch (target <= 2x)",
            ],
        )
        lines = text.splitlines()
        self.assertEqual(
            lines[:3], ["### Run of 2026-11-25 06:00 UTC", "", "- machine: AMD EPYC, 2 cores"]
        )
        self.assertIn("#### CTranslate2 (`ct2`)", lines)
        self.assertIn(
            "Offline, batches of 32: **721.3 sentences/s**, one batch 51.9 ms (load: 1.08).", lines
        )
        self.assertIn(
            "| 32 | 99 | 1 | 55.0 | 128.5 | 532.6 | 74% | 1.14 1.10 1.00 | keep-alive |", lines
        )
        self.assertIn("* " + verdicts[0], lines)
        self.assertIn("| `--lazy` | 1.8 | 465 | 520 | 520 |", lines)
        self.assertIn(
            "alternating medical and religious (each loads its model again): mean 17.6 ms", text
        )

    def test_no_offline_figures_no_targets(self):
        # --url without --model_dir: the server's figures alone.
        text, verdicts = _run(offline=False)
        self.assertEqual(verdicts, [])
        self.assertIn(
            "| 1 | 10 | 0 | 9.2 | 11.4 | 106.7 | n/a | 1.14 1.10 1.00 | keep-alive |", text
        )
        self.assertNotIn("Offline", text)

    def test_a_miss_is_not_rounded_up_to_the_target(self):
        rows = [dict(clients=32, requests=1, errors=0, p50_ms=1, p99_ms=1, sentences_per_s=84.96)]
        rows[0]["load"] = "0"
        offline = {"sentences_per_s": 100.0, "batch_ms": 1.0, "load": "0"}
        _, verdicts = serve_bench_report.load_lines("x", 32, offline, rows, 1)
        self.assertEqual(
            verdicts[0], "MISS throughput with 32 clients: 85.0% of offline (target >= 85%)"
        )

    def test_connections_one_sentence_and_memory(self):
        # Issue 58: kept-alive and new connections, one client's p50 against the offline time
        # of one sentence (1.5x + 2 ms), the server's memory; the 32-client targets on the
        # kept-alive rows.
        rows = [
            dict(connection="keep-alive", clients=1, p50_ms=3.9, sentences_per_s=250.0),
            dict(connection="keep-alive", clients=32, p50_ms=45.0, sentences_per_s=900.0),
            dict(connection="new", clients=1, p50_ms=4.1, sentences_per_s=240.0),
            dict(connection="new", clients=32, p50_ms=90.0, sentences_per_s=500.0),
        ]
        for row in rows:
            row.update(requests=10, errors=0, p99_ms=2 * row["p50_ms"], load="1.0")
        offline = {"sentences_per_s": 1000.0, "batch_ms": 50.0, "sentence_ms": 1.3, "load": "1"}
        lines, verdicts = serve_bench_report.load_lines("x", 32, offline, rows, 32, (512.4, 600.6))
        self.assertEqual(
            verdicts,
            [
                "PASS throughput with 32 clients: 90.0% of offline (target >= 85%)",
                "PASS p99 latency with 32 clients: 1.80x one batch (target <= 2x)",
                "PASS p50 latency of one client, keep-alive connection: 3.90 ms (target <= 1.5x "
                "one sentence + 2 ms = 3.95 ms)",
                "MISS p50 latency of one client, new connection: 4.10 ms (target <= 1.5x one "
                "sentence + 2 ms = 3.95 ms)",
            ],
        )
        self.assertIn(
            "Offline, batches of 32: **1000.0 sentences/s**, one batch 50.0 ms, one sentence "
            "alone 1.30 ms (load: 1).",
            lines,
        )
        self.assertIn(
            "\n| 32 | 10 | 0 | 90.0 | 180.0 | 500.0 | 50% | 1.0 | new |", "\n".join(lines)
        )
        self.assertIn(
            "Server memory after the load: 512 MiB resident (VmRSS), peak 601 MiB (VmHWM).", lines
        )


class MachineTest(unittest.TestCase):
    """The run's heading and machine come from ldr_experiments.machine (one description)."""

    def test_the_heading_is_in_utc(self):
        paris = datetime.timezone(datetime.timedelta(hours=1))
        lines = serve_bench_report.header_lines(DATE.astimezone(paris), [])
        self.assertEqual(lines, ["### Run of 2026-11-25 06:00 UTC", "", ""])

    def test_server_memory(self):
        # The server's VmRSS and VmHWM, read as every report reads a process's memory.
        server = serve_bench.Server("127.0.0.1", 1, process=mock.Mock(pid=os.getpid()))
        with mock.patch.object(machine, "process_memory_mib", return_value=(1.0, 2.0)) as read:
            self.assertEqual(server.memory(), (1.0, 2.0))
        read.assert_called_once_with(os.getpid())
        self.assertFalse(hasattr(serve_bench, "load_average"))
        self.assertFalse(hasattr(serve_bench, "memory_mib"))


class BenchmarksFileTest(unittest.TestCase):
    def test_runs_newest_first_in_their_section(self):
        text = "# Benchmarks\n\nIntro.\n\n## Training\n\nFigures.\n"
        first = serve_bench_report.add_run(text, _run()[0] + "\n")
        self.assertTrue(first.startswith(text + "\n" + serve_bench_report.SECTION + "\n\n"))
        self.assertIn(
            serve_bench_report.SECTION_INTRO + "\n\n### Run of 2026-11-25 06:00 UTC\n", first
        )
        # The next run goes first in the section; what follows the section stays.
        later = first + "\n## Horovod\n\nMore.\n"
        second = serve_bench_report.add_run(later, _run(DATE.replace(hour=7))[0])
        self.assertEqual(second.count(serve_bench_report.SECTION), 1)
        self.assertLess(
            second.index("Run of 2026-11-25 07:00"), second.index("Run of 2026-11-25 06:00")
        )
        self.assertTrue(second.endswith("\n## Horovod\n\nMore.\n"))
        self.assertEqual(second.replace(_run(DATE.replace(hour=7))[0].strip() + "\n\n", ""), later)

    def test_a_section_without_runs(self):
        text = "# B\n\n%s\n\nIntro.\n\n## Next\n" % serve_bench_report.SECTION
        updated = serve_bench_report.add_run(text, "### Run of X\n\nfigures\n")
        self.assertEqual(
            updated,
            "# B\n\n%s\n\nIntro.\n\n### Run of X\n\nfigures\n\n## Next\n"
            % serve_bench_report.SECTION,
        )

    def test_update_benchmarks_writes_the_file(self):
        import tempfile

        with tempfile.TemporaryDirectory() as directory:
            path = os.path.join(directory, "BENCHMARKS.md")
            with open(path, "w", encoding="utf-8") as f:
                f.write("# Benchmarks\n")
            serve_bench_report.update_benchmarks(path, "### Run of X\n")
            with open(path, encoding="utf-8") as f:
                self.assertIn(serve_bench_report.SECTION, f.read())
            self.assertEqual(os.listdir(directory), ["BENCHMARKS.md"])

    def test_the_repository_has_the_section(self):
        with open(os.path.join(ROOT, "BENCHMARKS.md"), encoding="utf-8") as f:
            lines = f.read().splitlines()
        self.assertTrue(serve_bench_report.SECTION in lines, "no serving section in BENCHMARKS.md")
        start = lines.index(serve_bench_report.SECTION)
        self.assertTrue(
            lines[start + 4].startswith(serve_bench_report.RUN_HEADING), lines[start + 4]
        )


class CommandLineTest(unittest.TestCase):
    def test_options(self):
        args, argv = serve_bench.parse_args(
            ["--model_dir", "m", "--sentences", "s", "--", "--lazy"]
        )
        self.assertEqual(args.parts, list(serve_bench.PARTS))
        self.assertEqual((args.server_options, argv[-2:]), (["--lazy"], ["--", "--lazy"]))
        args, _ = serve_bench.parse_args(["--url", "http://127.0.0.1:1", "--sentences", "s"])
        self.assertEqual(args.parts, ["load"])
        for argv in (
            ["--sentences", "s"],
            ["--url", "http://h:1", "--sentences", "s", "--parts", "startup"],
            ["--url", "http://h:1", "--sentences", "s", "--", "--lazy"],
        ):
            with self.assertRaises(SystemExit):
                serve_bench.parse_args(argv)


if __name__ == "__main__":
    unittest.main()
