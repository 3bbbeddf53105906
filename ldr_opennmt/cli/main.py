"""``ldr-main``: ``onmt-main`` with the multi-domain Runner, plus ``predict_domains``.

Every flag and sub-command of ``onmt-main`` works unchanged (OpenNMT-tf's own
parser and dispatch run, with :class:`ldr_opennmt.training.runner.Runner`):

    ldr-main --model model_defs/ldr_transformer.py --config data.yml run.yml train --with_eval

One sub-command is added, for a domain classifier
(``model_defs/domain_classifier.py``): label text files with predicted domains
and, given the true labels, report per-domain precision and recall::

    ldr-main --config data.yml classifier.yml predict_domains \\
        --features_file test.medical.en test.religious.en \\
        --labels_file test.medical.domain test.religious.domain \\
        --output_dir pred/ [--model_config mt.yml]

``ldr-main --list-families [--user_module FILE ...]`` prints the registered model
families (:mod:`ldr_opennmt.registry`) with their capabilities, a user module's too.
``ldr-main check-family NAME [--user_module FILE ...]`` checks that a family keeps the
extension contract (:mod:`ldr_opennmt.checks.family`): one line per check, exit 1 when
one fails.

It writes ``pred/test.medical.pred`` (one domain name per line; the input file
name without its last extension, plus ``.pred``), ``pred/classification.md`` and
``pred/classification.json``. With ``--model_config``, the translation model's
domain list must equal the classifier's.
"""

import argparse
import json
import os
import sys
import tempfile
import time

import tensorflow as tf

from ldr_opennmt import config_loader
from ldr_opennmt import domains as domains_lib
from ldr_opennmt import errors, gpu, registry, upstream
from ldr_opennmt.checks import family as family_check
from ldr_opennmt.cli import ArgumentParser, families
from ldr_opennmt.errors import UserError
from ldr_opennmt.evaluation import classification
from ldr_opennmt.training import corpora as corpora_lib
from ldr_opennmt.training.runner import Runner
from ldr_opennmt.upstream import command_line, onmt_main
from ldr_opennmt.utils import read_lines, write_lines_atomic

PREDICT_DOMAINS = "predict_domains"
LIST_FAMILIES = "--list-families"
CHECK_FAMILY = "check-family"


def _run_type(argv):
    for arg in argv:
        if arg in command_line.ONMT_RUN_TYPES or arg == PREDICT_DOMAINS:
            return arg
    return None


