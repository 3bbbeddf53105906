"""Prometheus metrics of ``ldr-serve`` (``GET /metrics``), with ``prometheus-client``.

Each application has its own registry (several servers in one process, as in the tests,
do not share counters):

* ``ldr_serve_requests_total{route, domain, status}`` and
  ``ldr_serve_request_seconds{route, domain}`` (a histogram): every answered request;
  ``ldr_serve_errors_total{route, domain, status}``: those answered with an error.
  ``route`` is the route's path (``other`` for unknown paths), ``domain`` the domain the
  request asked for (``mixed`` for several, ``none`` for none, ``other`` for a name that is
  not one of the server's: the label's values stay bounded).
* ``ldr_serve_batch_size{queue}`` (a histogram of sentences per batch) and
  ``ldr_serve_batch_seconds{queue}``: every batch run.
* ``ldr_serve_protocol_refusals_total{status, reason}``: what the HTTP protocol refused before
  the application (:mod:`ldr_opennmt.serving.protocol`: 503 ``busy`` past
  ``--limit_concurrency``, 408 ``head_timeout`` and ``make_room``, 431, 400, 501), and
  ``ldr_serve_clients_gone_total``: clients that closed their connection mid-body.
* Read at each scrape from the server's state: ``ldr_serve_queued_sentences``,
  ``ldr_serve_queued_jobs{queue}``, ``ldr_serve_refused_overload_total``,
  ``ldr_serve_waiting_connections`` (connections waiting for a request) and
  ``ldr_serve_model_loads_total`` / ``ldr_serve_model_unloads_total`` (CTranslate2),
  ``ldr_serve_guard_choices_total{domain, fallback}`` (sentences the export's domain guard
  routed; ``fallback="true"``: to ``generic`` for want of confidence) and
  ``ldr_serve_confidence_sentences_total{domain, low_confidence}`` (answers with a calibrated
  confidence, and how many were flagged).
"""

import time

import prometheus_client
from prometheus_client import core

CONTENT_TYPE = prometheus_client.CONTENT_TYPE_LATEST
OTHER = "other"
MIXED = "mixed"
NONE = "none"
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)


class _StateCollector:
    """Gauges and counters read from the server when Prometheus scrapes."""

    def __init__(self, server, waiting=None):
        self.server = server
        self.waiting = waiting

    def describe(self):
        return []

    def collect(self):
        health = self.server.health()
        yield core.GaugeMetricFamily(
            "ldr_serve_queued_sentences",
            "Sentences accepted and not yet answered.",
            value=health["queued_sentences"],
        )
        yield core.CounterMetricFamily(
            "ldr_serve_refused_overload",
            "Requests refused with 503 (--max_queued_sentences).",
            value=health["refused_overload"],
        )
        if self.waiting is not None:
            yield core.GaugeMetricFamily(
                "ldr_serve_waiting_connections",
                "Connections waiting for a request (new, or kept alive between requests).",
                value=len(self.waiting),
            )
        jobs = core.GaugeMetricFamily(
            "ldr_serve_queued_jobs", "Jobs waiting for a batch, per queue.", labels=["queue"]
        )
        queues = dict(health.get("queues", {}))
        if "classifier" in health:
            queues["classifier"] = health["classifier"]
        for name, stats in queues.items():
            jobs.add_metric([name], stats.get("queued_jobs", 0))
        yield jobs
        guard = core.CounterMetricFamily(
            "ldr_serve_guard_choices",
            "Sentences without a domain routed by the export's domain guard, per domain answered"
            " (fallback: sent to generic for want of confidence).",
            labels=["domain", "fallback"],
        )
        for (domain, fallback), count in sorted(
            getattr(self.server, "guard_choices", {}).copy().items()
        ):
            guard.add_metric([domain, str(fallback).lower()], count)
        yield guard
        confident = core.CounterMetricFamily(
            "ldr_serve_confidence_sentences",
            "Sentences answered with a calibrated confidence, per domain and low_confidence.",
            labels=["domain", "low_confidence"],
        )
        for (domain, low), count in sorted(getattr(self.server, "confidences", {}).copy().items()):
            confident.add_metric([domain, str(low).lower()], count)
        yield confident
        models = health.get("models")
        if models:
            yield core.CounterMetricFamily(
                "ldr_serve_model_loads", "CTranslate2 models loaded.", value=models.get("loads", 0)
            )
            yield core.CounterMetricFamily(
                "ldr_serve_model_unloads",
                "CTranslate2 models unloaded (--max_loaded_models).",
                value=models.get("unloads", 0),
            )
            yield core.GaugeMetricFamily(
                "ldr_serve_loaded_models",
                "CTranslate2 models loaded now.",
                value=len(models.get("loaded_models", [])),
            )


