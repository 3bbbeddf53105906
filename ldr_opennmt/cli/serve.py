"""``ldr-serve``: serve an ``ldr-export ctranslate2`` directory or a SavedModel over HTTP.

See :mod:`ldr_opennmt.serving.server` and docs/serving.md.
"""

import inspect
import sys

from ldr_opennmt import errors
from ldr_opennmt.cli import ArgumentParser

PROG = "ldr-serve"


def _server_module():
    """:mod:`ldr_opennmt.serving.server`, or one line saying how to install what it needs."""
    return _serving_module("server")


def _serving_module(name):
    """``ldr_opennmt.serving.<name>`` (``server``, ``app``, ``admin``), or one line saying how to
    install what it needs."""
    # pylint: disable=import-outside-toplevel
    try:
        if name == "app":
            from ldr_opennmt.serving import app as module
        elif name == "admin":
            from ldr_opennmt.serving import admin as module
        else:
            from ldr_opennmt.serving import server as module
    except ImportError as e:
        if e.name not in ("fastapi", "pydantic", "starlette", "uvicorn"):
            raise
        raise errors.UserError(
            "ldr-serve needs the serve extra (no module %s): pip install -e '.[serve]'" % e.name
        ) from None
    return module


def parse_args(argv):
    parser = ArgumentParser(
        prog=PROG,
        description="Serves a multi-domain model with a JSON API (POST /translate, GET /domains, "
        "GET /health, GET /metrics, /docs; LibreTranslate's POST /translate, GET /languages and "
        "POST /detect; OpenNMT-py's POST /translator/translate; POST /detect_domain): the "
        "CTranslate2 models of ldr-export ctranslate2 (one per "
        "domain), or a SavedModel of ldr-main export (a domain input). GET / is a page for a "
        "person (translate, compare the domains; --no-ui: none).",
    )
    parser.add_argument(
        "--model_dir",
        required=True,
        help="An ldr-export ctranslate2 directory (its manifest.json), or a SavedModel "
        "exported by ldr-main export.",
    )
    parser.add_argument(
        "--classifier",
        help="The domain classifier (model_defs/domain_classifier.py) exported by ldr-main "
        "export: it labels the sentences sent without a domain (default: generic).",
    )
    parser.add_argument("--host", default="127.0.0.1", help="Address to listen on.")
    parser.add_argument("--port", type=int, default=8000, help="Port to listen on.")
    options = [
        ("max_batch_size", int, "Sentences per decoded batch (requests of a domain are grouped)."),
        ("max_wait_ms", float, "How long a batch waits for more requests of its domain."),
        ("max_request_bytes", int, "Largest request body, in bytes (413 above)."),
        ("max_sentences", int, "Most sentences per request."),
        ("max_sentence_tokens", int, "Most tokens per sentence, after tokenization."),
        ("max_queued_sentences", int, "Sentences accepted and not yet answered (503 above)."),
        ("timeout_s", float, "Seconds a request may wait for its translations (504 after)."),
        ("max_decoding_length", int, "Most target tokens per translation."),
        ("max_beam_size", int, "Largest beam_size a request may ask for."),
        ("inter_threads", int, "Batches decoded at once per domain (worker threads)."),
        ("intra_threads", int, "Threads per batch (0: CTranslate2's default)."),
        (
            "read_timeout_s",
            float,
            "Seconds a request's line and headers, and then its body, may take to arrive (408 "
            "after).",
        ),
        (
            "limit_concurrency",
            int,
            "Most requests answered at once, from their headers to their answer (503 with "
            "Retry-After past it); connections waiting for a request do not count.",
        ),
        (
            "max_waiting_per_client",
            int,
            "Most connections of one client address waiting for a request (new, or kept alive "
            "between requests); past it, its oldest is closed (408) for the new one.",
        ),
        (
            "max_waiting_connections",
            int,
            "Most connections waiting for a request, of all clients; past it, the oldest is "
            "closed (408) for the new one.",
        ),
        ("timeout_keep_alive_s", float, "Seconds an idle keep-alive connection stays open."),
    ]
    defaults = {
        name: param.default
        for name, param in inspect.signature(_server_module().Options).parameters.items()
        if param.default is not inspect.Parameter.empty
    }
    for name, kind, text in options:
        default = defaults[name]
        parser.add_argument(
            "--" + name, type=kind, default=default, help="%s Default: %s." % (text, default)
        )
    parser.add_argument(
        "--device", default="cpu", help="CTranslate2: cpu, cuda or auto. Default: cpu."
    )
    parser.add_argument(
        "--compute_type",
        default="default",
        help="CTranslate2: the type to compute with (default: the model's; int8, int8_float16, "
        "float16, bfloat16, float32, ...: converted when the model is loaded).",
    )
    parser.add_argument(
        "--allowed_hosts",
        nargs="+",
        default=list(defaults["allowed_hosts"]),
        help="Host header values accepted (400 otherwise; '*.example.com' for subdomains, "
        "'*' for any). Default: %s." % " ".join(defaults["allowed_hosts"]),
    )
    parser.add_argument(
        "--cors_origins",
        nargs="+",
        default=[],
        help="Origins whose web pages may call this server (CORS; '*' for any). Default: "
        "none (no CORS headers: browsers refuse cross-origin calls).",
    )
    parser.add_argument(
        "--source_language",
        help="The source language code (GET /languages, LibreTranslate's source); default: "
        "the export's manifest.json source_language.",
    )
    parser.add_argument(
        "--target_language",
        help="The target language code; default: the export's manifest.json target_language.",
    )
    parser.add_argument(
        "--no_access_log",
        dest="access_log",
        action="store_false",
        help="No access log line per request (they never hold bodies).",
    )
    parser.add_argument(
        "--no-ui",
        dest="ui",
        action="store_false",
        help="No page for a person at / (GET / answers 404): an API-only deployment. By "
        "default / is a page to translate a text and compare its translation in every domain.",
    )
    parser.add_argument(
        "--admin_token_file",
        metavar="FILE",
        help="Turns on the admin routes (add, replace or remove a domain's model while the "
        "server runs: /admin/domains) for requests with Authorization: Bearer TOKEN, TOKEN "
        "being this file's first line (at least 16 characters; or the environment variable "
        "LDR_SERVE_ADMIN_TOKEN). Default: off.",
    )
    parser.add_argument(
        "--lazy",
        action="store_true",
        help="CTranslate2 directory: load a domain's model on its first use, not at start.",
    )
    parser.add_argument(
        "--max_loaded_models",
        type=int,
        help="CTranslate2 directory: most models loaded at once (implies --lazy; the least "
        "recently used is unloaded first). Default: no cap.",
    )
    parser.add_argument("--log_level", default="info", help="uvicorn's log level.")
    return parser.parse_args(argv)


