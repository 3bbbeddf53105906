"""``ldr-eval``: per-domain BLEU/chrF of several systems and label modes.

    ldr-eval --corpus data/default --out results/eval --baseline Mixed \\
        --system Mixed=runs/mixed.yml --system DC=runs/dc.yml --system LDR=runs/ldr.yml

``ldr-eval contrastive`` runs the contrastive test of domain-dependent lexical choice
(:mod:`ldr_opennmt.evaluation.contrastive`) instead: it builds the items from the corpus (or
reads ``--items``) and scores them with each system and label mode::

    ldr-eval contrastive --corpus data/default --out results/contrastive \\
        --system Mixed=runs/mixed.yml --system LDR=runs/ldr.yml [--system-modes LDR=oracle,flipped]

Ensembles of domain views are label modes (``--modes ens-uniform ens-soft ens-learned``,
``ens-soft`` with ``--classifier CLASSIFIER.yml``). ``ldr-eval fit-ensemble`` (re)fits the
ens-learned weights of a model on balanced dev data and stores them in its model
directory (``ensemble.json``)::

    ldr-eval fit-ensemble --corpus data/default --system PA=runs/pa.yml [--per-domain 200]
"""

import os
import sys

from ldr_opennmt import errors, upstream, utils
from ldr_opennmt.cli import ArgumentParser, positive_int
from ldr_opennmt.errors import UserError
from ldr_opennmt.evaluation import contrastive, evaluate
from ldr_opennmt.names import check_unique

CONTRASTIVE = "contrastive"
FIT_ENSEMBLE = "fit-ensemble"


def main(argv=None):
    """The ``ldr-eval`` entry point."""
    upstream.install()
    return errors.run_main("ldr-eval", _main, argv)


def _main(argv):
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == [CONTRASTIVE]:
        return _contrastive_main(argv[1:])
    if argv[:1] == [FIT_ENSEMBLE]:
        return _fit_ensemble_main(argv[1:])
    parser = ArgumentParser(
        prog="ldr-eval",
        # The docstring's first line, as plain text (--help shows it as it is).
        description=__doc__.split("\n")[0].replace("``", ""),
        epilog="`ldr-eval %s --help`: the contrastive lexical-choice test; `ldr-eval %s "
        "--help`: fit the ens-learned weights." % (CONTRASTIVE, FIT_ENSEMBLE),
    )
    parser.add_argument("--corpus", required=True, help="corpus directory built by ldr-data")
    parser.add_argument("--out", required=True, help="output directory")
    _add_system_argument(parser)
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
    parser.add_argument(
        "--classifier",
        metavar="CONFIG[,CONFIG...]",
        help="the domain classifier's run configuration (mode ens-soft: its posterior)",
    )
    parser.add_argument(
        "--max-sentences",
        type=positive_int,
        help="first N test sentences per domain (the whole files are checked first)",
    )
    parser.add_argument("--bootstrap-samples", type=int, default=1000)
    parser.add_argument(
        "--cache-only",
        action="store_true",
        help="only translate (kept in --out, reused by a later evaluation), no scores: "
        "runs for different systems can share --out side by side",
    )
    args = parser.parse_args(argv)
    for option, folder in (("--out", args.out), ("--pred-dir", args.pred_dir)):
        if folder:
            utils.check_writable(folder, option)  # Before any model is read.
    system_modes = _named_values(args.system_modes, "--system-modes")
    named_systems = _named_values(args.system, "--system")
    unknown = [name for name in system_modes if name not in named_systems]
    if unknown:
        raise UserError("--system-modes names no --system: %s" % ", ".join(unknown))
    systems = [
        evaluate.System(name, configs, system_modes.get(name), where="--system")
        for name, configs in named_systems.items()
    ]
    evaluate.check_system_names(systems, "--system")
    results = evaluate.evaluate(
        args.corpus,
        systems,
        args.out,
        modes=args.modes,
        baseline=args.baseline,
        max_sentences=args.max_sentences,
        pred_dir=args.pred_dir,
        bootstrap_samples=args.bootstrap_samples,
        cache_only=args.cache_only,
        classifier=(
            evaluate.System("classifier", args.classifier.split(",")) if args.classifier else None
        ),
    )
    if results is None:
        print("translations kept in %s" % args.out)
        return 0
    print(evaluate.format_tables(results))
    return 0


def _add_system_argument(parser):
    """The required, repeatable ``--system NAME=CONFIG[,CONFIG...]`` option."""
    parser.add_argument(
        "--system",
        action="append",
        required=True,
        metavar="NAME=CONFIG[,CONFIG...]",
        help="a system and its OpenNMT-tf run configuration(s) (with model_dir); NAME is its "
        "table row and names its files, where characters other than letters, digits, '-', '_' "
        "and '.' become '_' (no '/' or '\\', no leading '.'); each name once. The "
        "configuration's user_modules are imported: their Python code runs, so evaluate "
        "configurations from others only if you trust their code",
    )


def _named_values(items, option):
    """``NAME=A,B`` arguments as an ordered ``{NAME: [A, B]}``.

    Raises:
      UserError: on an argument without ``=``, a name or a value, or a name given twice
        (``--system: system name 'Mixed' is given twice``): a second system of the same
        name used to replace the first one's files and table row.
    """
    values = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name or not value:
            raise UserError("%s expects NAME=VALUE[,VALUE...], got %r" % (option, item))
        values.setdefault(name, value.split(","))
    check_unique([item.partition("=")[0] for item in items], "system name", option)
    return values