def main(argv=None):
    """The ``ldr-main`` entry point (errors printed as ``onmt-main`` users see them)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    upstream.install()
    return errors.run_main(errors.PACKAGE_PROG, _main, argv)


#: What ``ldr-main --help`` adds after ``onmt-main``'s usage.
ADDITIONS = """
ldr-main adds to onmt-main (every onmt-main option and run type above works unchanged):
  ldr-main --list-families [--user_module FILE ...]
                        print the registered model families and their capabilities
  ldr-main check-family NAME [--user_module FILE ...]
                        check that a family keeps the extension contract (one line each)
  ldr-main --config CONFIG ... predict_domains --features_file ... --output_dir DIR
                        label text files with a domain classifier's predicted domains
  the run types train, eval, infer, export, score: per-domain corpora (data: train_corpora,
  eval_corpora), domain labels, the training lock and checks (docs/ldr-main.md)"""


def _help_requested(argv):
    return any(arg in ("-h", "--help") for arg in argv) and _run_type(argv) is None


def _main(argv):
    if _help_requested(argv) and not argv[:1] == [CHECK_FAMILY]:
        # OpenNMT-tf's parser prints onmt-main's usage and exits; ldr-main's additions follow.
        try:
            return onmt_main.run_onmt_main(argv, Runner)
        except SystemExit as e:
            if e.code in (0, None):
                print(ADDITIONS)
            raise
    if LIST_FAMILIES in argv or LIST_FAMILIES.replace("-", "_") in argv:
        return list_families_main(argv)
    if argv[:1] in ([CHECK_FAMILY], [CHECK_FAMILY.replace("-", "_")]):
        return check_family_main(argv[1:])
    # GPUs asked for (--num_gpus, --mixed_precision, or a GPU that nvidia-smi sees) but none
    # registered by TensorFlow: one line naming the CUDA libraries, not days on the CPU.
    gpu.check_command_line(argv, prog="ldr-main")
    if _run_type(argv) == PREDICT_DOMAINS:
        return predict_domains_main(argv)
    return onmt_main.run_onmt_main(argv, Runner)


def list_families_main(argv):
    """``ldr-main --list-families``: the family registry as a Markdown table."""
    parser = ArgumentParser(
        prog="ldr-main %s" % LIST_FAMILIES,
        description="Print the registered model families and their capabilities.",
    )
    parser.add_argument(LIST_FAMILIES, "--list_families", action="store_true", required=True)
    parser.add_argument(
        "--user_module",
        nargs="+",
        default=[],
        help="Python files (or module names) that register families of their own",
    )
    args = parser.parse_args(argv)
    for spec in args.user_module:
        registry.load_user_module(spec)
    print("\n".join(families.describe()))
    return 0


def check_family_main(argv):
    """``ldr-main check-family NAME``: the family's conformance checks, one line each."""
    parser = ArgumentParser(
        prog="ldr-main %s" % CHECK_FAMILY,
        description="Check that a model family keeps the extension contract: build it tiny, "
        "train it a few steps in each mode it declares, export and translate it.",
    )
    parser.add_argument("family", help="the family's name (or short name)")
    parser.add_argument(
        "--user_module",
        nargs="+",
        default=[],
        help="Python files (or module names) that register families of their own",
    )
    parser.add_argument(
        "--work_dir",
        help="where to keep the generated data, exports and checkpoints (default: a "
        "temporary directory, removed at the end)",
    )
    parser.add_argument(
        "--skip",
        nargs="+",
        default=[],
        choices=family_check.CHECKS[1:],
        help="checks not to run (savedmodel is the slowest: it traces beam search)",
    )
    args = parser.parse_args(argv)
    for spec in args.user_module:
        registry.load_user_module(spec)
    family = registry.find(args.family)
    if args.work_dir and os.path.exists(args.work_dir) and os.listdir(args.work_dir):
        raise UserError("--work_dir %s: not empty (give a new directory)" % args.work_dir)
    start = time.time()
    with tempfile.TemporaryDirectory(prefix="ldr-check-family-") as scratch:
        check = family_check.FamilyCheck(family, args.work_dir or scratch, skip=args.skip)
        print("check-family %s" % family.name, flush=True)
        results = check.run(report=lambda result: print(result.line(), flush=True))
    if check.caps is not None:
        print(family_check.header(family, check.caps))
    failed = [result.name for result in results if result.status == family_check.FAIL]
    print(
        "%s: %s (%d checks, %.0f s)"
        % (
            family.name,
            "FAILED %s" % ", ".join(failed) if failed else "passed",
            len(results),
            time.time() - start,
        )
    )
    return 1 if failed else 0


def _prediction_path(output_dir, features_file):
    """``OUTPUT_DIR/NAME.pred``: the features file's name without its last extension (two
    inputs that would share one are refused by :func:`predict_domains_main`)."""
    name = os.path.basename(features_file)
    stem = os.path.splitext(name)[0] if "." in name else name
    return os.path.join(output_dir, stem + ".pred")


