"""The HTTP side of ``ldr-serve``: reading bodies, one error shape, allowed hosts, CORS and
the offline API pages.

* :func:`read_body` reads a request body with a size limit (413, also when the client
  declared it with ``Content-Length``: the body is read and dropped first, so that the
  client, still sending, sees the answer and not a broken pipe), a time limit (408: a client
  that sends half a body does not hold its connection), the content type its route accepts
  (415), no content coding (415: a gzip body is not read as text) and UTF-8 (400). A client
  that goes away mid-body is not an error of the server: no traceback.
* :class:`H11Protocol`: uvicorn's h11 protocol (``ldr-serve`` runs it whatever is installed:
  :func:`ldr_opennmt.serving.app.server_config`), answering in the same shape what it refuses
  before the application: a request line and headers over :data:`MAX_HEAD_BYTES` (431),
  ``Content-Length`` together with ``Transfer-Encoding`` (400: the shape of request smuggling
  behind a proxy, RFC 9112 section 6.3), a transfer coding other than chunked (501), what is
  not HTTP/1.1 (400), and a request line and headers that do not arrive within
  ``--read_timeout_s`` (408: a client that sends half a head, or nothing, does not hold its
  connection; a kept-alive connection is idle until the first byte of its next request, and
  uvicorn's keep-alive timeout closes it). The connection is then closed without a reset: the
  answer and a FIN are sent, and what the client still sends is read and dropped for up to
  :data:`LINGER_S`, so that a client still sending sees the answer.
  An answer leaves in one ``send()`` (its status line and headers are held until its body's
  first bytes: :class:`_OneWrite`) on a socket with ``TCP_NODELAY``: written in two without
  it, the body of an answer on a kept-alive connection waited for the client's delayed ACK
  of the head (Nagle's algorithm: 40 ms on Linux; issue 58). Each request in progress is
  counted in the application's :class:`~ldr_opennmt.serving.batching.Activity`, so that a
  batch does not wait for requests that do not exist.
* :func:`install_error_handlers`: every answer that is not a success is ``{"error": "one
  line"}``, unknown routes (404) and methods (405) included, and a message never holds what
  cannot be encoded (lone surrogates are written ``\\udXXX``) nor the server's own paths.
* :class:`HostCheck`: Starlette's ``TrustedHostMiddleware`` with that error shape (a web
  page can make a browser post to a server on localhost: ``--allowed_hosts``).
* :func:`install_docs`: Swagger UI at ``/docs`` and ReDoc at ``/redoc`` from the assets of
  the ``fastapi-offline`` package, served by the server itself (no CDN).
"""

import asyncio
import http
import logging
import os
import re
import socket

from fastapi import responses
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import ClientDisconnect
from uvicorn.protocols.http import h11_impl

from ldr_opennmt.errors import UserError
from ldr_opennmt.serving import api_models
from ldr_opennmt.serving.backend_kinds import RequestError

LOGGER = logging.getLogger("ldr_opennmt.serving")
#: uvicorn's h11, taken from uvicorn: without the serve extra, the module missing is uvicorn,
#: which ``ldr-serve`` names.
h11 = h11_impl.h11

JSON = "application/json"
FORM = "application/x-www-form-urlencoded"
#: The most bytes of a too-large body read (and dropped) so that the client sees its 413.
DRAIN_LIMIT = 64 << 20
#: The most bytes of a request line and its header fields (431 past it).
MAX_HEAD_BYTES = 64 << 10
#: The most seconds a connection refused before the application stays open after its answer,
#: reading and dropping what the client still sends (closed at once with unread data, the
#: connection would be reset and the client would lose the answer).
LINGER_S = 5.0

_REPR = re.compile(r"<[^<>]*? at 0x[0-9a-fA-F]+>")
_ABSOLUTE_PATH = re.compile(r"(?<![\w.~/-])/(?:[^\s'\"():,;]+/)+([^\s'\"():,;/]+)")


