"""Shared pytest setup.

The experiment drivers (``run/experiments/``) and the benchmark harness
(``run/benchmarks.py``) are scripts of the repository, not modules of the installed
package: ``run/*.sh`` runs them with ``run/`` on ``sys.path``. The tests import them
the same way (``import benchmarks``, ``from experiments import new_domain``), so
``run/`` goes first on ``sys.path`` before any test module is collected.
"""

import os
import sys

RUN_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "run")
if RUN_DIR not in sys.path:
    sys.path.insert(0, RUN_DIR)
