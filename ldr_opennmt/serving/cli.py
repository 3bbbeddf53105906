"""``ldr-export``: fast-inference exports of a trained multi-domain model.

    ldr-export ctranslate2 --config data.yml run.yml [--auto_config] \\
        [--checkpoint_path PATH] --output_dir export/ct2 \\
        [--domains medical generic] [--quantization int8] [--force]

writes one CTranslate2 model per domain (``export/ct2/medical``, ...,
``export/ct2/generic``) and ``export/ct2/manifest.json``; see
:mod:`ldr_opennmt.serving.ct2_export`. The model and its configuration are
loaded as ``ldr-main`` loads them (``model_dir``'s ``model_description.py``,
per-domain corpora, ``--auto_config``), from the latest checkpoint or
``--checkpoint_path``.
"""

import argparse
import logging
import sys

from opennmt import config as config_util
from opennmt.bin import main as onmt_main
from opennmt.utils import checkpoint as checkpoint_util

from ldr_opennmt import domains as domains_lib
from ldr_opennmt.serving import ct2_export
from ldr_opennmt.training.runner import Runner


def _parser():
    parser = argparse.ArgumentParser(
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


def load_model(config_paths, model_dir=None, model_file="", auto_config=None, checkpoint=None):
    """Loads a trained model as the multi-domain Runner does.

    Args:
      config_paths: The run configuration files.
      model_dir: Overrides ``model_dir`` of the configuration.
      model_file: A model definition file (default: the model directory's copy).
      auto_config: Whether to use the model's automatic configuration.
      checkpoint: A checkpoint path (default: the latest of the model directory).

    Returns:
      (the built model with the checkpoint's weights, the checkpoint path).

    Raises:
      DomainError: if no model directory or no checkpoint is found.
    """
    config = config_util.load_config(config_paths)
    if model_dir:
        config["model_dir"] = model_dir
    if "model_dir" not in config:
        raise domains_lib.DomainError("no model_dir in the configuration or on the command line")
    builder = config_util.load_model(
        config["model_dir"], model_file=model_file, serialize_model=False, as_builder=True
    )
    runner = Runner(builder, config, auto_config=auto_config)
    # What opennmt.Runner.export does before exporting.
    config = runner._finalize_config()
    model = runner._init_model(config)
    restored = checkpoint_util.Checkpoint.from_config(config, model).restore(
        checkpoint_path=checkpoint, weights_only=True
    )
    if restored is None:
        raise domains_lib.DomainError(
            "no checkpoint found in %s" % (checkpoint or runner.model_dir)
        )
    model.create_variables()
    return model, restored


def ctranslate2_main(args):
    model, checkpoint = load_model(
        args.config,
        model_dir=args.model_dir,
        model_file=args.model,
        auto_config=args.auto_config,
        checkpoint=args.checkpoint_path,
    )
    manifest = ct2_export.export(
        model,
        args.output_dir,
        domains=args.domains,
        quantization=args.quantization,
        checkpoint_path=checkpoint,
        force=args.force,
    )
    for domain, directory in manifest["domains"].items():
        print("%s -> %s/%s" % (domain, args.output_dir, directory))
    return 0


def main(argv=None):
    args = _parser().parse_args(sys.argv[1:] if argv is None else argv)
    onmt_main._initialize_logging(getattr(logging, args.log_level))
    return ctranslate2_main(args)


if __name__ == "__main__":
    sys.exit(main())
