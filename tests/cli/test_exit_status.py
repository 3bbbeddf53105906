"""Every console script exits non-zero on every kind of failure (issue 56, item 2).

Each console script's ``main`` is run as the wrapper pip writes runs it (``sys.exit(main())``)
with its work replaced by one that fails: a user error (2), a full disk (1, as
``ldr-translate --output`` on a full disk was: it exited 0), Ctrl-C (130) and any other
exception (Python's traceback and 1). The scripts are read from the installed distribution's
entry points, so a new command is checked without a change here.
"""

import contextlib
import errno
import importlib.metadata
import io
import os
import shutil
import sys
import tempfile
import unittest
from unittest import mock

from parameterized import parameterized

from ldr_experiments import cli as experiments_cli
from ldr_opennmt import errors
from ldr_opennmt.cli import launch

#: Arguments that each command parses before its work starts (outside run_main).
ARGV = {
    "ldr-export": ["ctranslate2", "--config", "run.yml", "--output_dir", "out"],
    "ldr-experiments": ["demo"],
}


def console_scripts():
    """The ldr-opennmt distribution's console scripts: ``[(name, entry point)]``."""
    distribution = importlib.metadata.distribution("ldr-opennmt")
    return sorted(
        (ep.name, ep) for ep in distribution.entry_points if ep.group == "console_scripts"
    )


FAILURES = [
    ("user_error", errors.UserError("data.en:3: unknown domain label 'x'"), errors.EXIT_STATUS),
    (
        "full_disk",
        OSError(errno.ENOSPC, "No space left on device", "/full/out.txt"),
        errors.DISK_FULL_STATUS,
    ),
    ("interrupted", KeyboardInterrupt(), errors.INTERRUPTED_STATUS),
]


def _run_as_console_script(entry_point, failure):
    """Runs the script's main with its work replaced by one raising :obj:`failure`:
    ``(exit status, stderr)``."""
    real_run_main = errors.run_main

    def failing_run_main(prog, main_fn, *args, **kwargs):
        def fail(*_, **__):
            raise failure

        return real_run_main(prog, fail)

    main = entry_point.load()
    stderr = io.StringIO()
    with mock.patch.object(errors, "run_main", failing_run_main), contextlib.redirect_stderr(
        stderr
    ), mock.patch.object(sys, "argv", [entry_point.name] + ARGV.get(entry_point.name, [])):
        try:
            sys.exit(main(ARGV.get(entry_point.name, [])))
        except SystemExit as e:
            code = e.code
    return code, stderr.getvalue()


class ExitStatusTest(unittest.TestCase):
    def test_every_command_is_checked(self):
        names = [name for name, _ in console_scripts()]
        self.assertGreaterEqual(len(names), 8, names)
        for name in ("ldr-main", "ldr-translate", "ldr-serve", "ldr-data", "ldr-experiments"):
            self.assertIn(name, names)

    @parameterized.expand(FAILURES)
    def test_every_failure_exits_non_zero(self, kind, failure, expected):
        for name, entry_point in console_scripts():
            with self.subTest(command=name, failure=kind):
                code, stderr = _run_as_console_script(entry_point, failure)
                self.assertEqual(code, expected, stderr)
                lines = stderr.splitlines()
                self.assertEqual(len(lines), 1, stderr)
                self.assertRegex(lines[0], r"^[\w\- /.]+: (error: |interrupted$)")
                self.assertNotIn("Traceback", stderr)

    def test_ctrl_c_while_a_command_imports_is_one_line(self):
        # Issue 71 (7): Ctrl-C in the first seconds of a command, while TensorFlow imports,
        # printed the import's traceback (26 to 57 lines).
        folder = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, folder)
        with open(os.path.join(folder, "slow_to_import.py"), "w") as f:
            f.write("raise KeyboardInterrupt\n")
        sys.path.insert(0, folder)
        self.addCleanup(sys.path.remove, folder)
        stderr = io.StringIO()
        with contextlib.redirect_stderr(stderr):
            code = launch.launch("ldr-main", "slow_to_import", [])
        self.assertEqual((code, stderr.getvalue()), (130, "ldr-main: interrupted\n"))
        # Every console script of the training environment starts there.
        scripts = dict(console_scripts())
        for name in ("ldr-main", "ldr-data", "ldr-eval", "ldr-analyze", "ldr-export"):
            self.assertEqual(
                scripts[name].value, "ldr_opennmt.cli.launch:" + name.replace("-", "_")
            )
        with mock.patch.object(
            importlib, "import_module", side_effect=KeyboardInterrupt
        ), contextlib.redirect_stderr(io.StringIO()) as stderr:
            code = experiments_cli.main(["tables"])
        self.assertEqual((code, stderr.getvalue()), (130, "ldr-experiments tables: interrupted\n"))

    def test_an_unexpected_error_is_not_swallowed(self):
        # Python's own handling: the traceback and exit status 1 (never 0).
        for name, entry_point in console_scripts():
            with self.subTest(command=name):
                with self.assertRaises(RuntimeError):
                    _run_as_console_script(entry_point, RuntimeError("bug"))


if __name__ == "__main__":
    unittest.main()
