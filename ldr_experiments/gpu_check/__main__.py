"""``python -m ldr_experiments.gpu_check``: the GPU check's command line
(:func:`ldr_experiments.gpu_check.cli.main`), and its child processes (``--one``)."""

import sys

from ldr_experiments.gpu_check import cli

if __name__ == "__main__":
    sys.exit(cli.main())