def public(message):
    """:obj:`message` as a client may see it: one line, encodable, without Python reprs
    (``<... object at 0x...>``) or absolute paths (a path keeps its last part)."""
    message = " ".join(api_models.escape(str(message)).split())
    message = _REPR.sub("<object>", message)
    return _ABSOLUTE_PATH.sub(r"\1", message)


def error(status, message, headers=None, scrub=True):
    """The JSON answer ``{"error": message}`` (:func:`public` unless not :obj:`scrub`: a
    message about what the client sent, such as its path, is only made encodable)."""
    text = public(message) if scrub else " ".join(api_models.escape(str(message)).split())
    return responses.JSONResponse({"error": text}, status_code=status, headers=headers)


def media_type(request):
    """The request's media type, lower case, without parameters (``""``: none)."""
    return request.headers.get("content-type", "").split(";")[0].strip().lower()


def _charset(request):
    for param in request.headers.get("content-type", "").split(";")[1:]:
        name, _, value = param.partition("=")
        if name.strip().lower() == "charset":
            return value.strip().strip('"').lower()
    return None


def content_codings(request):
    """The content codings of :obj:`request`'s body (``Content-Encoding``, lower case), but
    ``identity`` (no coding)."""
    codings = []
    for value in request.headers.getlist("content-encoding"):
        codings += [coding.strip().lower() for coding in value.split(",")]
    return [coding for coding in codings if coding not in ("", "identity")]


async def read_body(request, limit, timeout_s, accepted=(JSON,)):
    """The body of :obj:`request` as text.

    Args:
      request: The Starlette request.
      limit: The most bytes accepted.
      timeout_s: The most seconds the whole body may take to arrive.
      accepted: The media types the route takes.

    Returns:
      ``(media type, text)``.

    Raises:
      RequestError: 415 (content type, charset, a content coding), 413, 408, 400 (not UTF-8,
        or the client went away).
    """
    kind = media_type(request)
    if kind not in accepted:
        raise RequestError(
            415,
            "Content-Type: %s, expected %s"
            % (
                api_models.short(kind) if kind else "missing",
                " or ".join(accepted),
            ),
        )
    charset = _charset(request)
    if charset not in (None, "utf-8", "utf8"):
        raise RequestError(
            415, "Content-Type: charset %s, expected utf-8" % api_models.short(charset)
        )
    codings = content_codings(request)
    if codings:
        refusal = RequestError(
            415,
            "Content-Encoding %s is not accepted: send the body uncompressed"
            % api_models.short(", ".join(codings)),
        )
        refusal.headers = {"Accept-Encoding": "identity"}  # RFC 9110, section 15.5.16.
        raise refusal
    declared = request.headers.get("content-length")
    too_large = declared is not None and declared.isdigit() and int(declared) > limit
    chunks, size = [], 0

    async def _read():
        nonlocal size
        async for chunk in request.stream():
            size += len(chunk)
            if too_large:
                if size > DRAIN_LIMIT:
                    return
                continue
            if size > limit:
                return
            chunks.append(chunk)

    expects_continue = request.headers.get("expect", "").lower() == "100-continue"
    try:
        if not (too_large and expects_continue):  # Then the client waits: nothing to drain.
            await asyncio.wait_for(_read(), timeout_s)
    except asyncio.TimeoutError:
        raise RequestError(
            408, "body: not received within %g s (--read_timeout_s)" % timeout_s
        ) from None
    except ClientDisconnect:
        raise RequestError(400, "body: the client closed the connection") from None
    if too_large:
        raise RequestError(413, "body: %s bytes, more than the limit of %d" % (declared, limit))
    if size > limit:
        raise RequestError(413, "body: more than the limit of %d bytes" % limit)
    data = b"".join(chunks)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise RequestError(
            400, "body: not UTF-8 (byte 0x%02x at byte %d)" % (data[e.start], e.start)
        ) from None
    if kind == FORM and JSON in accepted and text.lstrip()[:1] in ("{", "["):
        # curl -d without -H 'Content-Type: application/json' says form: the body is JSON.
        raise RequestError(
            415,
            "Content-Type: %s, but the body is JSON: send it with Content-Type: %s" % (FORM, JSON),
        )
    return kind, text


