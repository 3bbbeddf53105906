"""Kept for the model definitions copied into model directories before the seam moved to
:mod:`ldr_opennmt.upstream` (``from ldr_opennmt import hooks, models`` then
``hooks.install()``): :func:`install` is :func:`ldr_opennmt.upstream.install`. New code calls
that one."""

from ldr_opennmt.upstream import install, installed  # noqa: F401
