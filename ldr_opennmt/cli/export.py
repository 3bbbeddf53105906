"""``ldr-export``: fast-inference exports of a trained multi-domain model.

    ldr-export ctranslate2 --config data.yml run.yml [--auto_config] \\
        [--checkpoint_path PATH] --output_dir export/ct2 \\
        [--domains medical generic] [--quantization int8] [--force]

writes one CTranslate2 model per domain (``export/ct2/medical``, ...,
``export/ct2/generic``) and ``export/ct2/manifest.json``; see
:mod:`ldr_opennmt.export.ct2_export`. The model is loaded the one way every
command loads a trained model (``Runner.from_files`` then ``Runner.restore``:
``model_dir``'s ``model_description.py``, per-domain corpora, ``--auto_config``),
from the latest checkpoint or ``--checkpoint_path``; the checkpoint exported (path and
step) is printed and recorded in the manifest (basename, step, sha256). An existing
``--output_dir`` is refused before the model is loaded.
"""

import os
import sys

from ldr_opennmt import errors, upstream, utils
from ldr_opennmt.cli import ArgumentParser
from ldr_opennmt.export import ct2_export
from ldr_opennmt.training.runner import Runner
from ldr_opennmt.upstream import onmt_main


def _parser():
    parser = ArgumentParser(
        prog="ldr-export", description="Fast-inference exports of a multi-domain model."
    )
    subparsers = parser.add_subparsers(dest="format", required=True)
    ct2 = subparsers.add_parser(
        "ctranslate2",
        help="one folded CTranslate2 model per domain",
        description="Export one CTranslate2 model per domain (and generic), folded from a "
        "multi-domain Transformer, with a manifest.",
    )
    ct2.add_argument("--config", required=True, nargs="+", help="run configuration files")
    ct2.add_argument("--model_dir", help="overrides model_dir of the configuration")
    ct2.add_argument(
        "--model", default="", help="model definition (default: model_dir/model_description.py)"
    )
    ct2.add_argument("--auto_config", default=None, action="store_true")
    ct2.add_argument("--checkpoint_path", help="checkpoint to export (default: the latest)")
    ct2.add_argument("--output_dir", required=True)
    ct2.add_argument(
        "--domains",
        nargs="+",
        help="domains to export, declared names or generic (default: all, then generic)",
    )
    ct2.add_argument(
        "--quantization",
        choices=ct2_export.QUANTIZATIONS,
        help="CTranslate2 weight type (default: none, the trained float32 weights)",
    )
    ct2.add_argument(
        "--corpus",
        help="a corpus built by ldr-data (its raw/ text) that --domain_guard and --confidence"
        " learn from: the model's corpus",
    )
    ct2.add_argument(
        "--domain_guard",
        action="store_true",
        help="fit the wrong-domain guard (domain: auto in ldr-serve without TensorFlow) on the"
        " corpus's training text; its threshold on the dev sets",
    )
    ct2.add_argument(
        "--confidence",
        action="store_true",
        help="calibrate a per-sentence confidence and its low_confidence threshold per domain"
        " on the corpus's dev sets",
    )
    ct2.add_argument("--force", action="store_true", help="replace an existing output_dir")
    ct2.add_argument("--log_level", default="WARNING")
    return parser


def _quality_corpus(args):
    """The ``corpus.json`` of ``--corpus`` when the guard or the confidence is asked for (read
    before the model is loaded: a wrong corpus is refused at once), else ``None``.

    Raises:
      UserError: on ``--corpus`` without either option, either option without it, or a
        directory that is not a corpus built by ldr-data.
    """
    asked = [name for name in ("domain_guard", "confidence") if getattr(args, name)]
    if not asked:
        if args.corpus:
            raise errors.UserError(
                "--corpus %s: nothing to learn from it: add --domain_guard and/or --confidence"
                % args.corpus
            )
        return None
    if not args.corpus:
        raise errors.UserError(
            "--%s needs --corpus: the corpus built by ldr-data that the model was trained on"
            % asked[0]
        )
    from ldr_opennmt.data import corpus as corpus_lib  # pylint: disable=import-outside-toplevel

    return corpus_lib.load_info(args.corpus)


def _quality_writer(args, corpus, model):
    """The ``quality`` callable of :func:`ldr_opennmt.export.ct2_export.export`: the guard
    and the confidence fitted on ``--corpus`` (:mod:`ldr_opennmt.export.quality`)."""
    from ldr_opennmt.export import quality as quality_lib  # pylint: disable=C0415
    from ldr_opennmt.serving import ct2_models, manifest  # pylint: disable=C0415

    declared = list(model.domains or [])
    missing = [domain for domain in declared if domain not in corpus["domains"]]
    if missing:
        raise errors.UserError(
            "--corpus %s: no domain %r (it has %s): give the corpus the model was trained on"
            % (args.corpus, missing[0], ", ".join(corpus["domains"]))
        )

    def log(line):
        print("ldr-export: %s" % line, file=sys.stderr)

    def write(directory, written):
        models = {}
        if args.confidence:
            for domain, sub in written["domains"].items():
                models[domain] = ct2_models.DomainModel(domain, os.path.join(directory, sub))
                if models[domain].source_tokenizer is None:
                    raise errors.UserError(
                        "--confidence: the export has no source tokenizer to translate the dev"
                        " text of --corpus with (export from a corpus built by ldr-data)"
                    )
        quality_lib.write_quality(
            directory,
            models,
            args.corpus,
            (corpus["source_lang"], corpus["target_lang"]),
            declared,
            args.domain_guard,
            args.confidence,
            log,
        )
        path = os.path.join(directory, quality_lib.QUALITY_FILE)
        return {"file": quality_lib.QUALITY_FILE, "sha256": manifest.file_sha256(path)}

    return write


def ctranslate2_main(args):
    """Exports as :obj:`args` says; prints the checkpoint exported and each domain's model.

    The output directory is checked before the model is loaded (an existing directory
    without ``--force`` is refused at once, not after a minute of loading), and the
    checkpoint is resolved and hashed before it is restored: a training that writes
    checkpoints meanwhile cannot make the manifest name another one than the one exported.
    """
    output_dir = os.path.abspath(args.output_dir)
    ct2_export.check_quantization(args.quantization)
    ct2_export.check_replaceable(output_dir, args.force)
    utils.check_writable(args.output_dir, "--output_dir")
    corpus = _quality_corpus(args)
    runner = Runner.from_files(
        args.config, model_dir=args.model_dir, model_file=args.model, auto_config=args.auto_config
    )
    checkpoint_path = runner.latest_checkpoint(args.checkpoint_path)
    checkpoint = ct2_export.checkpoint_info(checkpoint_path)
    print(ct2_export.describe_checkpoint(checkpoint, checkpoint_path), file=sys.stderr)
    model, checkpoint_path = runner.restore(checkpoint_path)
    manifest = ct2_export.export(
        model,
        output_dir,
        domains=args.domains,
        quantization=args.quantization,
        checkpoint_path=checkpoint_path,
        checkpoint=checkpoint,
        force=args.force,
        quality=None if corpus is None else _quality_writer(args, corpus, model),
    )
    for domain, directory in manifest["domains"].items():
        print("%s -> %s/%s" % (domain, args.output_dir, directory))
    return 0


def main(argv=None):
    """The ``ldr-export`` entry point."""
    args = _parser().parse_args(sys.argv[1:] if argv is None else argv)
    onmt_main.initialize_logging(args.log_level)
    upstream.install()
    return errors.run_main("ldr-export", ctranslate2_main, args)


if __name__ == "__main__":
    sys.exit(main())
