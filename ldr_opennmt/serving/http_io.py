"""The HTTP side of ``ldr-serve``: reading bodies, one error shape, allowed hosts, CORS and
the offline API pages.

* :func:`read_body` reads a request body with a size limit (413, also when the client
  declared it with ``Content-Length``: the body is read and dropped first, so that the
  client, still sending, sees the answer and not a broken pipe), a time limit (408: a client
  that sends half a body does not hold its connection), the content type its route accepts
  (415), no content coding (415: a gzip body is not read as text) and UTF-8 (400). A client
  that goes away mid-body is not an error of the server: no traceback.
* The HTTP protocol under the application, its refusals before it, the limit of requests at
  once and the cap of idle connections: :mod:`ldr_opennmt.serving.protocol`.
* :func:`install_error_handlers`: every answer that is not a success is ``{"error": "one
  line"}``, unknown routes (404) and methods (405) included, and a message never holds what
  cannot be encoded (lone surrogates are written ``\\udXXX``) nor the server's own paths.
* :class:`HostCheck`: Starlette's ``TrustedHostMiddleware`` with that error shape (a web
  page can make a browser post to a server on localhost: ``--allowed_hosts``).
* :class:`HeadAsGet`: ``HEAD`` on every ``GET`` route (a monitor's or a proxy's health check).
* :func:`install_docs`: Swagger UI at ``/docs`` and ReDoc at ``/redoc`` from the assets of
  the ``fastapi-offline`` package, served by the server itself (no CDN).
"""

import asyncio
import logging
import os
import re

from fastapi import responses
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import ClientDisconnect
from starlette.routing import Match

from ldr_opennmt.errors import UserError
from ldr_opennmt.serving import api_models
from ldr_opennmt.serving.backend_kinds import RequestError

LOGGER = logging.getLogger("ldr_opennmt.serving")

JSON = "application/json"
FORM = "application/x-www-form-urlencoded"
#: The most bytes of a too-large body read (and dropped) so that the client sees its 413.
DRAIN_LIMIT = 64 << 20
#: The message of the 400 of a client that closed its connection mid-body.
CLIENT_GONE = "body: the client closed the connection"

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
        LOGGER.info("a client closed its connection before sending its whole body")
        metrics = getattr(request.app.state, "metrics", None)
        if metrics is not None:
            metrics.clients_gone.inc()
        raise RequestError(400, CLIENT_GONE) from None
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


#: The ``Retry-After`` of a 503 (seconds).
RETRY_AFTER_S = 1


def request_error(e, scrub=True):
    """The answer to a :class:`RequestError` (a 503 says when to retry; :obj:`scrub`: see
    :func:`error`)."""
    headers = dict(getattr(e, "headers", None) or {})
    if e.status in CLOSE_AFTER:
        headers["Connection"] = "close"
    if e.status == 503:
        headers["Retry-After"] = str(RETRY_AFTER_S)
    return error(e.status, str(e), headers=headers or None, scrub=scrub)


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


class HeadAsGet:
    """An ASGI middleware that answers ``HEAD`` on a ``GET`` route as ``GET`` (uvicorn sends
    no body to a ``HEAD``): Starlette's routes do, FastAPI's ``@app.get`` routes answer 405.

    Args:
      app: The application inside.
      routes: The application's routes (a live list: read at each ``HEAD``).
    """

    def __init__(self, app, routes):
        self.app = app
        self.routes = routes

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and scope["method"] == "HEAD":
            as_get = dict(scope, method="GET")
            for route in self.routes:
                if "GET" in (getattr(route, "methods", None) or ()):
                    if route.matches(as_get)[0] == Match.FULL:
                        scope = as_get
                        break
        await self.app(scope, receive, send)


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
