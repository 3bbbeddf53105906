"""The HTTP application of ``ldr-serve``: its routes, metrics, error shape, allowed hosts,
CORS and offline docs around a :class:`~ldr_opennmt.serving.server.Server`, and the uvicorn
server that runs it.

Routes: ``POST /translate`` (the native body, or LibreTranslate's), ``POST
/translator/translate`` (OpenNMT-py's), ``GET /languages``, ``POST /detect``, ``POST
/detect_domain``, ``GET /domains``, ``GET /health``, ``GET /metrics``, ``GET /docs`` and ``GET
/redoc`` (local assets), ``GET /openapi.json`` (generated from the request models that
validate, :mod:`ldr_opennmt.serving.api_models`).

The uvicorn server closes idle keep-alive connections (``--timeout_keep_alive_s``), and a
request body must arrive within ``--read_timeout_s`` (408). Its HTTP protocol is
:class:`~ldr_opennmt.serving.protocol.H11Protocol` (:func:`server_config`): it bounds the
requests answered at once (``--limit_concurrency``: 503 with ``Retry-After`` past it) and,
apart, the connections that wait for a request (``--max_waiting_per_client``,
``--max_waiting_connections``: the oldest is closed to make room); headers over 64 KiB (431),
both ``Content-Length`` and ``Transfer-Encoding`` (400) and what is not HTTP/1.1 are answered
``{"error": ...}`` before the application, and a request line and headers must also arrive
within ``--read_timeout_s`` (408). Its log lines (``ldr_opennmt.serving``) go where uvicorn's
go, at ``--log_level``. The port is bound before any model is loaded: a
port in use is one line, exit 2 (:func:`bind`). Once it listens, ``ldr-serve`` says so on
stderr in two lines: its URL, and the domains it serves (:func:`startup_lines`).
"""

import contextlib
import copy
import errno
import json
import os
import socket
import sys

import fastapi
from fastapi import responses

from ldr_opennmt.errors import UserError
from ldr_opennmt.serving import admin, api_models, http_io, libretranslate, protocol
from ldr_opennmt.serving import server as server_lib
from ldr_opennmt.serving import ui
from ldr_opennmt.serving.backend_kinds import RequestError
from ldr_opennmt.serving.metrics import CONTENT_TYPE, Metrics
from ldr_opennmt.serving.server import Server


def _json(value, status=200):
    """A JSON answer (serialized here: FastAPI would first validate the answer against the
    documented models, which costs more than the translation of a sentence)."""
    return responses.Response(
        json.dumps(value, ensure_ascii=False).encode("utf-8"),
        status_code=status,
        media_type=http_io.JSON,
    )


def _ref(name):
    return {"$ref": "#/components/schemas/%s" % name}


def _body(*names, form=None):
    """An OpenAPI request body of the named models (several: one of them)."""
    schema = _ref(names[0]) if len(names) == 1 else {"oneOf": [_ref(n) for n in names]}
    content = {http_io.JSON: {"schema": schema}}
    if form:
        content[http_io.FORM] = {"schema": _ref(form)}
    return {"requestBody": {"required": True, "content": content}}


def _answers(schema, *statuses):
    """OpenAPI responses: :obj:`schema` for 200, the error shape for the statuses."""
    described = {
        200: {"description": "Success", "content": {http_io.JSON: {"schema": schema}}},
    }
    for status, text in statuses:
        described[status] = {
            "description": text,
            "content": {http_io.JSON: {"schema": _ref("Error")}},
        }
    return described


BODY_ERRORS = (
    (400, "Malformed body (not JSON, not UTF-8), or the client went away"),
    (408, "The headers or the body did not arrive within --read_timeout_s"),
    (413, "Body larger than --max_request_bytes"),
    (
        415,
        "Content-Type is not application/json (or a form, where accepted), or the body has a "
        "Content-Encoding",
    ),
    (422, "A field is wrong (the message names it)"),
)
RUN_ERRORS = (
    (500, "The model failed on the request"),
    (503, "Queue full: retry later"),
    (504, "Not translated within --timeout_s"),
)


