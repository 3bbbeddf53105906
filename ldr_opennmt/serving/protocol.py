"""The HTTP protocol of ``ldr-serve``, under the application: uvicorn's h11 protocol
(``ldr-serve`` runs it whatever is installed: :func:`ldr_opennmt.serving.app.server_config`),
with what it refuses before the application answered in the application's error shape.

* **Refusals before the application**, each ``{"error": ...}`` with ``Connection: close``: a
  request line and headers over :data:`MAX_HEAD_BYTES` (431), ``Content-Length`` together with
  ``Transfer-Encoding`` (400: the shape of request smuggling behind a proxy, RFC 9112 section
  6.3), a transfer coding other than chunked (501), what is not HTTP/1.1 (400), and a request
  line and headers that do not arrive within ``--read_timeout_s`` (408: a client that sends
  half a head, or nothing, does not hold its connection). The connection is then closed without
  a reset: the answer and a FIN are sent, and what the client still sends is read and dropped
  for up to :data:`LINGER_S`, so that a client still sending sees the answer.
* **Requests at once** (``--limit_concurrency``): a request counts from its head to its answer;
  past the limit it is answered 503 ``{"error": "busy: ..."}`` with ``Retry-After`` and the
  connection is closed (``GET /metrics`` and ``GET /health`` are answered whatever the load).
  uvicorn's own limit, which this replaces, counted every open connection too: a few dozen
  connections that never sent a request shut every client out (issue 71).
* **Connections waiting for a request** (a new one, or a kept-alive one between requests) are
  capped apart, per client address and in all (:class:`WaitingConnections`): past a cap, the
  oldest waiting one is closed (408) to make room, so a new connection is always read.
* Every refusal is written in the log (INFO, ``refused by the HTTP protocol: STATUS MESSAGE``)
  and counted in ``/metrics`` (``ldr_serve_protocol_refusals_total{status, reason}``).

An answer leaves in one ``send()`` (its status line and headers are held until its body's first
bytes: :class:`_OneWrite`) on a socket with ``TCP_NODELAY``: written in two without it, the body
of an answer on a kept-alive connection waited for the client's delayed ACK of the head (Nagle's
algorithm: 40 ms on Linux; issue 58). Each request in progress is counted in the application's
:class:`~ldr_opennmt.serving.batching.Activity`, so that a batch does not wait for requests that
do not exist.
"""

import collections
import http
import socket

from uvicorn.protocols.http import h11_impl

from ldr_opennmt.serving import api_models, http_io
from ldr_opennmt.serving.backend_kinds import RequestError
from ldr_opennmt.serving.http_io import DRAIN_LIMIT, JSON, LOGGER

#: uvicorn's h11, taken from uvicorn: without the serve extra, the module missing is uvicorn,
#: which ``ldr-serve`` names.
h11 = h11_impl.h11

#: The most bytes of a request line and its header fields (431 past it).
MAX_HEAD_BYTES = 64 << 10
#: The most seconds a connection refused before the application stays open after its answer,
#: reading and dropping what the client still sends (closed at once with unread data, the
#: connection would be reset and the client would lose the answer).
LINGER_S = 5.0
#: The attribute of uvicorn's configuration that gives :class:`H11Protocol` its head timeout.
HEAD_TIMEOUT_ATTRIBUTE = "ldr_head_timeout_s"

#: The requests answered past ``--limit_concurrency`` (cheap, and what shows why a server is
#: busy).
UNLIMITED = frozenset({("GET", "/metrics"), ("GET", "/health")})
#: The ``reason`` labels of ``ldr_serve_protocol_refusals_total`` (bounded).
REASONS = (
    "busy",
    "not_http",
    "both_framings",
    "chunk_line_too_long",
    "head_too_large",
    "transfer_coding",
    "head_timeout",
    "make_room",
)


