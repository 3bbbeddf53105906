"""Checks of a model family from outside: ``ldr-main check-family NAME``
(:mod:`ldr_opennmt.checks.family`), on data it generates (:mod:`ldr_opennmt.checks.data`)."""
