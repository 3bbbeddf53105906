"""The experiments of ldr-opennmt: the main job (demo), the papers' tables, the smaller
studies, the benchmarks and the GPU check.

An installed package beside the library (``ldr_opennmt``), reached through one command,
``ldr-experiments`` (:mod:`ldr_experiments.cli`); ``run/*.sh`` are the shell scripts users
type, and each calls it. The library knows nothing of this package.
"""
