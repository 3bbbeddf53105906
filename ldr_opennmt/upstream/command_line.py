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


#: The outputs of each run type's arguments: ``{run type: [(option, is a directory)]}``.
RUN_OUTPUTS = {
    "infer": [("--predictions_file", False)],
    "score": [("--output_file", False)],
    "export": [("--output_dir", True)],
    "average_checkpoints": [("--output_dir", True)],
}


def output_paths(global_argv, run_type, run_argv):
    """What an ``onmt-main`` command line will write: ``[(what, path, is a directory)]``: the
    model directory of a training, and the files and directories its run type's options
    name (``infer --predictions_file``, ``export --output_dir``, ...)."""
    outputs = []
    if run_type == "train":
        model_dir = command_line_model_dir(global_argv)
        if model_dir is not None:
            outputs.append(("model_dir", model_dir, True))
    options = RUN_OUTPUTS.get(run_type, [])
    if options:
        parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
        for option, _ in options:
            parser.add_argument(option)
        try:
            args = parser.parse_known_args(run_argv)[0]
        except SystemExit:
            return outputs  # onmt-main reports the problem itself.
        for option, is_directory in options:
            path = getattr(args, option[2:])
            if path:
                outputs.append((option, path, is_directory))
    return outputs
