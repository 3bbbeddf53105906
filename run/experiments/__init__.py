"""Experiment drivers (the demo, new-domain and region-sweep experiments).

Scripts of the repository, not of the installed package: ``run/*.sh`` runs them
from the repository root with ``run/`` on ``sys.path``
(``python -m experiments.demo``)."""