#: Statuses after which the connection is closed (the body may not have been read).
CLOSE_AFTER = (400, 408, 413)


def request_error(e):
    """The answer to a :class:`RequestError`."""
    headers = dict(getattr(e, "headers", None) or {})
    if e.status in CLOSE_AFTER:
        headers["Connection"] = "close"
    if e.status == 400 and str(e) == "body: the client closed the connection":
        LOGGER.info("a client closed its connection before sending its whole body")
    return error(e.status, str(e), headers=headers or None)


def install_error_handlers(app):
    """Answers every error of :obj:`app` as ``{"error": "one line"}``."""

    @app.exception_handler(HTTPException)
    async def _http_error(request, exc):
        headers = getattr(exc, "headers", None)
        if exc.status_code == 404:
            message = "not found: %s %s (see /docs)" % (request.method, request.url.path)
        elif exc.status_code == 405:
            allowed = (headers or {}).get("Allow") or (headers or {}).get("allow", "")
            message = "method %s not allowed on %s (allowed: %s)" % (
                request.method,
                request.url.path,
                allowed or "none",
            )
        else:
            message = exc.detail if isinstance(exc.detail, str) else "HTTP %d" % exc.status_code
        return error(exc.status_code, message, headers=headers, scrub=False)

    @app.exception_handler(RequestValidationError)
    async def _validation_error(request, exc):
        return error(422, api_models.validation_message(exc.errors()))

    @app.exception_handler(RequestError)
    async def _request_error(request, exc):
        return request_error(exc)

    @app.exception_handler(Exception)
    async def _internal_error(request, exc):
        return error(500, "internal error (%s): see the server's log" % type(exc).__name__)


#: An origin as a browser sends it (``Origin:``): scheme, host, optional port; no path.
_ORIGIN = re.compile(r"^(https?)://([A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\])(:[0-9]{1,5})?$")


def check_cors_origins(origins):
    """Refuses a ``--cors_origins`` value that no browser's ``Origin`` can equal (it would
    let no page in, without a word): ``*``, or ``http(s)://HOST[:PORT]`` without a path.

    Raises:
      UserError: naming the value and what is wrong.
    """
    for origin in origins:
        if origin == "*" or _ORIGIN.match(origin):
            continue
        if _ORIGIN.match(origin.rstrip("/")):
            why = "a trailing slash (browsers send %s)" % api_models.short(origin.rstrip("/"))
        elif "://" not in origin:
            why = "no scheme (an origin is https://HOST or http://HOST[:PORT])"
        else:
            why = "not http(s)://HOST[:PORT] without a path"
        raise UserError("--cors_origins: %s: %s" % (api_models.short(origin), why))


def dns_name(name):
    """A host name as DNS compares it: case-insensitive, the root's trailing dot dropped
    (``LocalHost.`` is ``localhost``)."""
    name = name.lower()
    return name[:-1] if name.endswith(".") else name


class HostCheck(TrustedHostMiddleware):
    """Starlette's ``TrustedHostMiddleware`` answering ``{"error": ...}`` (400), comparing
    names as DNS does (:func:`dns_name`; Starlette compares them byte for byte)."""

    async def __call__(self, scope, receive, send):
        if self.allow_any or scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        host = ""
        for key, value in scope.get("headers", ()):
            if key == b"host":
                host = value.decode("latin-1")
                break
        name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
        name = dns_name(name.strip("[]") if name.startswith("[") else name)
        for pattern in map(dns_name, self.allowed_hosts):
            if name == pattern or (pattern.startswith("*") and name.endswith(pattern[1:])):
                await self.app(scope, receive, send)
                return
        response = error(
            400, "Host: %s is not allowed (--allowed_hosts)" % api_models.short(host or "none")
        )
        await response(scope, receive, send)


def head_too_large(limit):
    """The message of a 431: a request line and headers of more than :obj:`limit` bytes."""
    return "headers: more than the limit of %d bytes (the request line and header fields)" % limit


