"""``ldr-serve``'s command line: options checked, and the port, before anything is loaded;
``--help`` of ``ldr-serve`` and ``ldr-translate`` (issue 55 item 7): the usage, and nothing of
TensorFlow, in the training environment and without TensorFlow."""

import os
import socket
import subprocess
import sys
import unittest

from ldr_opennmt.cli import serve as serve_cli
from ldr_opennmt.serving import server as server_lib
from tests import helpers
from tests.serving.no_tensorflow import run_without_tensorflow


class ServeCommandLineTest(unittest.TestCase):
    def test_a_port_in_use_is_one_line_before_anything_is_loaded(self):
        # Another server listens on the port. The model directory does not exist: the
        # error is about the port, so nothing was loaded first.
        with socket.socket() as holder:
            holder.bind(("127.0.0.1", 0))
            holder.listen(1)
            port = holder.getsockname()[1]
            helpers.assert_cli_error(
                self,
                serve_cli.main,
                ["--model_dir", "/nonexistent/export", "--port", str(port)],
                r"^--port %d: 127.0.0.1:%d is already in use \(another ldr-serve\?\)"
                % (port, port),
            )

    def test_a_timeout_shorter_than_the_batch_wait_is_refused(self):
        helpers.assert_cli_error(
            self,
            serve_cli.main,
            ["--model_dir", "x", "--timeout_s", "0.01", "--max_wait_ms", "50"],
            r"^--timeout_s 0.01 is not longer than --max_wait_ms 50 \(0.05 s\): every request",
        )

    def test_serving_options(self):
        for argv, regex in (
            (["--read_timeout_s", "0"], "^--read_timeout_s must be > 0, got 0.0$"),
            (["--limit_concurrency", "0"], "^--limit_concurrency must be >= 1, got 0$"),
            (["--allowed_hosts", "a*b"], "^--allowed_hosts: .a.b.: a wildcard must be"),
            # Round six: origins no browser sends were accepted (they let no page in).
            (
                ["--cors_origins", "https://app.example/"],
                r'^--cors_origins: "https://app.example/": a trailing slash \(browsers send'
                r' "https://app.example"\)$',
            ),
            (["--cors_origins", "app.example"], r'^--cors_origins: "app.example": no scheme'),
            (
                ["--cors_origins", "https://ok.example", "ftp://app.example"],
                r'^--cors_origins: "ftp://app.example": not http\(s\)://HOST\[:PORT\]',
            ),
            (["--cors_origins", "https://a.example/app"], r"without a path$"),
        ):
            helpers.assert_cli_error(self, serve_cli.main, ["--model_dir", "x"] + argv, regex)
        for origins in (
            ["*"],
            ["https://app.example", "http://127.0.0.1:8080", "http://[::1]:3000"],
        ):
            server_lib.Options("x", cors_origins=origins).check()
        args = serve_cli.parse_args(["--model_dir", "x"])
        self.assertEqual(args.allowed_hosts, ["localhost", "127.0.0.1", "::1"])
        self.assertEqual(
            (args.cors_origins, args.compute_type, args.access_log), ([], "default", True)
        )


class HelpTest(unittest.TestCase):
    def test_help_is_the_usage_and_nothing_of_tensorflow(self):
        # As a user runs them: without run/setup_env.sh's TF_CPP_MIN_LOG_LEVEL.
        env = {k: v for k, v in os.environ.items() if k not in ("TF_CPP_MIN_LOG_LEVEL",)}
        for name in ("serve", "translate"):
            code = "from ldr_opennmt.cli import %s\n%s.main(['--help'])\n" % (name, name)
            with self.subTest(command=name):
                result = subprocess.run(
                    [sys.executable, "-c", code], capture_output=True, text=True, env=env
                )
                self.assertEqual(result.returncode, 0, result.stderr)
                self.assertTrue(result.stdout.startswith("usage: ldr-%s " % name), result.stdout)
                self.assertEqual(result.stderr, "")
                # Where TensorFlow cannot be imported (the serving runtime): the same usage.
                status, stdout, stderr = run_without_tensorflow(code, env=env)
                self.assertEqual((status, stdout, stderr), (0, result.stdout, ""))


if __name__ == "__main__":
    unittest.main()
