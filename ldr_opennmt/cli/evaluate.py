"""``ldr-eval``: per-domain BLEU/chrF of several systems and label modes.

    ldr-eval --corpus data/default --out results/eval --baseline Mixed \\
        --system Mixed=runs/mixed.yml --system DC=runs/dc.yml --system LDR=runs/ldr.yml
"""

import argparse
import sys

from ldr_opennmt import errors
from ldr_opennmt.errors import UserError
from ldr_opennmt.evaluation import evaluate


def main(argv=None):
    """The ``ldr-eval`` entry point."""
    return errors.run_main("ldr-eval", _main, argv)


def _main(argv):
    parser = argparse.ArgumentParser(prog="ldr-eval", description=__doc__.split("\n")[0])
    parser.add_argument("--corpus", required=True, help="corpus directory built by ldr-data")
    parser.add_argument("--out", required=True, help="output directory")
    parser.add_argument(
        "--system",
        action="append",
        required=True,
        metavar="NAME=CONFIG[,CONFIG...]",
        help="a system and its OpenNMT-tf run configuration(s) (with model_dir)",
    )
    parser.add_argument("--baseline", help="system to test significance against (e.g. Mixed)")
    parser.add_argument(
        "--modes",
        nargs="+",
        default=["oracle", "generic", "wrong"],
        choices=evaluate.MODES,
        help="label modes for systems that use domains",
    )
    parser.add_argument(
        "--system-modes",
        action="append",
        default=[],
        metavar="NAME=MODE[,MODE...]",
        help="label modes for one system (overrides --modes), e.g. FT_medical=oracle",
    )
    parser.add_argument("--pred-dir", help="predicted labels (test.{domain}.pred) for mode pred")
    parser.add_argument("--max-sentences", type=int, help="first N test sentences per domain")
    parser.add_argument("--bootstrap-samples", type=int, default=1000)
    args = parser.parse_args(argv)
    system_modes = {}
    for item in args.system_modes:
        name, sep, modes = item.partition("=")
        if not sep or not name or not modes:
            raise UserError("--system-modes expects NAME=MODE[,MODE...], got %r" % item)
        system_modes[name] = modes.split(",")
    systems = []
    for item in args.system:
        name, sep, configs = item.partition("=")
        if not sep or not name or not configs:
            raise UserError("--system expects NAME=CONFIG, got %r" % item)
        systems.append(evaluate.System(name, configs.split(","), system_modes.pop(name, None)))
    if system_modes:
        raise UserError("--system-modes names no --system: %s" % ", ".join(system_modes))
    results = evaluate.evaluate(
        args.corpus,
        systems,
        args.out,
        modes=args.modes,
        baseline=args.baseline,
        max_sentences=args.max_sentences,
        pred_dir=args.pred_dir,
        bootstrap_samples=args.bootstrap_samples,
    )
    print(evaluate.format_tables(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
