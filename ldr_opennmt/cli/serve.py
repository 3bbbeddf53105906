"""``ldr-serve``: serve an ``ldr-export ctranslate2`` directory or a SavedModel over HTTP.

See :mod:`ldr_opennmt.serving.server` and docs/serving.md.
"""

import argparse
import inspect

from ldr_opennmt import errors

PROG = "ldr-serve"


def _server_module():
    """:mod:`ldr_opennmt.serving.server`, or one line saying how to install what it needs."""
    try:
        from ldr_opennmt.serving import server  # pylint: disable=import-outside-toplevel
    except ImportError as e:
        if e.name not in ("fastapi", "pydantic", "starlette", "uvicorn"):
            raise
        raise errors.UserError(
            "ldr-serve needs the serve extra (no module %s): pip install -e '.[serve]'" % e.name
        ) from None
    return server


def parse_args(argv):
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Serves a multi-domain model with a JSON API (POST /translate, GET /domains, "
        "GET /health, /docs): the CTranslate2 models of ldr-export ctranslate2 (one per "
        "domain), or a SavedModel of ldr-main export (a domain input).",
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
    parser.add_argument("--device", default="cpu", help="cpu, cuda or auto.")
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
    ]
    options = server.Options(args.model_dir, **{name: getattr(args, name) for name in names})
    return server.serve(options, host=args.host, port=args.port, log_level=args.log_level)


def main(argv=None):
    """The ``ldr-serve`` entry point."""
    status = errors.run_main(PROG, lambda: run(parse_args(argv)))
    if status == errors.EXIT_STATUS:
        raise SystemExit(status)
    return status


if __name__ == "__main__":
    main()
