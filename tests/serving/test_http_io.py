"""``ldr-serve``'s application under a real uvicorn server on 127.0.0.1 (a thread, a fake
backend, the HTTP protocol ``ldr-serve`` runs): clients that send half a body, bodies over
the limit, clients that go away, access logs, and the edges of HTTP (compressed bodies, both
framings, headers over the limit, what is not HTTP), sent on raw sockets, which no client
library would send."""

import gzip
import json
import logging
import socket
import time
import unittest
from unittest import mock

from ldr_opennmt.serving import http_io, protocol
from ldr_opennmt.serving.backend_kinds import RequestError
from tests.serving import fake_backend, raw_http

LiveServer = fake_backend.LiveServer


class SlowClientsTest(unittest.TestCase):
    def _half_bodies(self, port, count):
        """:obj:`count` clients that send their headers and half their body, then nothing:
        the statuses they get and the answers, once the server has closed each."""
        socks = [raw_http.request(port, b'{"sentences": ', declared=100) for _ in range(count)]
        answers = []
        for sock in socks:
            answers.append(raw_http.read_all(sock))  # Returns once the server has closed it.
            sock.close()
        return [raw_http.status(a) for a in answers], answers

    def test_half_bodies_time_out_and_connections_are_bounded(self):
        # Each client that sends half a body gets a 408 after --read_timeout_s and its
        # connection is closed; past --limit_concurrency connections, uvicorn answers 503
        # at once; the server then answers the next client.
        application = fake_backend.app(read_timeout_s=1.0, limit_concurrency=12)
        with LiveServer(application) as live:
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
            sock = raw_http.request(live.port, body)
            answer = sock.recv(65536)
            sock.close()
            self.assertEqual(raw_http.status(answer), 200, answer)

    def test_a_body_over_the_limit_gets_its_413(self):
        # Content-Length says 4 MB, more than --max_request_bytes: the client sends it all
        # and reads the 413 (the server reads and drops the body instead of closing the
        # connection under the client, which would see a broken pipe).
        application = fake_backend.app(max_request_bytes=1000)
        with LiveServer(application) as live:
            size = 4 << 20
            sock = raw_http.request(live.port, declared=size)
            chunk = b" " * 65536
            for _ in range(size // len(chunk)):
                sock.sendall(chunk)
            answer = raw_http.read_all(sock)
            sock.close()
            self.assertEqual(raw_http.status(answer), 413, answer[:200])
            self.assertIn(b'"body: 4194304 bytes, more than the limit of 1000"', answer)
            self.assertIn(b"connection: close", answer.lower())

    def test_a_client_that_goes_away_mid_body_leaves_no_traceback(self):
        application = fake_backend.app(read_timeout_s=5.0)
        with LiveServer(application) as live:
            with self.assertNoLogs("uvicorn.error", level="ERROR"):
                with self.assertLogs("ldr_opennmt.serving", level="INFO") as logs:
                    for _ in range(3):
                        sock = raw_http.request(live.port, b'{"sentences": ["a', declared=500)
                        time.sleep(0.1)
                        sock.close()
                    time.sleep(0.5)
            self.assertIn("closed its connection before sending its whole body", logs.output[0])
            registry = application.state.metrics.registry
            self.assertEqual(registry.get_sample_value("ldr_serve_clients_gone_total"), 3)
            # Still serving.
            sock = raw_http.request(live.port, json.dumps({"sentences": ["a b"]}).encode())
            self.assertEqual(raw_http.status(sock.recv(65536)), 200)
            sock.close()

    def test_access_log_lines_hold_no_body(self):
        live = LiveServer(fake_backend.app(), log_level="info")
        with self.assertLogs("uvicorn.access", level="INFO") as logs:
            with live:
                body = json.dumps({"sentences": ["secret words here"]}).encode()
                sock = raw_http.request(live.port, body)
                self.assertEqual(raw_http.status(sock.recv(65536)), 200)
                sock.close()
                time.sleep(0.2)
        lines = [r.getMessage() for r in logs.records]
        self.assertTrue(any("POST /translate" in line for line in lines), lines)
        self.assertFalse(any("secret" in line for line in lines), lines)
        logging.getLogger("uvicorn.access").handlers.clear()


class RequestErrorTest(unittest.TestCase):
    def test_a_503_says_when_to_retry(self):
        answer = http_io.request_error(RequestError(503, "overloaded: retry later"))
        self.assertEqual(answer.status_code, 503)
        self.assertEqual(answer.headers["retry-after"], str(http_io.RETRY_AFTER_S))
        self.assertEqual(json.loads(answer.body), {"error": "overloaded: retry later"})
        self.assertNotIn("retry-after", http_io.request_error(RequestError(422, "x")).headers)


class HttpEdgesTest(unittest.TestCase):
    """Requests that a client library would not send, on raw sockets."""

    @classmethod
    def setUpClass(cls):
        cls.live = LiveServer(fake_backend.app()).__enter__()
        cls.port = cls.live.port

    @classmethod
    def tearDownClass(cls):
        cls.live.__exit__(None, None, None)

    def assert_still_serving(self):
        answer = raw_http.send(
            self.port,
            raw_http.head("Content-Length: %d" % len(raw_http.BODY), "Connection: close")
            + raw_http.BODY,
        )
        self.assertEqual(raw_http.status(answer), 200, answer[:200])

    def test_a_compressed_body_is_a_415_naming_its_encoding(self):
        # Was: 400 "body: not UTF-8 (byte 0x8b at byte 1)", the gzip bytes read as text.
        compressed = gzip.compress(raw_http.BODY)
        for coding, named in (("gzip", "gzip"), ("br", "br"), ("identity, GZIP", "gzip")):
            answer = raw_http.send(
                self.port,
                raw_http.head(
                    "Content-Encoding: %s" % coding,
                    "Content-Length: %d" % len(compressed),
                    "Connection: close",
                )
                + compressed,
            )
            status, headers, message = raw_http.error(answer)
            self.assertEqual(status, 415, answer)
            self.assertEqual(
                message,
                'Content-Encoding "%s" is not accepted: send the body uncompressed' % named,
            )
            self.assertEqual(headers["accept-encoding"], "identity")
        answer = raw_http.send(
            self.port,
            raw_http.head(
                "Content-Encoding: identity",
                "Content-Length: %d" % len(raw_http.BODY),
                "Connection: close",
            )
            + raw_http.BODY,
        )
        self.assertEqual(raw_http.status(answer), 200, answer[:200])

    def test_content_length_with_transfer_encoding_is_refused_and_closed(self):
        # The shape of request smuggling: a proxy that frames by Content-Length forwards one
        # request, a server that frames by the chunks reads two. Was: two answers (200, then
        # the 404 of the request hidden in the body).
        chunked = b"%x\r\n%s\r\n0\r\n\r\n" % (len(raw_http.BODY), raw_http.BODY)
        smuggled = (
            chunked + b"GET /nowhere HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
        )
        for framing in (
            ("Content-Length: %d" % len(smuggled), "Transfer-Encoding: chunked"),
            ("Transfer-Encoding: chunked", "Content-Length: %d" % len(smuggled)),
        ):
            answer = raw_http.send(self.port, raw_http.head(*framing) + smuggled)
            self.assertEqual(answer.count(b"HTTP/1.1 "), 1, answer)  # Not the smuggled one.
            status, headers, message = raw_http.error(answer)
            self.assertEqual(status, 400, answer)
            self.assertEqual(message, protocol.BOTH_FRAMINGS)
            self.assertEqual(headers["connection"], "close")
        # Chunks alone are still a request.
        answer = raw_http.send(
            self.port, raw_http.head("Transfer-Encoding: chunked", "Connection: close") + chunked
        )
        self.assertEqual(raw_http.status(answer), 200, answer[:200])

    def test_headers_over_the_limit_get_a_431_not_a_reset(self):
        # Was: a connection reset and no status (uvicorn answered 400 and closed the
        # connection with the rest of the headers unread).
        for size in (200 << 10, 2 << 20):
            header = "X-Big: " + "a" * size
            answer = raw_http.send(
                self.port,
                raw_http.head(header, "Content-Length: %d" % len(raw_http.BODY)) + raw_http.BODY,
            )
            status, headers, message = raw_http.error(answer)
            self.assertEqual(status, 431, answer[:300])
            self.assertEqual(message, protocol.head_too_large(protocol.MAX_HEAD_BYTES))
            self.assertEqual(headers["connection"], "close")
            self.assertEqual(headers["content-type"], "application/json")
        # Large headers under the limit are served (h11 alone stops at 16 KiB).
        header = "Cookie: " + "a" * (40 << 10)
        answer = raw_http.send(
            self.port,
            raw_http.head(header, "Content-Length: %d" % len(raw_http.BODY), "Connection: close")
            + raw_http.BODY,
        )
        self.assertEqual(raw_http.status(answer), 200, answer[:200])

    def test_what_is_not_http_gets_the_error_shape(self):
        # Was: uvicorn's plain-text 400 "Invalid HTTP request received.".
        status, headers, message = raw_http.error(
            raw_http.send(self.port, b"NOT HTTP AT ALL\r\n\r\n")
        )
        self.assertEqual(status, 400)
        self.assertRegex(message, r"^not a valid HTTP/1.1 request \(illegal request line")
        self.assertEqual(headers["connection"], "close")
        status, _, message = raw_http.error(
            raw_http.send(self.port, raw_http.head("Transfer-Encoding: gzip"))
        )
        self.assertEqual(status, 501)
        self.assertIn("chunked", message)
        self.assert_still_serving()

    def test_a_body_that_breaks_its_chunked_framing_gets_one_answer(self):
        # Mid-body, before the application answers: the protocol's 400, the application stops.
        head = raw_http.head("Transfer-Encoding: chunked")
        with self.assertLogs("ldr_opennmt.serving", level="INFO"):
            status, headers, message = raw_http.error(raw_http.send(self.port, head + b"zz\r\n"))
        self.assertEqual(status, 400)
        self.assertRegex(message, r"^not a valid HTTP/1.1 request \(")
        self.assertEqual(headers["connection"], "close")
        # After the application's answer (a 415 sent before the body): no second answer.
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=10)
        sock.sendall(raw_http.head("Transfer-Encoding: chunked", "Content-Encoding: gzip"))
        answer = sock.recv(65536)
        while not answer.endswith(b"}"):  # The head and the body may come apart.
            answer += sock.recv(65536)
        self.assertEqual(raw_http.status(answer), 415, answer)
        sock.sendall(b"zz\r\n")
        self.assertEqual(raw_http.read_all(sock), b"")
        sock.close()
        self.assert_still_serving()

    def test_a_refused_connection_is_closed_by_the_server(self):
        # The client reads the answer and the end of it (FIN), and the server closes the
        # connection after LINGER_S even if the client does neither.
        with mock.patch.object(protocol, "LINGER_S", 0.2):
            sock = socket.create_connection(("127.0.0.1", self.port), timeout=10)
            sock.sendall(raw_http.head("X-Big: " + "a" * (100 << 10)))
            self.assertEqual(
                raw_http.status(raw_http.read_all(sock)), 431
            )  # Returns at the server's FIN.
            client = sock.getsockname()

            def still_open():
                connections = list(self.live.server.server_state.connections)
                return any(c.client == client for c in connections)

            self.assertTrue(still_open())  # The client has not closed it.
            deadline = time.monotonic() + 5
            while still_open():
                self.assertLess(time.monotonic(), deadline, "the connection is still open")
                time.sleep(0.05)
            sock.close()


if __name__ == "__main__":
    unittest.main()
