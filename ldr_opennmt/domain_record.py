"""Which domains a trained model knows, and adding new ones (the paper's LDR*).

A model directory trained by ``ldr-main`` holds ``domains.json``: the domain
list its checkpoints were trained with (a domain's id is its index) and the
number of domain regions, as the model's layers report it
(``MultiDomainModel.domain_regions``). For a checkpoint without a record (trained
by stock ``onmt-main``) the count is read through a model built as configured:
its layers name each region's variables, looked up in the checkpoint
(:func:`checkpoint_regions`).

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

import tensorflow as tf
from opennmt.utils import misc

from ldr_opennmt.errors import UserError
from ldr_opennmt.utils import write_lines_atomic

RECORD = "domains.json"


def checkpoint_regions(model, checkpoint_path):
    """The number of domain regions a checkpoint holds, read through a built model.

    The model's domain-specific layers declare each region's variables
    (:class:`~ldr_opennmt.layers.DomainSpecificLayer`); region ``k`` is in the
    checkpoint when all its variables are. Regions beyond those the model has
    are not seen: this is the fallback for checkpoints without a record
    (trained by stock ``onmt-main``), whose domain list is unknown anyway.

    Args:
      model: A built multi-domain model, configured as the checkpoint's.
      checkpoint_path: A checkpoint prefix (``.../ckpt-1000``).
    """
    saved = {name for name, _ in tf.train.list_variables(checkpoint_path)}
    # A variable can be reachable by several paths (an attribute and a list); the
    # checkpoint keeps one of them.
    names = {}
    for name, variable in misc.get_variables_name_mapping(model, root_key="model").items():
        names.setdefault(variable.ref(), set()).add(name)
    regions = 0
    for region, variables in sorted(model.domain_weights().items()):
        if region != regions or any(not names.get(v.ref(), set()) & saved for v in variables):
            break
        regions += 1
    return regions


def read_record(model_dir):
    """The domain list and region count recorded in :obj:`model_dir`.

    Returns:
      ``(domains, regions)``; ``(None, None)`` without a record, and ``regions``
      ``None`` in records written before the count was recorded.
    """
    path = os.path.join(model_dir, RECORD)
    if not tf.io.gfile.exists(path):
        return None, None
    with tf.io.gfile.GFile(path) as f:
        try:
            record = json.load(f)
        except ValueError as e:
            raise UserError("%s: not a domain record (%s)" % (path, e))
    names = record.get("domains") if isinstance(record, dict) else None
    if not isinstance(names, list):
        raise UserError("%s: no domain list in the record" % path)
    regions = record.get("regions")
    if regions is not None and (not isinstance(regions, int) or regions < 0):
        raise UserError("%s: invalid region count %r" % (path, regions))
    return names, regions


def write_record(model_dir, domains, regions):
    """Records the domain list and the region count of the model in :obj:`model_dir`."""
    tf.io.gfile.makedirs(model_dir)
    write_lines_atomic(
        os.path.join(model_dir, RECORD),
        [json.dumps({"domains": list(domains), "regions": int(regions)}, indent=2)],
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
      UserError: if a recorded domain is missing, renamed or moved, or if the
        new domains need more regions than the checkpoint has.
    """
    recorded = list(recorded or [])
    for domain_id, name in enumerate(recorded):
        if name not in declared:
            raise UserError(
                "domain %r (id %d) of the model in %s is missing from the configuration "
                "(trained with: %s; declared: %s): domains cannot be removed or renamed"
                % (name, domain_id, where, ", ".join(recorded), ", ".join(declared))
            )
        if declared.index(name) != domain_id:
            raise UserError(
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
        raise UserError(
            "the model in %s has %d domain regions (%s): no free region for %s (create the "
            "model with more num_reserved_regions to add domains later)"
            % (where, regions, taken, ", ".join(declared[regions:]))
        )
    return new