def create_app(options, backend=None, classifier=None):
    """The FastAPI application of :obj:`options` (models loaded now, or on first use with
    ``--lazy``; worker threads run until the application shuts down).

    Raises:
      UserError: if the export cannot be served.
    """
    server = Server(options, backend=backend, classifier=classifier)

    @contextlib.asynccontextmanager
    async def lifespan(_):
        yield
        server.close()

    title = "ldr-serve"
    app = fastapi.FastAPI(
        title=title,
        description="Multi-domain translation with %s (%s): the native API, LibreTranslate's "
        "and OpenNMT-py's."
        % (os.path.basename(os.path.normpath(options.model_dir)), server.backend.kind),
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
    )
    app.state.server = server
    http_io.install_error_handlers(app)
    limit, read_timeout = options.max_request_bytes, options.read_timeout_s

    async def _read(request, accepted=(http_io.JSON,)):
        kind, text = await http_io.read_body(request, limit, read_timeout, accepted)
        if kind == http_io.FORM:
            return libretranslate.form_body(text, options.max_sentences), []
        return server.decode(text)

    def _mark(request, body):
        """The request's domain for the metrics, from its body as sent."""
        labels = []
        for item in body if isinstance(body, list) else [body]:
            if isinstance(item, dict):
                domains = item.get("domains")
                labels += domains if isinstance(domains, list) else [item.get("domain")]
        request.state.ldr_domain = metrics.domain_label(labels)

    @app.post(
        "/translate",
        openapi_extra=_body(
            "TranslateRequest", "LibreTranslateRequest", form="LibreTranslateRequest"
        ),
        responses=_answers(
            {"oneOf": [_ref("TranslateResponse"), _ref("LibreTranslateResponse")]},
            *(BODY_ERRORS + RUN_ERRORS),
        ),
    )
    async def translate(request: fastapi.Request):
        """Translates raw sentences, with a domain per request or per sentence (or none);
        or LibreTranslate's body (``q``, ``source``, ``target``: JSON or a form)."""
        try:
            body, warnings = await _read(request, (http_io.JSON, http_io.FORM))
            _mark(request, body)
            if isinstance(body, dict) and "q" in body:
                checked, answer = libretranslate.prepare(server, body)
            elif http_io.media_type(request) == http_io.FORM:
                raise RequestError(422, "q: missing (LibreTranslate's form body)")
            else:
                checked, answer = server.parse_native(body, warnings), None
            native = await server.run(checked)
        except RequestError as e:
            return http_io.request_error(e)
        return _json(native if answer is None else answer(native))

    @app.post(
        "/translator/translate",
        openapi_extra={
            "requestBody": {
                "required": True,
                "content": {
                    http_io.JSON: {"schema": {"type": "array", "items": _ref("OpenNMTPyItem")}}
                },
            }
        },
        responses=_answers(
            {"type": "array", "items": {"type": "array", "items": _ref("OpenNMTPyResult")}},
            *(BODY_ERRORS + RUN_ERRORS),
        ),
    )
    async def translate_onmt_py(request: fastapi.Request):
        """OpenNMT-py's REST route: ``[{"src": "text", "id": 100}]``."""
        try:
            body, _ = await _read(request)
            _mark(request, body)
            checked, answer = libretranslate.onmt_py_prepare(server, body)
            native = await server.run(checked)
        except RequestError as e:
            return http_io.request_error(e)
        return _json(answer(native))

    @app.get("/languages", responses=_answers({"type": "array", "items": _ref("Language")}))
    async def languages():
        """LibreTranslate's list of languages: the export's language pair."""
        return _json(libretranslate.languages(server))

    @app.post(
        "/detect",
        openapi_extra=_body("DetectRequest", form="DetectRequest"),
        responses=_answers(
            {"type": "array"},
            *(BODY_ERRORS + ((501, "The server's source language is not known"),)),
        ),
    )
    async def detect(request: fastapi.Request):
        """LibreTranslate's language detection: the export's source language."""
        try:
            body, _ = await _read(request, (http_io.JSON, http_io.FORM))
            return _json(libretranslate.detect(server, body))
        except RequestError as e:
            return http_io.request_error(e)

    @app.post(
        "/detect_domain",
        openapi_extra=_body("DetectRequest"),
        responses=_answers(
            {"type": "array", "items": _ref("DomainDetection")},
            *(BODY_ERRORS + RUN_ERRORS + ((501, "The server has no --classifier"),)),
        ),
    )
    async def detect_domain(request: fastapi.Request):
        """The domain the classifier (``--classifier``) picks for each text, and its
        probability."""
        try:
            body, _ = await _read(request)
            checked = server.validate("DetectRequest", body)
            texts = [checked.q] if isinstance(checked.q, str) else list(checked.q)
            return _json(await server.detect_domain(texts))
        except RequestError as e:
            return http_io.request_error(e)

    @app.get("/domains")
    async def domains():
        """The domains this server translates (``generic`` included), whether the model
        reads them, and what it does with sentences without one."""
        return _json(server.domains())

    @app.get("/health")
    async def health():
        """Liveness, queue length, batching counters per queue, loaded models."""
        return _json(server.health())

    @app.get(
        "/metrics",
        response_class=responses.PlainTextResponse,
        responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}}}},
    )
    async def prometheus_metrics():
        """Prometheus metrics: requests, latency and errors per route and domain, batch
        sizes, queue depth, model loads."""
        return responses.Response(metrics.render(), headers={"Content-Type": CONTENT_TYPE})

    if options.ui:
        ui.register(app)  # GET /: the page for a person (--no-ui: none).
    if getattr(options, "admin_token", None):

        async def _read_json(request):
            _, text = await http_io.read_body(request, limit, read_timeout)
            try:
                return json.loads(text)
            except ValueError as e:
                raise RequestError(400, "body: not JSON (%s)" % e) from None

        admin.register(app, server, options.admin_token, _read_json)
    http_io.install_docs(app, title)
    routes = [route.path for route in app.routes if hasattr(route, "methods")]
    app.state.waiting = protocol.WaitingConnections(
        options.max_waiting_per_client, options.max_waiting_connections
    )
    metrics = Metrics(server, routes, app.state.waiting)
    app.state.metrics = metrics
    for queue in server.queues():
        queue.on_batch = metrics.on_batch
    if hasattr(server.backend, "on_batch"):
        server.backend.on_batch = metrics.on_batch  # The queues of domains put later.

    def _openapi():
        if app.openapi_schema is None:
            from fastapi.openapi.utils import get_openapi

            schema = get_openapi(
                title=app.title,
                version=app.version,
                description=app.description,
                routes=app.routes,
            )
            models = list(server.models.values()) + list(api_models.RESPONSE_MODELS)
            schema.setdefault("components", {}).setdefault("schemas", {}).update(
                api_models.openapi_schemas(models)
            )
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = _openapi
    app.add_middleware(_MetricsMiddleware, metrics=metrics)
    if options.cors_origins:
        from starlette.middleware.cors import CORSMiddleware

        app.add_middleware(
            CORSMiddleware,
            allow_origins=options.cors_origins,
            allow_methods=["GET", "POST"],
            allow_headers=["Content-Type", "Authorization"],
        )
    app.add_middleware(http_io.HeadAsGet, routes=app.routes)
    app.add_middleware(http_io.HostCheck, allowed_hosts=options.allowed_hosts)
    return app


