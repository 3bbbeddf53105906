"""An ``onmt-main`` command line read as ``onmt-main`` reads it: its run type and its
``model_dir``.

Used by ``ldr-main`` (:func:`ldr_opennmt.upstream.onmt_main.run_onmt_main`) and by the lock of
a stock ``onmt-main ... train``
(:func:`ldr_opennmt.upstream.patches.lock_stock_onmt_main_training`). The configuration files
are read with the package's bounded loader (:func:`ldr_opennmt.config_loader.load_run_config`)
for their ``model_dir`` only: no user module is loaded here (that is
:func:`ldr_opennmt.upstream.onmt_main.load_run_config`'s).
"""

import argparse
import os

from ldr_opennmt import config_loader, errors

#: ``onmt-main``'s run types (its sub-commands).
ONMT_RUN_TYPES = (
    "train",
    "eval",
    "infer",
    "export",
    "score",
    "average_checkpoints",
    "update_vocab",
)


def split_run_type(argv):
    """(global arguments, run type, run arguments), split as ``onmt-main`` splits them
    (at the first argument that is a run type)."""
    for i, arg in enumerate(argv):
        if arg in ONMT_RUN_TYPES:
            return argv[:i], arg, argv[i + 1 :]
    return argv, None, []


def _global_arguments(global_argv):
    """``--config``, ``--model_dir`` and ``--run_dir`` of ``onmt-main``'s global arguments, or
    ``None`` if they do not parse (``onmt-main`` then reports the problem itself)."""
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    parser.add_argument("--config", nargs="+")
    parser.add_argument("--model_dir")
    parser.add_argument("--run_dir", default="")
    try:
        return parser.parse_known_args(global_argv)[0]
    except SystemExit:
        return None


def command_line_configs(global_argv):
    """The ``--config`` files of ``onmt-main``'s global arguments (``[]`` if none parse)."""
    args = _global_arguments(global_argv)
    return list(args.config or []) if args is not None else []


def command_line_model_dir(global_argv):
    """The model directory ``onmt-main`` will use, or ``None`` if the arguments do not
    say (``onmt-main`` then reports the problem itself)."""
    args = _global_arguments(global_argv)
    if args is None or not args.config:
        return None
    model_dir = args.model_dir or config_loader.load_run_config(args.config).get("model_dir")
    if not model_dir:
        raise errors.UserError(
            "%s: no model_dir in the configuration or on the command line" % " ".join(args.config)
        )
    return os.path.join(args.run_dir, model_dir) if args.run_dir else model_dir