def _fit_ensemble_main(argv):
    parser = ArgumentParser(
        prog="ldr-eval %s" % FIT_ENSEMBLE,
        description="Fit the ens-learned weights of models with domain views (maximum "
        "likelihood of balanced dev data of their domains) and store them in each model "
        "directory (ensemble.json), replacing earlier ones.",
    )
    parser.add_argument("--corpus", required=True, help="corpus directory built by ldr-data")
    _add_system_argument(parser)
    parser.add_argument(
        "--per-domain", type=positive_int, default=200, help="dev sentences per domain"
    )
    args = parser.parse_args(argv)
    from ldr_opennmt.data import corpus as corpus_lib
    from ldr_opennmt.evaluation import open_domain

    info = corpus_lib.load_info(args.corpus)
    for name, configs in _named_values(args.system, "--system").items():
        system = evaluate.System(name, configs, where="--system")
        record = open_domain.fit_learned_weights(
            system, args.corpus, info["source_lang"], info["target_lang"], args.per_domain
        )
        print(
            "%s: %s (log-likelihood per token %.4f, uniform %.4f; %d tokens) -> %s"
            % (
                name,
                " ".join(
                    "%s:%.4f" % (view, weight)
                    for view, weight in zip(record["views"], record["weights"])
                ),
                record["log_likelihood_per_token"],
                record["uniform_log_likelihood_per_token"],
                record["tokens"],
                os.path.join(system.model_dir, "ensemble.json"),
            )
        )
    return 0


def _contrastive_main(argv):
    parser = ArgumentParser(
        prog="ldr-eval %s" % CONTRASTIVE,
        description="Contrastive test of domain-dependent lexical choice: does a system score "
        "the reference above variants that use another domain's translation of a word?",
    )
    parser.add_argument("--corpus", required=True, help="corpus directory built by ldr-data")
    parser.add_argument("--out", required=True, help="output directory")
    parser.add_argument(
        "--system",
        action="append",
        default=[],
        metavar="NAME=CONFIG[,CONFIG...]",
        help="a system and its OpenNMT-tf run configuration(s) (NAME as for ldr-eval "
        "--system); without any, only build the items",
    )
    parser.add_argument(
        "--modes",
        nargs="+",
        default=list(contrastive.MODES),
        choices=contrastive.MODES,
        help="label modes for systems that use domains",
    )
    parser.add_argument(
        "--system-modes",
        action="append",
        default=[],
        metavar="NAME=MODE[,MODE...]",
        help="label modes for one system (overrides --modes), e.g. DC=oracle,flipped",
    )
    parser.add_argument(
        "--items", help="an items file (JSON lines) to score instead of building {out}/items.jsonl"
    )
    parser.add_argument(
        "--seed-words",
        default=contrastive.DEFAULT_SEED_WORDS,
        help="seed word file (default: the package's contrastive_words.txt; 'none': no seeds)",
    )
    parser.add_argument(
        "--splits",
        nargs="+",
        default=list(contrastive.ITEM_SPLITS),
        help="splits the items come from, in order of preference",
    )
    parser.add_argument("--max-per-word", type=int, default=20, help="items per (domain, word)")
    parser.add_argument("--max-items", type=int, default=500, help="items in all")
    parser.add_argument(
        "--min-count",
        type=int,
        default=4,
        help="training pairs an automatic candidate word needs in at least two domains",
    )
    parser.add_argument(
        "--cache-only",
        action="store_true",
        help="only score (kept in --out, reused by a later run), no tables: runs for "
        "different systems can share --out and --items side by side",
    )
    args = parser.parse_args(argv)
    utils.check_writable(args.out, "--out")  # Before any model is read.
    system_modes = _named_values(args.system_modes, "--system-modes")
    systems = []
    for name, configs in _named_values(args.system, "--system").items():
        systems.append(evaluate.System(name, configs, where="--system"))
    evaluate.check_system_names(systems, "--system")
    unknown = [name for name in system_modes if name not in {s.name for s in systems}]
    if unknown:
        raise UserError("--system-modes names no --system: %s" % ", ".join(unknown))
    contrastive.check_outputs(systems, args.out)  # Before the items are built.
    items_path = args.items
    if items_path is None:
        items_path = os.path.join(args.out, contrastive.ITEMS_FILE)
        items = contrastive.build_items(
            args.corpus,
            items_path,
            seed_words=None if args.seed_words == "none" else args.seed_words,
            splits=args.splits,
            max_per_word=args.max_per_word,
            max_items=args.max_items,
            min_count=args.min_count,
        )
        print(
            "%d contrastive items written to %s (summary: %s.md)"
            % (len(items), items_path, os.path.splitext(items_path)[0])
        )
    if not systems:
        return 0
    results = contrastive.evaluate(
        args.corpus,
        systems,
        args.out,
        items_path=items_path,
        modes=args.modes,
        system_modes=system_modes,
        cache_only=args.cache_only,
    )
    if results is None:
        print("scores kept in %s" % args.out)
        return 0
    print(contrastive.format_tables(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
