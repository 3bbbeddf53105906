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
    ct2.add_argument("--force", action="store_true", help="replace an existing output_dir")
    ct2.add_argument("--log_level", default="WARNING")
    return parser


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
