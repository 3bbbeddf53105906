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

from ldr_opennmt import registry
from ldr_opennmt.errors import UserError
from ldr_opennmt.layers import adapters, factorized

VANILLA = "vanilla"
#: Short names of the package's rows (the tables' names before the registry), kept as
#: aliases of the family names.
ALIASES = {
    "df": "factorized_df",
    "sf": "factorized_sf",
    "pa": "factorized_pa",
    "adapters": "residual_adapters",
    "ttm": "ttm_transformer",
    "ml": "ml_transformer",
    "advl": "advl_transformer",
}


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
    name = ALIASES.get(system, system)
    if name not in systems():
        raise UserError(
            "unknown system %r (expected one of: %s)"
            % (system, ", ".join(list(ALIASES) + systems()))
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
