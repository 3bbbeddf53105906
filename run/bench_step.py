"""Per-step training time only: ``python -m ldr_opennmt.benchmarks --parts train``.

Kept for existing references; the benchmark (training and inference, speed and
memory) is :mod:`ldr_opennmt.benchmarks`, run by ``bash run/bench.sh``.

    python run/bench_step.py [--layers 2 --units 256 --batch 64 --steps 50 --out STEP.md]
"""

import sys

from ldr_opennmt import benchmarks

if __name__ == "__main__":
    sys.exit(benchmarks.main(["--parts", benchmarks.TRAIN] + sys.argv[1:]))
