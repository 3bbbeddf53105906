"""``python -m ldr_experiments.benchmarks``: the benchmark's command line
(:func:`ldr_experiments.benchmarks.cli.main`), and its measurement processes (``--one``)."""

import sys

from ldr_experiments.benchmarks import cli

if __name__ == "__main__":
    sys.exit(cli.main())