def busy(limit):
    """The message of a 503: :obj:`limit` requests are being answered already."""
    return "busy: %d requests at once already (--limit_concurrency): retry later" % limit


def head_too_large(limit):
    """The message of a 431: a request line and headers of more than :obj:`limit` bytes."""
    return "headers: more than the limit of %d bytes (the request line and header fields)" % limit


def head_timed_out(timeout_s):
    """The message of a 408: the request line and headers did not arrive in time."""
    return "headers: not received within %g s (--read_timeout_s)" % timeout_s


#: The 400 of a request with both framings.
BOTH_FRAMINGS = (
    "headers: Content-Length and Transfer-Encoding together: a request has one or the other "
    "(RFC 9112, section 6.3)"
)


def _head_bytes(request):
    """About the bytes of :obj:`request`'s request line and header fields (as parsed)."""
    size = len(request.method) + len(request.target) + len(b"  HTTP/1.1\r\n\r\n")
    return size + sum(len(name) + len(value) + 4 for name, value in request.headers)


class _Connection(h11.Connection):
    """An ``h11.Connection`` of a server that also refuses a request with both framings and a
    head over its limit (when the whole head came in one read, h11, which bounds what it holds
    of an incomplete head, lets it through); :attr:`refusal` says why it raised."""

    def __init__(self, max_head_bytes):
        super().__init__(h11.SERVER, max_incomplete_event_size=max_head_bytes)
        self.max_head_bytes = max_head_bytes
        #: ``(status, message)`` of the last :class:`h11.RemoteProtocolError` raised.
        self.refusal = None
        #: Its ``reason`` label in ``/metrics`` (one of :data:`REASONS`).
        self.reason = None
        #: Whether it was raised in the body of a request already given to the application.
        self.refused_in_body = False

    def next_event(self):
        between_requests = self.their_state is h11.IDLE
        self.refused_in_body = not between_requests
        try:
            event = super().next_event()
        except h11.RemoteProtocolError as e:
            if e.error_status_hint == 431 and between_requests:
                self.refusal = 431, head_too_large(self.max_head_bytes)
                self.reason = "head_too_large"
            elif e.error_status_hint == 431:  # A chunk size line or trailers, mid-body.
                self.refusal = 400, "body: a chunked framing line of more than %d bytes" % (
                    self.max_head_bytes
                )
                self.reason = "chunk_line_too_long"
            else:
                self.refusal = e.error_status_hint, "not a valid HTTP/1.1 request (%s)" % (
                    api_models.escape(str(e))[:200]
                )
                self.reason = "transfer_coding" if e.error_status_hint == 501 else "not_http"
            raise
        if isinstance(event, h11.Request):
            names = {name for name, _ in event.headers}
            refusal = None
            if b"content-length" in names and b"transfer-encoding" in names:
                refusal = 400, BOTH_FRAMINGS
                self.reason = "both_framings"
            elif _head_bytes(event) > self.max_head_bytes:
                refusal = 431, head_too_large(self.max_head_bytes)
                self.reason = "head_too_large"
            if refusal is not None:
                self.refusal = refusal
                raise h11.RemoteProtocolError(refusal[1], refusal[0])
        return event


def _raw_answer(status, message, default_headers):
    """The bytes of an ``{"error": message}`` answer that closes its connection."""
    body = http_io.error(status, message, scrub=False).body
    lines = [b"HTTP/1.1 %d %s" % (status, http.HTTPStatus(status).phrase.encode("ascii"))]
    lines += [name + b": " + value for name, value in default_headers]
    lines += [
        b"content-type: " + JSON.encode("ascii"),
        b"content-length: %d" % len(body),
        b"connection: close",
    ]
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


