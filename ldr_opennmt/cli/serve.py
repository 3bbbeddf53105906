"""``ldr-serve``: serve an ``ldr-export ctranslate2`` directory over HTTP.

See :mod:`ldr_opennmt.serving.server` and docs/serving.md.
"""

import argparse

from ldr_opennmt import errors

PROG = "ldr-serve"


def parse_args(argv):
    from ldr_opennmt.serving import server  # pylint: disable=import-outside-toplevel

    defaults = server.Options(model_dir=None)
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Serves the CTranslate2 models of ldr-export ctranslate2 (one per domain) "
        "with a JSON API: POST /translate, GET /domains, GET /health, /docs.",
    )
    parser.add_argument("--model_dir", required=True, help="The ldr-export ctranslate2 directory.")
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
    for name, kind, text in options:
        default = getattr(defaults, name)
        parser.add_argument(
            "--" + name, type=kind, default=default, help="%s Default: %s." % (text, default)
        )
    parser.add_argument("--device", default="cpu", help="cpu, cuda or auto.")
    parser.add_argument("--log_level", default="info", help="uvicorn's log level.")
    return parser.parse_args(argv)


def run(args):
    from ldr_opennmt.serving import server  # pylint: disable=import-outside-toplevel

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
    ]
    options = server.Options(args.model_dir, **{name: getattr(args, name) for name in names})
    return server.serve(options, host=args.host, port=args.port, log_level=args.log_level)


def main(argv=None):
    """The ``ldr-serve`` entry point."""
    args = parse_args(argv)
    status = errors.run_main(PROG, run, args)
    if status == errors.EXIT_STATUS:
        raise SystemExit(status)
    return status


if __name__ == "__main__":
    main()
