"""The family listing of ``ldr-main --list-families``: the registry as a Markdown table.

The documentation's families page prints the same table (``docs/_ext/ldr_docs.py``).
"""

from ldr_opennmt import probe, registry


def _ct2_cell(caps):
    if caps.ctranslate2 is not None:
        return "no"
    return "one model per domain" if caps.domain_parameters else "one plain model"


def _modes_cell(caps):
    return ", ".join(
        "%s (default)" % mode if mode == caps.default_domain_training else mode
        for mode in caps.domain_training
    )


def describe(names=None):
    """Markdown lines: one row per family.

    Args:
      names: The families to list (default: every registered one, in registration order).

    Returns:
      The table's lines: a header, then one row per family with its capabilities
      (:func:`ldr_opennmt.probe.capabilities`).
    """
    lines = [
        "| family | title | labels at inference | training modes | stages | CTranslate2 "
        "| ensembles | presets | paper | registered by |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name in names or registry.names():
        family = registry.get(name)
        caps = probe.capabilities(name)
        start = "%s, then %s" % (family.stage1, family.finetune) if family.stage1 else "one"
        lines.append(
            "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |"
            % (
                name,
                family.title,
                caps.labels,
                _modes_cell(caps),
                start,
                _ct2_cell(caps),
                "yes" if caps.ensembles is None else "no",
                ", ".join(family.preset_names()),
                family.paper,
                family.module,
            )
        )
    return lines
