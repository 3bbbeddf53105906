"""Raw HTTP/1.1 on sockets for the serving tests: what no client library would send."""

import json
import socket


def request(port, body=b"", declared=None, path="/translate"):
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


def read_all(sock):
    """Everything the server sends until it closes the connection."""
    chunks = []
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def status(answer):
    return int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/1.1 ") else None


def send(port, data):
    """Everything the server answers to :obj:`data` (raw bytes) until it closes the
    connection (a reset fails the test)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        sock.sendall(data)
        return read_all(sock)
    finally:
        sock.close()


def head(*headers, path="/translate"):
    """A POST's request line and :obj:`headers`, with its Host and Content-Type."""
    lines = ["POST %s HTTP/1.1" % path, "Host: 127.0.0.1", "Content-Type: application/json"]
    return ("\r\n".join(lines + list(headers)) + "\r\n\r\n").encode("latin-1")


def error(answer):
    """The status, the lower-case headers and the ``error`` of a JSON error answer."""
    head, body = answer.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.lower().split(": ", 1) for line in lines[1:])
    value = json.loads(body)
    return status(answer), headers, value["error"] if list(value) == ["error"] else value


BODY = json.dumps({"sentences": ["a b"]}).encode()