def predict_domains_main(argv):
    parser = ArgumentParser(
        prog="ldr-main ... %s" % PREDICT_DOMAINS,
        description="Label text with a trained domain classifier.",
    )
    parser.add_argument("--config", required=True, nargs="+")
    parser.add_argument("--model_dir")
    parser.add_argument("--model", default="")
    parser.add_argument("--auto_config", default=None, action="store_true")
    parser.add_argument("--checkpoint_path")
    parser.add_argument("--log_level", default="INFO")
    parser.add_argument("--placeholder", action="store_true", help=argparse.SUPPRESS)
    subparsers = parser.add_subparsers(dest="run_type", required=True)
    sub = subparsers.add_parser(PREDICT_DOMAINS)
    sub.add_argument("--features_file", nargs="+", required=True, help="source text files")
    sub.add_argument("--labels_file", nargs="+", help="true domain label files, aligned")
    sub.add_argument("--output_dir", required=True)
    sub.add_argument(
        "--model_config",
        nargs="+",
        help="configuration of the translation model the labels are for",
    )
    argv = list(argv)
    argv.insert(argv.index(PREDICT_DOMAINS), "--placeholder")
    args = parser.parse_args(argv)
    # Refused before any work: two inputs whose predictions would share one file (the same
    # name without extension: a/test.en and b/test.en, or test.en and test.de), and outputs
    # that would replace an input.
    inputs = {}
    for path in args.features_file + (args.labels_file or []):
        inputs.setdefault(os.path.realpath(path), path)
    outputs = [(path, _prediction_path(args.output_dir, path)) for path in args.features_file]
    if args.labels_file:
        outputs += [
            (None, os.path.join(args.output_dir, "classification.%s" % extension))
            for extension in ("json", "md")
        ]
    written = {}
    for features_file, output in outputs:
        key = os.path.realpath(output)
        if key in written:
            raise UserError(
                "--features_file: %s and %s would both write their predictions to %s (the "
                "file name without its last extension, plus .pred): give them different names"
                % (written[key], features_file, output)
            )
        if key in inputs:
            raise UserError(
                "--output_dir %s: the output %s would replace the input %s: choose another "
                "output directory" % (args.output_dir, output, inputs[key])
            )
        written[key] = features_file
    onmt_main.initialize_logging(args.log_level)
    runner = Runner.from_files(
        args.config,
        model_dir=args.model_dir,
        model_file=args.model,
        auto_config=args.auto_config,
    )
    if not runner.is_classifier:
        raise UserError(
            "%s needs a domain classifier (model_defs/domain_classifier.py), not %s"
            % (PREDICT_DOMAINS, type(runner.model).__name__)
        )
    domains = runner.domains
    if args.model_config:
        model_domains = corpora_lib.domain_names(
            config_loader.load_run_config(args.model_config).get("data", {})
        )
        if model_domains != domains:
            raise UserError(
                "the classifier's domains (%s) differ from those of %s (%s)"
                % (", ".join(domains), " ".join(args.model_config), ", ".join(model_domains))
            )
    if args.labels_file and len(args.labels_file) != len(args.features_file):
        raise UserError(
            "%d features files but %d labels files"
            % (len(args.features_file), len(args.labels_file))
        )
    references = []
    if args.labels_file:
        for features_file, labels_file in zip(args.features_file, args.labels_file):
            ids = domains_lib.read_label_file(
                labels_file,
                domains,
                expected_lines=domains_lib.count_lines(features_file),
                source_path=features_file,
            )
            references += [domains_lib.GENERIC if i < 0 else domains[i] for i in ids]
    os.makedirs(args.output_dir, exist_ok=True)
    predictions = []
    for features_file in args.features_file:
        if not tf.io.gfile.exists(features_file):
            raise UserError("%s: file not found" % features_file)
        path = _prediction_path(args.output_dir, features_file)
        # Runner.infer writes under an exclusive temporary name, renamed when complete.
        runner.infer(features_file, predictions_file=path, checkpoint_path=args.checkpoint_path)
        predictions += read_lines(path)
        print("%s -> %s" % (features_file, path), file=sys.stderr)
    if references:
        scores = classification.precision_recall(references, predictions, domains)
        table = classification.format_table(scores)
        write_lines_atomic(
            os.path.join(args.output_dir, "classification.json"), [json.dumps(scores, indent=2)]
        )
        write_lines_atomic(os.path.join(args.output_dir, "classification.md"), [table])
        print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
