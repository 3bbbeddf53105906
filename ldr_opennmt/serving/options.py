"""The settings of ``ldr-serve`` (:class:`Options`: its command-line options, checked), read by
the server (:mod:`ldr_opennmt.serving.server`, which gives them under the same names), the
backends and the HTTP protocol."""

from ldr_opennmt.errors import UserError
from ldr_opennmt.serving import api_models, http_io

#: The ``Host`` names accepted by default (``--allowed_hosts``): this machine's.
DEFAULT_HOSTS = ("localhost", "127.0.0.1", "::1")


class Options:
    """The server's settings (the options of ``ldr-serve``)."""

    def __init__(
        self,
        model_dir,
        classifier=None,
        max_batch_size=32,
        max_wait_ms=5.0,
        max_request_bytes=1 << 20,
        max_sentences=256,
        max_sentence_tokens=256,
        max_queued_sentences=2048,
        timeout_s=30.0,
        max_decoding_length=256,
        max_beam_size=16,
        inter_threads=1,
        intra_threads=1,
        device="cpu",
        lazy=False,
        max_loaded_models=None,
        compute_type="default",
        read_timeout_s=10.0,
        limit_concurrency=64,
        max_waiting_per_client=64,
        max_waiting_connections=1024,
        timeout_keep_alive_s=5.0,
        allowed_hosts=DEFAULT_HOSTS,
        cors_origins=(),
        source_language=None,
        target_language=None,
        access_log=True,
        ui=True,
        admin_token=None,
    ):
        self.model_dir = model_dir
        self.classifier = classifier
        self.max_batch_size = max_batch_size
        self.max_wait_ms = max_wait_ms
        self.max_request_bytes = max_request_bytes
        self.max_sentences = max_sentences
        self.max_sentence_tokens = max_sentence_tokens
        self.max_queued_sentences = max_queued_sentences
        self.timeout_s = timeout_s
        self.max_decoding_length = max_decoding_length
        self.max_beam_size = max_beam_size
        self.inter_threads = inter_threads
        self.intra_threads = intra_threads
        self.device = device
        # A cap on the loaded models loads them on first use.
        self.lazy = lazy or max_loaded_models is not None
        self.max_loaded_models = max_loaded_models
        self.compute_type = compute_type
        self.read_timeout_s = read_timeout_s
        self.limit_concurrency = limit_concurrency
        self.max_waiting_per_client = max_waiting_per_client
        self.max_waiting_connections = max_waiting_connections
        self.timeout_keep_alive_s = timeout_keep_alive_s
        self.allowed_hosts = list(allowed_hosts)
        self.cors_origins = list(cors_origins or ())
        self.source_language = source_language
        self.target_language = target_language
        self.access_log = access_log
        #: Whether ``GET /`` serves the page for a person (:mod:`ldr_opennmt.serving.ui`).
        self.ui = ui
        #: The token of the admin routes (:mod:`ldr_opennmt.serving.admin`), or ``None``: off.
        self.admin_token = admin_token
        self.check()

    def check(self):
        """Raises :class:`UserError` on a value out of range."""
        for name in (
            "max_batch_size",
            "max_request_bytes",
            "max_sentences",
            "max_sentence_tokens",
            "max_queued_sentences",
            "max_decoding_length",
            "max_beam_size",
            "inter_threads",
            "limit_concurrency",
            "max_waiting_per_client",
            "max_waiting_connections",
        ):
            if getattr(self, name) < 1:
                raise UserError("--%s must be >= 1, got %s" % (name, getattr(self, name)))
        for name in ("max_wait_ms", "intra_threads"):
            if getattr(self, name) < 0:
                raise UserError("--%s must be >= 0, got %s" % (name, getattr(self, name)))
        for name in ("timeout_s", "read_timeout_s", "timeout_keep_alive_s"):
            if not getattr(self, name) > 0:
                raise UserError("--%s must be > 0, got %s" % (name, getattr(self, name)))
        if self.timeout_s * 1000.0 <= self.max_wait_ms:
            raise UserError(
                "--timeout_s %g is not longer than --max_wait_ms %g (%g s): every request would "
                "time out while its batch waits"
                % (self.timeout_s, self.max_wait_ms, self.max_wait_ms / 1000.0)
            )
        if not self.allowed_hosts:
            raise UserError("--allowed_hosts: give at least one host name (or * for any)")
        for host in self.allowed_hosts:
            if "*" in host and host != "*" and not (host.startswith("*.") and "*" not in host[1:]):
                raise UserError(
                    "--allowed_hosts: %s: a wildcard must be * or *.domain" % api_models.short(host)
                )
        http_io.check_cors_origins(self.cors_origins)
        if self.max_loaded_models is not None and self.max_loaded_models < 1:
            raise UserError("--max_loaded_models must be >= 1, got %s" % self.max_loaded_models)