class _MetricsMiddleware:
    """:meth:`ldr_opennmt.serving.metrics.Metrics.middleware` as a Starlette middleware."""

    def __init__(self, app, metrics):
        self.app = metrics.middleware(app)

    async def __call__(self, scope, receive, send):
        await self.app(scope, receive, send)


def bind(host, port):
    """A socket bound to ``host:port``, before anything is loaded.

    Raises:
      UserError: if the address is in use (another ``ldr-serve``?) or cannot be bound.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        if e.errno == errno.EADDRINUSE:
            raise UserError(
                "--port %d: %s:%d is already in use (another ldr-serve?): choose another port"
                % (port, host, port)
            ) from None
        raise UserError(
            "--host %s --port %d: cannot listen there (%s)" % (host, port, e.strerror)
        ) from None
    sock.set_inheritable(True)
    return sock


def server_config(app, log_level="info"):
    """The uvicorn configuration that serves :obj:`app` (of :func:`create_app`) with its
    options: :class:`~ldr_opennmt.serving.protocol.H11Protocol` whatever HTTP parsers are
    installed (uvicorn's ``auto`` would take httptools where it is installed, which has
    neither its refusals nor its limits), and the serving log lines (``ldr_opennmt.serving``:
    the protocol's refusals, clients gone) written as uvicorn's are, at :obj:`log_level`."""
    import uvicorn  # pylint: disable=import-outside-toplevel
    from uvicorn import config as uvicorn_config  # pylint: disable=import-outside-toplevel

    options = app.state.server.options
    log_config = copy.deepcopy(uvicorn_config.LOGGING_CONFIG)
    level = log_level.upper() if isinstance(log_level, str) else log_level
    log_config["loggers"][http_io.LOGGER.name] = {
        "handlers": ["default"],
        "level": level,
        "propagate": False,
    }
    config = uvicorn.Config(
        app,
        http=protocol.H11Protocol,
        log_level=log_level,
        log_config=log_config,
        limit_concurrency=options.limit_concurrency,
        timeout_keep_alive=options.timeout_keep_alive_s,
        access_log=options.access_log,
    )
    # The head of a request has --read_timeout_s, as its body (408 after).
    setattr(config, protocol.HEAD_TIMEOUT_ATTRIBUTE, options.read_timeout_s)
    return config


def startup_lines(app, sock):
    """What ``ldr-serve`` prints when it listens: its URL, and what it serves.

    Args:
      app: The application of :func:`create_app`.
      sock: Its listening socket.

    Returns:
      Two lines (without line ends).
    """
    server = app.state.server
    host, port = sock.getsockname()[:2]
    url = "http://%s:%d" % ("[%s]" % host if ":" in host else host, port)
    options, backend = server.options, server.backend
    details = [backend.kind, "loaded on first use" if options.lazy else "loaded"]
    if server.source_language and server.target_language:
        details.append("%s to %s" % (server.source_language, server.target_language))
    calibrated = getattr(backend, "calibrations", None)
    if calibrated:
        details.append("calibrated confidence")
    if backend.ignored is not None:
        unlabelled = "every text is translated as generic (the model reads no domain label)"
    elif server.default_unlabelled == server_lib.UNLABELLED_CLASSIFIER and options.classifier:
        unlabelled = "text without a domain gets the domain the classifier picks%s" % (
            " (--classifier %s)" % options.classifier
        )
    elif server.default_unlabelled == server_lib.UNLABELLED_CLASSIFIER:
        threshold = getattr(server.classifier, "threshold", None)
        unlabelled = "text without a domain gets the domain the %s picks%s" % (
            "export's domain guard" if threshold is not None else "classifier",
            "" if threshold is None else " (generic below %.2f)" % threshold,
        )
    else:
        unlabelled = "text without a domain is translated as generic (no --classifier)"
    pages = any(getattr(route, "path", None) == "/docs" for route in app.routes)
    return [
        "ldr-serve: listening on %s (%sCtrl-C stops)"
        % (url, "API pages: %s/docs; " % url if pages else ""),
        "ldr-serve: %s: domains %s (%s); %s"
        % (options.model_dir, ", ".join(backend.labels), ", ".join(details), unlabelled),
    ]


def serve(options, host="127.0.0.1", port=8000, log_level="info", sock=None):
    """Loads the models and serves them until interrupted (on :obj:`sock`, bound by
    :func:`bind` before loading, if given)."""
    import uvicorn  # pylint: disable=import-outside-toplevel

    sock = sock or bind(host, port)
    app = create_app(options)
    lines = startup_lines(app, sock)

    class _Server(uvicorn.Server):
        """uvicorn's server, saying where it listens and what it serves once it does (at
        every log level: uvicorn's own line is INFO)."""

        async def startup(self, sockets=None):
            await super().startup(sockets=sockets)
            if self.started:
                print("\n".join(lines), file=sys.stderr, flush=True)

    _Server(server_config(app, log_level)).run(sockets=[sock])
    return 0
