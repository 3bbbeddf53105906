"""Parameter counts of every registered family against the vanilla Transformer (#P).

The Factorized Transformer paper's convention (Table 2): kernels and embeddings only
(biases and layer norms left out), a source table and one target table tied with the
output layer, no general copy. Each family declares its formula in the registry
(:attr:`ldr_opennmt.registry.Family.parameter_count`, e.g. the Factorized designs'
:func:`ldr_opennmt.layers.factorized.parameter_count`, the adapters' two
``d_model x adapter_dim`` projections per layer and domain, TTM's domain rows, ML and
AdvL's classifier head); a family without one has no row. A family registered from a
user module (``--user_module``) gets its row the same way.
"""

import collections.abc

from ldr_opennmt import registry
from ldr_opennmt.errors import UserError
from ldr_opennmt.layers import adapters, factorized

VANILLA = "vanilla"


class _Aliases(collections.abc.Mapping):
    """``{short name: family name}`` of the rows, read from the registry when used (a
    family registered later gets its alias too): each family's
    :attr:`ldr_opennmt.registry.Family.short_name` (``pa``, ``adapters``, ``ttm``), where it
    is not a family name itself and answers to that family alone."""

    def _mapping(self):
        rows = [registry.get(name) for name in systems()[1:]]
        return {
            family.short_name: family.name
            for family in rows
            if family.short_name != family.name and registry.find(family.short_name) is family
        }

    def __getitem__(self, key):
        return self._mapping()[key]

    def __iter__(self):
        return iter(self._mapping())

    def __len__(self):
        return len(self._mapping())


#: The short names of the rows, kept as aliases of the family names (``ldr-analyze
#: parameters`` took them before the registry): derived from the families' titles.
ALIASES = _Aliases()


def systems():
    """The rows of :func:`parameter_table`: vanilla, then every family with a formula."""
    return [VANILLA] + [f.name for f in registry.families() if f.parameter_count is not None]


def parameter_count(system, adapter_dim=2048, **sizes):
    """The parameters of one system.

    Args:
      system: ``"vanilla"``, a registered family with a formula, or one of
        :data:`ALIASES`.
      adapter_dim: The residual adapters' inner size.
      **sizes: The keyword arguments of
        :func:`ldr_opennmt.layers.factorized.parameter_count` (the paper's by default).

    Raises:
      UserError: on an unknown system or invalid sizes.
    """
    aliases = dict(ALIASES)
    name = aliases.get(system, system)
    if name not in systems():
        raise UserError(
            "unknown system %r (expected one of: %s)"
            % (system, ", ".join(list(aliases) + systems()))
        )
    adapters.validate_inner_dim(adapter_dim)
    sizes = dict(factorized.PAPER_SIZES, **sizes)
    if name == VANILLA:
        return factorized.parameter_count(VANILLA, **sizes)
    return int(registry.get(name).parameter_count(adapter_dim=adapter_dim, **sizes))


def parameter_table(adapter_dim=2048, **sizes):
    """Markdown lines: every system's parameters and their ratio to vanilla."""
    vanilla = parameter_count(VANILLA, **sizes)
    lines = ["| system | parameters | x vanilla |", "|---|---:|---:|"]
    for system in systems():
        count = parameter_count(system, adapter_dim=adapter_dim, **sizes)
        title = "vanilla (Mixed)" if system == VANILLA else registry.get(system).title
        lines.append("| %s | %d | %.2f |" % (title, count, count / vanilla))
    return lines
