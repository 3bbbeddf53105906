"""Per-step training time only: ``bash run/bench.sh --parts train``.

Kept for existing references; the benchmark (training and inference, speed and
memory) is ``run/benchmarks.py``, run by ``bash run/bench.sh``.

    python run/bench_step.py [--layers 2 --units 256 --batch 64 --steps 50 --out STEP.md]
"""

import sys

# Run as a script, this file's directory (run/) is sys.path[0]: benchmarks.py is found there.
import benchmarks

if __name__ == "__main__":
    sys.exit(benchmarks.main(["--parts", benchmarks.TRAIN] + sys.argv[1:]))
