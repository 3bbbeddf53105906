"""``ldr-translate``: translate text with an exported multi-domain SavedModel, or with the
CTranslate2 models of ``ldr-export ctranslate2`` (one per domain).

See :mod:`ldr_opennmt.serving.savedmodel_translate` and :mod:`ldr_opennmt.serving.ct2_client`
for what it does. A CTranslate2 directory needs no TensorFlow (the serving runtime,
``.venv-serve``); a SavedModel needs the training environment, which is said in one line where
TensorFlow is missing. Ctrl-C stops it with one line (``ldr-translate: interrupted``, exit
status 130) and no output file.
"""

import sys

from ldr_opennmt import errors
from ldr_opennmt.cli import ArgumentParser
from ldr_opennmt.errors import UserError
from ldr_opennmt.serving import manifest, textio

PROG = "ldr-translate"


def parse_args(argv):
    parser = ArgumentParser(
        prog=PROG,
        description="Translates text with an exported multi-domain SavedModel, or with the "
        "CTranslate2 models of ldr-export ctranslate2 (each line with its domain's model).",
    )
    parser.add_argument(
        "--export",
        required=True,
        help="The SavedModel directory, or an ldr-export ctranslate2 directory (with its "
        "manifest.json).",
    )
    domain = parser.add_mutually_exclusive_group(required=True)
    domain.add_argument("--domain", help="The domain of every line (a declared name or generic).")
    domain.add_argument(
        "--domain_file",
        help="One domain label per input line (a declared name or generic); a file, a "
        "stream (/dev/stdin, <(...)) or - for standard input (then give --input).",
    )
    parser.add_argument("--input", help="The input file (default, or -: standard input).")
    parser.add_argument("--output", help="The output file (default: standard output).")
    parser.add_argument("--batch_size", type=int, default=32, help="Sentences per batch.")
    parser.add_argument(
        "--max_source_length",
        type=int,
        help="Translate only the first N tokens of each input line (after tokenization); "
        "default: the export's maximum_source_length (assets.extra/inference.json), which N "
        "may not exceed, or no limit. Longer lines are counted in one warning line.",
    )
    parser.add_argument(
        "--beam_size",
        type=int,
        help="CTranslate2 directory only: the beam size (default 1: greedy, as ldr-serve). A "
        "SavedModel decodes with its exported params: beam_width.",
    )
    parser.add_argument(
        "--max_decoding_length",
        type=int,
        help="CTranslate2 directory only: most target tokens per translation (default 256, as "
        "ldr-serve). A SavedModel has its exported params: maximum_decoding_length.",
    )
    parser.add_argument(
        "--tokenized",
        action="store_true",
        help="The input is tokenized (tokens separated by spaces) and so is the output: "
        "no tokenizer asset is used.",
    )
    parser.add_argument(
        "--glossary",
        help="A glossary file (SOURCE<tab>TARGET lines) applied to every line: an ldr-export"
        " ctranslate2 directory of a model trained on a corpus of ldr-data terms.",
    )
    parser.add_argument(
        "--keep_empty",
        action="store_true",
        help="Write an empty line for an empty input line instead of failing.",
    )
    args = parser.parse_args(argv)
    if args.batch_size < 1:
        parser.error("--batch_size must be >= 1, got %d" % args.batch_size)
    for name in ("beam_size", "max_decoding_length"):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            parser.error("--%s must be >= 1, got %d" % (name, getattr(args, name)))
    if args.max_source_length is not None and args.max_source_length < 1:
        parser.error("--max_source_length must be >= 1, got %d" % args.max_source_length)
    return args


def run(args):
    """Translates with the export's backend: an ``ldr-export ctranslate2`` directory with
    :mod:`ldr_opennmt.serving.ct2_client` (no TensorFlow), a SavedModel with
    :mod:`ldr_opennmt.serving.savedmodel_translate` (imported only then).

    Raises:
      UserError: on bad input, before any output; for a SavedModel where TensorFlow is not
        installed.
    """
    textio.check_paths(args)
    if getattr(args, "glossary", None) and not manifest.is_export(args.export):
        raise UserError(
            "--glossary: applied by an ldr-export ctranslate2 directory; %s is not one"
            % args.export
        )
    if manifest.is_export(args.export):
        from ldr_opennmt.serving import ct2_client  # pylint: disable=import-outside-toplevel

        return ct2_client.run(args)
    try:
        from ldr_opennmt.serving import (  # pylint: disable=import-outside-toplevel
            savedmodel_translate,
        )
    except ImportError as e:
        raise UserError(
            "--export: %s: not an ldr-export ctranslate2 directory, and a SavedModel needs the "
            "training environment (TensorFlow is not installed here: %s)" % (args.export, e)
        ) from None
    return savedmodel_translate.run(args)


def main(argv=None):
    """The ``ldr-translate`` entry point. Any failure raises ``SystemExit`` with a non-zero
    status (:func:`ldr_opennmt.errors.exit_on_failure`); Ctrl-C leaves no output: it is
    written under a temporary name renamed at the end."""
    return errors.exit_on_failure(errors.run_main(PROG, lambda: run(parse_args(argv))))


if __name__ == "__main__":
    sys.exit(main())
