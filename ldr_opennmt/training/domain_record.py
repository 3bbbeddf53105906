"""Which domains a trained model knows, and adding new ones (the paper's LDR*).

A model directory trained by ``ldr-main`` holds ``domains.json``: the domain
list its checkpoints were trained with (a domain's id is its index). The number
of domain regions a checkpoint has is read from its variables
(``domain_<k>_...``), so it is known even for models trained by stock
``onmt-main``.

When a configuration is used with a trained checkpoint, its domain list must
start with the recorded one, in the same order: existing domains keep their ids
and their regions. Names appended at the end are new domains; each takes one of
the checkpoint's reserved regions (models created with ``num_reserved_regions``),
which start equal to the generic representation, so a new domain can be
evaluated before any training on it (it falls back to generic) and then trained
by continuing from the checkpoint.
"""

import json
import os
import re

import tensorflow as tf

from ldr_opennmt import domains as domains_lib
from ldr_opennmt.utils import write_lines_atomic

RECORD = "domains.json"

_REGION_VARIABLE = re.compile(r"(?:^|/)domain_(\d+)_[^/]+/\.ATTRIBUTES/VARIABLE_VALUE$")


def checkpoint_regions(checkpoint_path):
    """Returns the number of domain regions of a checkpoint (0 for models without).

    Args:
      checkpoint_path: A checkpoint prefix (``.../ckpt-1000``).
    """
    regions = 0
    for name, _ in tf.train.list_variables(checkpoint_path):
        match = _REGION_VARIABLE.search(name)
        if match:
            regions = max(regions, int(match.group(1)) + 1)
    return regions


def read_record(model_dir):
    """Returns the domain list recorded in :obj:`model_dir`, or ``None``."""
    path = os.path.join(model_dir, RECORD)
    if not tf.io.gfile.exists(path):
        return None
    with tf.io.gfile.GFile(path) as f:
        try:
            record = json.load(f)
        except ValueError as e:
            raise domains_lib.DomainError("%s: not a domain record (%s)" % (path, e))
    names = record.get("domains") if isinstance(record, dict) else None
    if not isinstance(names, list):
        raise domains_lib.DomainError("%s: no domain list in the record" % path)
    return names


def write_record(model_dir, domains):
    """Records the domain list the model in :obj:`model_dir` is trained with."""
    tf.io.gfile.makedirs(model_dir)
    write_lines_atomic(
        os.path.join(model_dir, RECORD), [json.dumps({"domains": list(domains)}, indent=2)]
    )


def check_domains(declared, recorded, regions, where):
    """Checks a configured domain list against a trained model's.

    Args:
      declared: The domain names of the configuration, in id order.
      recorded: The names the checkpoint was trained with (``None`` if unknown).
      regions: The number of domain regions of the checkpoint.
      where: The checkpoint or model directory, for error messages.

    Returns:
      The new domain names (declared after the recorded ones).

    Raises:
      DomainError: if a recorded domain is missing, renamed or moved, or if the
        new domains need more regions than the checkpoint has.
    """
    recorded = list(recorded or [])
    for domain_id, name in enumerate(recorded):
        if name not in declared:
            raise domains_lib.DomainError(
                "domain %r (id %d) of the model in %s is missing from the configuration "
                "(trained with: %s; declared: %s): domains cannot be removed or renamed"
                % (name, domain_id, where, ", ".join(recorded), ", ".join(declared))
            )
        if declared.index(name) != domain_id:
            raise domains_lib.DomainError(
                "domain %r has id %d in the model in %s but %d in the configuration "
                "(trained with: %s; declared: %s): keep the trained order and add new "
                "domains at the end"
                % (
                    name,
                    domain_id,
                    where,
                    declared.index(name),
                    ", ".join(recorded),
                    ", ".join(declared),
                )
            )
    new = declared[len(recorded) :]
    if regions and len(declared) > regions:
        if recorded:
            taken = "%s and %d reserved" % (", ".join(recorded), regions - len(recorded))
        else:
            taken = "domain list not recorded"
        raise domains_lib.DomainError(
            "the model in %s has %d domain regions (%s): no free region for %s (create the "
            "model with more num_reserved_regions to add domains later)"
            % (where, regions, taken, ", ".join(declared[regions:]))
        )
    return new
