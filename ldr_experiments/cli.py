"""``ldr-experiments``: one command for the experiments, a sub-command each.

    ldr-experiments demo [--quick] [--full]          # the main job (bash run/demo.sh)
    ldr-experiments tables [--quick]                 # the papers' tables (bash run/tables.sh)
    ldr-experiments advl-grid | region-sweep | baselines | factorized | new-domain | open-domain
    ldr-experiments bench | gpu-check | serve-bench | serve-runtimes | serve-quality | levers
    ldr-experiments check-sampling | terminology | stack-parity
    ldr-experiments quote docs/records/NAME.md [--row ROW] [--column COLUMN]

Each sub-command's options are its module's (``ldr-experiments demo --help``). The modules
are imported when their sub-command runs, so ``ldr-experiments --help`` loads no TensorFlow.
"""

import argparse
import importlib
import sys

#: Sub-command -> (module of ldr_experiments, one line of help).
COMMANDS = {
    "demo": ("demo", "the main job: Mixed, LDR, Factorized PA, FT_* (docs/demo.md)"),
    "tables": ("tables", "the papers' tables at the demo's scale (docs/tables.md)"),
    "advl-grid": ("advl_grid", "AdvL's reversal weight chosen on the dev sets"),
    "region-sweep": ("region_sweep", "LDR's domain region size swept"),
    "baselines": ("baselines", "the baselines of the papers at a chosen size"),
    "factorized": ("factorized", "the Factorized Transformer's two-stage curriculum"),
    "new-domain": ("new_domain", "adding a domain to a trained model"),
    "open-domain": ("open_domain", "open-domain ensembles of domain views"),
    "bench": ("benchmarks.cli", "training and inference speed and memory (BENCHMARKS.md)"),
    "gpu-check": ("gpu_check.cli", "the GPU path: XLA, mixed precision, bit identity"),
    "serve-bench": ("serve_bench", "ldr-serve under concurrent clients"),
    "serve-runtimes": ("serve_runtimes", "ldr-serve in .venv-serve against .venv"),
    "check-sampling": ("check_sampling", "observed domain frequencies of training batches"),
    "levers": ("levers", "training throughput at batch and vocabulary sizes (issue 73)"),
    "serve-quality": ("serve_quality", "ldr-serve's domain guard and confidence, measured"),
    "terminology": ("terminology", "glossaries applied at translation time, measured"),
    "stack-parity": ("stack_parity", "the Python 3.11 and 3.12 training stacks compared"),
    "quote": ("records", "the links a page pastes to quote a report's figures"),
}


def parser():
    """The command's parser: a sub-command, and the options it passes on to it."""
    result = argparse.ArgumentParser(
        prog="ldr-experiments",
        description="The experiments of ldr-opennmt; each command's options: "
        "ldr-experiments COMMAND --help.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="commands:\n"
        + "\n".join("  %-15s %s" % (name, text) for name, (_, text) in COMMANDS.items()),
    )
    result.add_argument("command", choices=list(COMMANDS), metavar="COMMAND")
    result.add_argument("options", nargs=argparse.REMAINDER, help="the command's options")
    return result


def main(argv=None):
    if argv is None:
        # The command as the user knows it, not `.../ldr_experiments/cli.py` (run/*.sh run
        # `python -m ldr_experiments.cli`): what a results directory's lock names
        # (engine.lock_results) and the drivers' usage lines.
        sys.argv[0] = "ldr-experiments"
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parser().parse_args(argv[:1])
    # The commands' settings of the logs (TensorFlow's C++ start-up lines and TensorFlow
    # Addons' notice off, a level the user set kept): ldr_opennmt.cli sets them on import.
    import ldr_opennmt.cli  # noqa: F401  pylint: disable=unused-import
    from ldr_opennmt import errors

    prog = "ldr-experiments %s" % args.command
    try:  # Ctrl-C while TensorFlow imports: one line, as once the command runs.
        module = importlib.import_module("ldr_experiments." + COMMANDS[args.command][0])
        from ldr_experiments import engine
    except KeyboardInterrupt:
        sys.stderr.write("%s: interrupted\n" % prog)
        sys.stderr.flush()
        return errors.INTERRUPTED_STATUS

    # A UserError (bad input) is one line naming the sub-command, and exit status 2; a failed
    # stage one line naming its log, and exit status 1; SIGTERM (SIGINT, SIGHUP) while stages
    # run stops them, then one line, and exit status 143 (130, 129).
    try:
        return errors.run_main(prog, module.main, argv[1:])
    except engine.StageFailed as e:  # Interrupted (a signal) too: 128 + its number.
        errors.report(prog, e)
        return e.status


if __name__ == "__main__":
    sys.exit(main())