def run(args):
    server = _server_module()
    if not 0 <= args.port <= 65535:
        raise errors.UserError("--port must be between 0 and 65535, got %d" % args.port)
    names = [
        "max_batch_size",
        "max_wait_ms",
        "max_request_bytes",
        "max_sentences",
        "max_sentence_tokens",
        "max_queued_sentences",
        "timeout_s",
        "max_decoding_length",
        "max_beam_size",
        "inter_threads",
        "intra_threads",
        "device",
        "classifier",
        "lazy",
        "max_loaded_models",
        "read_timeout_s",
        "limit_concurrency",
        "max_waiting_per_client",
        "max_waiting_connections",
        "timeout_keep_alive_s",
        "compute_type",
        "allowed_hosts",
        "cors_origins",
        "source_language",
        "target_language",
        "access_log",
        "ui",
    ]
    admin = _serving_module("admin")
    token = admin.read_token(args.admin_token_file)
    options = server.Options(
        args.model_dir, admin_token=token, **{name: getattr(args, name) for name in names}
    )
    # The port first: a second server on a port in use stops here, before loading anything.
    app = _serving_module("app")
    sock = app.bind(args.host, args.port)
    return app.serve(options, host=args.host, port=args.port, log_level=args.log_level, sock=sock)


def main(argv=None):
    """The ``ldr-serve`` entry point."""
    return errors.exit_on_failure(errors.run_main(PROG, lambda: run(parse_args(argv))))


if __name__ == "__main__":
    sys.exit(main())
