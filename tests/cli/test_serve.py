"""``ldr-serve``'s command line: options checked, and the port, before anything is loaded."""

import socket
import unittest

from ldr_opennmt.cli import serve as serve_cli
from tests import helpers


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
        ):
            helpers.assert_cli_error(self, serve_cli.main, ["--model_dir", "x"] + argv, regex)
        args = serve_cli.parse_args(["--model_dir", "x"])
        self.assertEqual(args.allowed_hosts, ["localhost", "127.0.0.1", "::1"])
        self.assertEqual(
            (args.cors_origins, args.compute_type, args.access_log), ([], "default", True)
        )


if __name__ == "__main__":
    unittest.main()