#: The attribute of uvicorn's configuration that gives :class:`H11Protocol` its head timeout.
HEAD_TIMEOUT_ATTRIBUTE = "ldr_head_timeout_s"


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
            elif e.error_status_hint == 431:  # A chunk size line or trailers, mid-body.
                self.refusal = 400, "body: a chunked framing line of more than %d bytes" % (
                    self.max_head_bytes
                )
            else:
                self.refusal = e.error_status_hint, "not a valid HTTP/1.1 request (%s)" % (
                    api_models.escape(str(e))[:200]
                )
            raise
        if isinstance(event, h11.Request):
            names = {name for name, _ in event.headers}
            refusal = None
            if b"content-length" in names and b"transfer-encoding" in names:
                refusal = 400, BOTH_FRAMINGS
            elif _head_bytes(event) > self.max_head_bytes:
                refusal = 431, head_too_large(self.max_head_bytes)
            if refusal is not None:
                self.refusal = refusal
                raise h11.RemoteProtocolError(refusal[1], refusal[0])
        return event


def _raw_answer(status, message, default_headers):
    """The bytes of an ``{"error": message}`` answer that closes its connection."""
    body = error(status, message, scrub=False).body
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


def _activity(config):
    """The :class:`~ldr_opennmt.serving.batching.Activity` of the application that
    :obj:`config` serves (``app.state.server.activity``, of
    :func:`ldr_opennmt.serving.app.create_app`), or ``None``."""
    state = getattr(config.app, "state", None)
    return getattr(getattr(state, "server", None), "activity", None)


class H11Protocol(h11_impl.H11Protocol):
    """uvicorn's h11 protocol, whose refusals (a request that is not HTTP/1.1, a head over
    :data:`MAX_HEAD_BYTES` or uvicorn's ``h11_max_incomplete_event_size``, both framings, an
    unknown transfer coding, a head not received within :attr:`head_timeout_s`) are
    ``{"error": ...}`` with their status (431, 400, 501, 408) and ``Connection: close``; the
    connection is then closed without a reset (see the module docstring). They come before
    the application: no access log line, no metrics.

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
        self.activity = _activity(config)
        if self.activity is not None:
            self.activity.track_requests()
        self._counted = None  # The cycle counted in the activity, until its answer.

    def connection_made(self, transport):
        super().connection_made(transport)
        set_nodelay(transport)
        self._watch_head()

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


def _docs_assets():
    """The folder of fastapi-offline's Swagger UI and ReDoc files, or ``None``."""
    try:
        import fastapi_offline  # pylint: disable=import-outside-toplevel
    except ImportError:
        return None
    folder = os.path.join(os.path.dirname(fastapi_offline.__file__), "static")
    return folder if os.path.isdir(folder) else None


def install_docs(app, title):
    """``/docs`` (Swagger UI) and ``/redoc`` (ReDoc) from local assets.

    Returns:
      Whether they were installed (``False`` without the ``fastapi-offline`` package).
    """
    from fastapi.openapi import docs  # pylint: disable=import-outside-toplevel
    from starlette.staticfiles import StaticFiles  # pylint: disable=import-outside-toplevel

    folder = _docs_assets()
    if folder is None:
        return False
    app.mount("/docs-assets", StaticFiles(directory=folder), name="docs-assets")

    @app.get("/docs", include_in_schema=False)
    async def _swagger():
        return docs.get_swagger_ui_html(
            openapi_url="/openapi.json",
            title=title + " - Swagger UI",
            swagger_js_url="/docs-assets/swagger-ui-bundle.js",
            swagger_css_url="/docs-assets/swagger-ui.css",
            swagger_favicon_url="/docs-assets/favicon.png",
        )

    @app.get("/redoc", include_in_schema=False)
    async def _redoc():
        return docs.get_redoc_html(
            openapi_url="/openapi.json",
            title=title + " - ReDoc",
            redoc_js_url="/docs-assets/redoc.standalone.js",
            redoc_favicon_url="/docs-assets/favicon.png",
            with_google_fonts=False,
        )

    return True
