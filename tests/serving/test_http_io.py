"""``ldr-serve``'s application under a real uvicorn server on 127.0.0.1 (a thread, a fake
backend): clients that send half a body, bodies over the limit, clients that go away,
and access logs."""

import json
import logging
import socket
import time
import unittest

from tests.serving import fake_backend


def _request(port, body=b"", declared=None, path="/translate"):
    """Opens a connection and sends a POST's headers (Content-Length :obj:`declared`, or
    the body's) and :obj:`body`."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    length = len(body) if declared is None else declared
    head = (
        "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        "Content-Length: %d\r\n\r\n" % (path, length)
    )
    sock.sendall(head.encode("ascii") + body)
    return sock


def _read_all(sock):
    """Everything the server sends until it closes the connection."""
    chunks = []
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def _status(answer):
    return int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/1.1 ") else None


class SlowClientsTest(unittest.TestCase):
    def _half_bodies(self, port, count):
        """:obj:`count` clients that send their headers and half their body, then nothing:
        the statuses they get and the answers, once the server has closed each."""
        socks = [_request(port, b'{"sentences": ', declared=100) for _ in range(count)]
        answers = []
        for sock in socks:
            answers.append(_read_all(sock))  # Returns once the server has closed it.
            sock.close()
        return [_status(a) for a in answers], answers

    def test_half_bodies_time_out_and_connections_are_bounded(self):
        # Each client that sends half a body gets a 408 after --read_timeout_s and its
        # connection is closed; past --limit_concurrency connections, uvicorn answers 503
        # at once; the server then answers the next client.
        application = fake_backend.app(read_timeout_s=1.0, limit_concurrency=12)
        with fake_backend.LiveServer(application) as live:
            start = time.monotonic()
            statuses, answers = self._half_bodies(live.port, 8)
            self.assertEqual(statuses, [408] * 8)
            self.assertLess(time.monotonic() - start, 5)
            self.assertEqual(
                json.loads(answers[0].split(b"\r\n\r\n", 1)[1]),
                {"error": "body: not received within 1 s (--read_timeout_s)"},
            )
            start = time.monotonic()
            statuses, _ = self._half_bodies(live.port, 20)
            self.assertLess(time.monotonic() - start, 5)
            self.assertTrue(set(statuses) <= {408, 503}, statuses)
            self.assertIn(503, statuses)
            body = json.dumps({"sentences": ["a b"]}).encode()
            sock = _request(live.port, body)
            answer = sock.recv(65536)
            sock.close()
            self.assertEqual(_status(answer), 200, answer)

    def test_a_body_over_the_limit_gets_its_413(self):
        # Content-Length says 4 MB, more than --max_request_bytes: the client sends it all
        # and reads the 413 (the server reads and drops the body instead of closing the
        # connection under the client, which would see a broken pipe).
        application = fake_backend.app(max_request_bytes=1000)
        with fake_backend.LiveServer(application) as live:
            size = 4 << 20
            sock = _request(live.port, declared=size)
            chunk = b" " * 65536
            for _ in range(size // len(chunk)):
                sock.sendall(chunk)
            answer = _read_all(sock)
            sock.close()
            self.assertEqual(_status(answer), 413, answer[:200])
            self.assertIn(b'"body: 4194304 bytes, more than the limit of 1000"', answer)
            self.assertIn(b"connection: close", answer.lower())

    def test_a_client_that_goes_away_mid_body_leaves_no_traceback(self):
        application = fake_backend.app(read_timeout_s=5.0)
        with fake_backend.LiveServer(application) as live:
            with self.assertNoLogs("uvicorn.error", level="ERROR"):
                with self.assertLogs("ldr_opennmt.serving", level="INFO") as logs:
                    for _ in range(3):
                        sock = _request(live.port, b'{"sentences": ["a', declared=500)
                        time.sleep(0.1)
                        sock.close()
                    time.sleep(0.5)
            self.assertIn("closed its connection before sending its whole body", logs.output[0])
            # Still serving.
            sock = _request(live.port, json.dumps({"sentences": ["a b"]}).encode())
            self.assertEqual(_status(sock.recv(65536)), 200)
            sock.close()

    def test_access_log_lines_hold_no_body(self):
        live = fake_backend.LiveServer(fake_backend.app(), log_level="info")
        with self.assertLogs("uvicorn.access", level="INFO") as logs:
            with live:
                body = json.dumps({"sentences": ["secret words here"]}).encode()
                sock = _request(live.port, body)
                self.assertEqual(_status(sock.recv(65536)), 200)
                sock.close()
                time.sleep(0.2)
        lines = [r.getMessage() for r in logs.records]
        self.assertTrue(any("POST /translate" in line for line in lines), lines)
        self.assertFalse(any("secret" in line for line in lines), lines)
        logging.getLogger("uvicorn.access").handlers.clear()


if __name__ == "__main__":
    unittest.main()
