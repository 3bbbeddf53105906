"""Errors of corpus building."""

from ldr_opennmt.domains import DomainError


class DataError(DomainError):
    """A one-line error about corpus data (printed without a traceback)."""