class Metrics:
    """The metrics of one server.

    Args:
      server: The :class:`~ldr_opennmt.serving.server.Server` (read at each scrape).
      routes: The paths of the application's routes (others are counted as ``other``).
      waiting: The server's :class:`~ldr_opennmt.serving.protocol.WaitingConnections`, if any.
    """

    def __init__(self, server, routes, waiting=None):
        self.registry = prometheus_client.CollectorRegistry(auto_describe=True)
        self.routes = set(routes)
        self.backend = server.backend  # Its domains now (they may change: admin routes).
        self.requests = prometheus_client.Counter(
            "ldr_serve_requests",
            "Requests answered, per route, domain and status.",
            ["route", "domain", "status"],
            registry=self.registry,
        )
        self.errors = prometheus_client.Counter(
            "ldr_serve_errors",
            "Requests answered with an error (status >= 400), per route, domain and status.",
            ["route", "domain", "status"],
            registry=self.registry,
        )
        self.latency = prometheus_client.Histogram(
            "ldr_serve_request_seconds",
            "Seconds from the request to its answer, per route and domain.",
            ["route", "domain"],
            registry=self.registry,
        )
        self.batch_size = prometheus_client.Histogram(
            "ldr_serve_batch_size",
            "Sentences per decoded batch, per queue.",
            ["queue"],
            buckets=BATCH_BUCKETS,
            registry=self.registry,
        )
        self.batch_seconds = prometheus_client.Histogram(
            "ldr_serve_batch_seconds",
            "Seconds per decoded batch, per queue.",
            ["queue"],
            registry=self.registry,
        )
        self.refusals = prometheus_client.Counter(
            "ldr_serve_protocol_refusals",
            "Requests and connections refused by the HTTP protocol, before the application, "
            "per status and reason.",
            ["status", "reason"],
            registry=self.registry,
        )
        self.clients_gone = prometheus_client.Counter(
            "ldr_serve_clients_gone",
            "Clients that closed their connection before sending their whole body.",
            registry=self.registry,
        )
        self.registry.register(_StateCollector(server, waiting))

    def domain_label(self, domains):
        """The ``domain`` label of a request that asked for :obj:`domains` (a list)."""
        names = {d if isinstance(d, str) else OTHER for d in domains if d is not None}
        if not names:
            return NONE
        if len(names) > 1:
            return MIXED
        name = names.pop()
        return name if isinstance(name, str) and name in self.backend.labels else OTHER

    def on_batch(self, queue, size, seconds):
        """Records one batch of :obj:`size` sentences of :obj:`queue`."""
        self.batch_size.labels(queue).observe(size)
        self.batch_seconds.labels(queue).observe(seconds)

    def on_refusal(self, status, reason):
        """Counts a refusal of the HTTP protocol (``reason``: one of
        :data:`ldr_opennmt.serving.protocol.REASONS`)."""
        self.refusals.labels(str(status), reason).inc()

    def middleware(self, app):
        """An ASGI middleware that counts and times :obj:`app`'s HTTP requests."""

        async def _app(scope, receive, send):
            if scope["type"] != "http":
                await app(scope, receive, send)
                return
            start = time.monotonic()
            status = [500]

            async def _send(message):
                if message["type"] == "http.response.start":
                    status[0] = message["status"]
                await send(message)

            try:
                await app(scope, receive, _send)
            finally:
                path = scope.get("path", "")
                route = path if path in self.routes else OTHER
                domain = scope.get("state", {}).get("ldr_domain", NONE)
                code = str(status[0])
                self.requests.labels(route, domain, code).inc()
                if status[0] >= 400:
                    self.errors.labels(route, domain, code).inc()
                self.latency.labels(route, domain).observe(time.monotonic() - start)

        return _app

    def render(self):
        """The metrics in Prometheus's text format."""
        return prometheus_client.generate_latest(self.registry)
