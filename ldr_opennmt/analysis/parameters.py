"""Parameter counts of every system against the vanilla Transformer (the #P column).

The Factorized Transformer paper's convention (Table 2): kernels and embeddings only
(biases and layer norms left out), a source table and one target table tied with the
output layer, no general copy. The Factorized designs are counted by
:func:`ldr_opennmt.layers.factorized.parameter_count`; the baselines add to the vanilla
count:

* residual adapters: two ``d_model x adapter_dim`` projections per layer and domain
  (:func:`ldr_opennmt.layers.adapters.parameter_count`);
* TTM: one target-vocabulary row per domain token (``d_model`` each);
* ML and AdvL: the classifier head, ``d_model x d_model`` (hidden layer) plus
  ``d_model x num_domains`` (logits); it is not used at inference.
"""

from ldr_opennmt.errors import UserError
from ldr_opennmt.layers import adapters, factorized

#: The rows of :func:`parameter_table`, in order.
SYSTEMS = ("vanilla", "df", "sf", "pa", "adapters", "ttm", "ml", "advl")
#: How the rows are named.
NAMES = {
    "vanilla": "vanilla",
    "df": "Factorized DF",
    "sf": "Factorized SF",
    "pa": "Factorized PA",
    "adapters": "Residual adapters",
    "ttm": "TTM",
    "ml": "ML",
    "advl": "AdvL",
}


def parameter_count(system, adapter_dim=2048, **sizes):
    """The parameters of one system.

    Args:
      system: One of :data:`SYSTEMS`.
      adapter_dim: The residual adapters' inner size.
      **sizes: The keyword arguments of
        :func:`ldr_opennmt.layers.factorized.parameter_count` (the paper's by default).

    Raises:
      UserError: on an unknown system or invalid sizes.
    """
    if system not in SYSTEMS:
        raise UserError("unknown system %r (expected one of: %s)" % (system, ", ".join(SYSTEMS)))
    adapters.validate_inner_dim(adapter_dim)
    sizes = dict(factorized.PAPER_SIZES, **sizes)
    if system in factorized.COUNTED_DESIGNS:
        return factorized.parameter_count(system, **sizes)
    vanilla = factorized.parameter_count("vanilla", **sizes)
    d_model, domains = sizes["d_model"], sizes["num_domains"]
    if system == "adapters":
        layers = sizes["encoder_layers"] + sizes["decoder_layers"]
        return vanilla + adapters.parameter_count(d_model, adapter_dim, layers, domains)
    if system == "ttm":
        return vanilla + domains * d_model
    return vanilla + d_model * d_model + d_model * domains  # ML, AdvL


def parameter_table(adapter_dim=2048, **sizes):
    """Markdown lines: every system's parameters and their ratio to vanilla."""
    vanilla = parameter_count("vanilla", **sizes)
    lines = ["| system | parameters | x vanilla |", "|---|---:|---:|"]
    for system in SYSTEMS:
        count = parameter_count(system, adapter_dim=adapter_dim, **sizes)
        lines.append("| %s | %d | %.2f |" % (NAMES[system], count, count / vanilla))
    return lines