def set_nodelay(transport):
    """Sets ``TCP_NODELAY`` on :obj:`transport`'s socket, if it is TCP.

    asyncio sets it only on sockets created with ``proto=IPPROTO_TCP``; a socket created with
    ``socket.socket(family, SOCK_STREAM)`` (:func:`ldr_opennmt.serving.app.bind`) has
    ``proto`` 0, and so have the sockets it accepts.

    Returns:
      Whether it is set.
    """
    sock = transport.get_extra_info("socket")
    if sock is None or sock.family not in (socket.AF_INET, socket.AF_INET6):
        return False
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    except OSError:
        return False
    return True


class _OneWrite:
    """The transport as one response cycle of uvicorn sees it: the status line and headers of
    its answer are held until the body's first bytes, so that an answer goes out in one
    ``send()`` (uvicorn writes them apart), or until the end of the event loop's iteration
    (a streamed body whose first bytes come later). Everything else is the transport's."""

    def __init__(self, transport, cycle, loop):
        self._transport = transport
        self._cycle = cycle
        self._loop = loop
        self._held = None
        self._head_seen = False

    def write(self, data):
        if self._held is not None:
            data, self._held = self._held + data, None
        elif self._cycle.response_started and not self._head_seen:
            # The head (a 100 Continue is written before the response starts: not held).
            self._head_seen = True
            self._held = data
            self._loop.call_soon(self.flush)
            return
        self._transport.write(data)

    def flush(self):
        """Writes the head held, if any."""
        if self._held is not None:
            data, self._held = self._held, None
            self._transport.write(data)

    def writelines(self, data):
        self.write(b"".join(data))

    def write_eof(self):
        self.flush()
        self._transport.write_eof()

    def close(self):
        self.flush()
        self._transport.close()

    def abort(self):
        self._held = None
        self._transport.abort()

    def __getattr__(self, name):
        return getattr(self._transport, name)


def _app_state(config, name):
    """The attribute :obj:`name` of the state of the application that :obj:`config` serves
    (set by :func:`ldr_opennmt.serving.app.create_app`), or ``None``."""
    return getattr(getattr(config.app, "state", None), name, None)


class WaitingConnections:
    """The connections of a server that wait for a request (new ones, and kept-alive ones
    between requests), capped per client address and in all.

    A connection that arrives past a cap makes room: the oldest waiting connection of its
    address (past :attr:`per_client`), or of all (past :attr:`total`), is closed with a 408.
    A new connection is thus always read, and a client that opens connections and sends nothing
    holds at most :attr:`per_client` of them, however long each may wait (``--read_timeout_s``).

    Args:
      per_client: Most waiting connections of one client address (``--max_waiting_per_client``).
      total: Most waiting connections in all (``--max_waiting_connections``).
    """

    def __init__(self, per_client, total):
        self.per_client = per_client
        self.total = total
        self._all = collections.OrderedDict()  # Protocol: address, oldest first.
        self._by_address = {}  # Address: OrderedDict of its protocols, oldest first.

    def __len__(self):
        return len(self._all)

    def add(self, protocol, address):
        """Counts :obj:`protocol` (of client :obj:`address`) as waiting, if not yet, making
        room first when a cap is reached."""
        if protocol in self._all:
            return
        same = self._by_address.setdefault(address, collections.OrderedDict())
        if len(same) >= self.per_client:
            oldest = next(iter(same))
            cap = "--max_waiting_per_client %d, from %s" % (self.per_client, address)
        elif len(self._all) >= self.total:
            oldest = next(iter(self._all))
            cap = "--max_waiting_connections %d" % self.total
        else:
            oldest = None
        if oldest is not None:
            self.discard(oldest)
            oldest.make_room(cap)
        self._all[protocol] = address
        same[protocol] = None

    def discard(self, protocol):
        """No longer counts :obj:`protocol` (a request came, or it is closing)."""
        address = self._all.pop(protocol, None)
        if address is None:
            return
        same = self._by_address[address]
        same.pop(protocol, None)
        if not same:
            del self._by_address[address]


class H11Protocol(h11_impl.H11Protocol):
    """uvicorn's h11 protocol, whose refusals (a request that is not HTTP/1.1, a head over
    :data:`MAX_HEAD_BYTES` or uvicorn's ``h11_max_incomplete_event_size``, both framings, an
    unknown transfer coding, a head not received within :attr:`head_timeout_s`) are
    ``{"error": ...}`` with their status (431, 400, 501, 408) and ``Connection: close``; the
    connection is then closed without a reset (see the module docstring). They come before
    the application (no access log line): each is logged (INFO) and counted in the
    application's metrics (``ldr_serve_protocol_refusals_total``).

    It limits the requests answered at once (``config.limit_concurrency``: 503 with
    ``Retry-After`` past it, :func:`busy`), not the connections (uvicorn's check, which counted
    idle ones too, is off), and counts the connections that wait for a request in the
    application's :class:`WaitingConnections` (``app.state.waiting``).

    uvicorn answers them itself with a plain-text 400 and closes the connection at once, so
    that a client still sending (200 KB of headers) gets a reset and no answer.

    Its sockets have ``TCP_NODELAY`` (:func:`set_nodelay`) and each answer is one write
    (:class:`_OneWrite`); each request, from its head to its answer, is counted in the
    application's :class:`~ldr_opennmt.serving.batching.Activity` (when it has one).
    """

    def __init__(self, config, server_state, app_state, _loop=None):
        super().__init__(config, server_state, app_state, _loop)
        self.conn = _Connection(config.h11_max_incomplete_event_size or MAX_HEAD_BYTES)
        self._closing = None  # The timer that closes a refused connection.
        self._dropped = 0
        #: Seconds a request line and headers may take to arrive (``--read_timeout_s``, set
        #: on the configuration by :func:`ldr_opennmt.serving.app.server_config`).
        self.head_timeout_s = getattr(config, HEAD_TIMEOUT_ATTRIBUTE, None)
        self._head_timer = None
        server = _app_state(config, "server")
        self.activity = getattr(server, "activity", None)
        if self.activity is not None:
            self.activity.track_requests()
        self._counted = None  # The cycle counted in the activity, until its answer.
        self.metrics = _app_state(config, "metrics")
        self.waiting = _app_state(config, "waiting")
        # Requests at once, counted here (uvicorn's check counts connections too).
        self.max_requests, self.limit_concurrency = self.limit_concurrency, None
        self._application, self.app = self.app, self._limited

    def connection_made(self, transport):
        super().connection_made(transport)
        set_nodelay(transport)
        self._watch_head()
        self._update_waiting()

    def data_received(self, data):
        if self._closing is None:
            super().data_received(data)
            return
        self._dropped += len(data)  # Refused: read and dropped.
        if self._dropped > DRAIN_LIMIT:
            self.transport.close()

    def handle_events(self):
        if self._closing is None:
            super().handle_events()
            if self._closing is None:  # Not refused meanwhile.
                self._new_cycle()
            self._watch_head()
            self._update_waiting()

    def _new_cycle(self):
        """Gives a cycle just made (its task has not run yet) its :class:`_OneWrite` and
        counts its request."""
        cycle = self.cycle
        if cycle is None or isinstance(cycle.transport, _OneWrite) or cycle.response_complete:
            return
        cycle.transport = _OneWrite(cycle.transport, cycle, self.loop)
        self._request_done()  # A cycle before it, if not yet (pipelined requests).
        if self.activity is not None:
            self.activity.request_started()
            self._counted = cycle

    def _request_done(self):
        if self._counted is not None:
            self._counted = None
            self.activity.request_done()

    def on_response_complete(self):
        self._request_done()
        super().on_response_complete()
        self._update_waiting()

    async def _limited(self, scope, receive, send):
        """The application, or a 503 past :attr:`max_requests` requests at once (this one is
        one of the server's tasks already)."""
        if (
            self.max_requests is not None
            and len(self.tasks) > self.max_requests
            and (scope.get("method"), scope.get("path")) not in UNLIMITED
        ):
            message = busy(self.max_requests)
            LOGGER.info("refused by the HTTP protocol: 503 %s", message)
            self._count(503, "busy")
            refused = RequestError(503, message)
            refused.headers = {"Connection": "close"}  # A 503's Retry-After: request_error's.
            await http_io.request_error(refused, scrub=False)(scope, receive, send)
            return
        await self._application(scope, receive, send)

    def _count(self, status, reason):
        if self.metrics is not None:
            self.metrics.on_refusal(status, reason)

    def _update_waiting(self):
        """Counts the connection in :attr:`waiting` while it waits for a request."""
        if self.waiting is None:
            return
        waiting = (
            self._closing is None
            and self.transport is not None
            and not self.transport.is_closing()
            and self.conn.their_state is h11.IDLE
            and (self.cycle is None or self.cycle.response_complete)
        )
        if waiting:
            self.waiting.add(self, (self.client or ("unknown",))[0])
        else:
            self.waiting.discard(self)

    def make_room(self, cap):
        """Closes the connection, waiting for a request, for a newer one (:obj:`cap` says
        which cap: :class:`WaitingConnections`)."""
        if self._closing is not None or self.transport.is_closing():
            return
        self.conn.refusal = 408, "headers: not received; closed for a newer connection (%s)" % cap
        self.conn.reason = "make_room"
        self.conn.refused_in_body = False
        self.send_400_response("")
        self.transport.close()  # Now: the room is for the newer connection.

    def _watch_head(self):
        """Starts the head timer while a head is awaited (a new connection, or the first bytes
        of the next request on a kept-alive one: an idle one is uvicorn's keep-alive
        timeout's), and stops it once the head is in."""
        awaiting = (
            self._closing is None
            and self.head_timeout_s is not None
            and self.conn.their_state is h11.IDLE
            and (self.cycle is None or bool(self.conn.trailing_data[0]))
        )
        if awaiting and self._head_timer is None:
            self._head_timer = self.loop.call_later(self.head_timeout_s, self._head_timed_out)
        elif not awaiting and self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timed_out(self):
        self._head_timer = None
        if self._closing is not None or self.transport.is_closing():
            return
        self.conn.refusal = 408, head_timed_out(self.head_timeout_s)
        self.conn.reason = "head_timeout"
        self.conn.refused_in_body = False
        self.send_400_response("")

    def send_400_response(self, msg):
        """Answers a refused request (uvicorn calls it on :class:`h11.RemoteProtocolError`;
        the head timer, when a head is late)."""
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None
        status, message = self.conn.refusal or (400, "not a valid HTTP/1.1 request")
        LOGGER.info("refused by the HTTP protocol: %d %s", status, message)
        self._count(status, self.conn.reason or "not_http")
        if self.waiting is not None:
            self.waiting.discard(self)
        self._request_done()
        cycle = self.cycle if self.conn.refused_in_body else None
        if cycle is not None and isinstance(cycle.transport, _OneWrite):
            cycle.transport.flush()  # A head held goes before what follows.
        if cycle is None or not cycle.response_started:  # Else it has its answer.
            default_headers = self.server_state.default_headers
            self.transport.write(_raw_answer(status, message, default_headers))
        if cycle is not None and not cycle.response_complete:
            cycle.disconnected = True  # The application, reading the body, stops.
            cycle.message_event.set()
        self.flow.resume_reading()
        if self.transport.can_write_eof():
            self.transport.write_eof()  # The client reads the answer, then the end.
        self._closing = self.loop.call_later(LINGER_S, self.transport.close)

    def connection_lost(self, exc):
        self._request_done()
        if self.waiting is not None:
            self.waiting.discard(self)
        if self._closing is not None:
            self._closing.cancel()
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None
        super().connection_lost(exc)

    def shutdown(self):
        if self._closing is None:
            super().shutdown()
        else:
            self.transport.close()
