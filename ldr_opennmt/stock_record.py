"""``domains.json`` for a model trained by stock ``onmt-main``.

``ldr-main`` records in the model directory the domain list its checkpoints are trained with
(:mod:`ldr_opennmt.domain_record`); the later commands (``ldr-export``, ``ldr-eval``,
``ldr-main`` on the same directory) check a configuration's domains against it, and warned at
every step that a directory trained by stock ``onmt-main ... train`` "has no domains.json".
Stock ``onmt-main`` reaches the package through the model definition before it trains, and
:func:`ldr_opennmt.hooks.install` calls :func:`install`, which wraps ``opennmt.Runner.train``
(once, like the training lock of :mod:`ldr_opennmt.guards`) so that a training run by
OpenNMT-tf's own Runner writes the same record, after checking it against an earlier one (a
reordered domain list is refused, as under ``ldr-main``). ``ldr-main``'s Runner, a subclass,
writes its own and is left alone.
"""

import functools
import inspect

import opennmt

from ldr_opennmt import domain_record


def record_domains(runner):
    """Writes ``domains.json`` in the model directory of a stock ``opennmt.Runner`` whose
    configuration declares ``data: domains``, the region count read from a model initialized
    as configured (not built).

    Raises:
      UserError: if the directory's record lists other domains, or in another order
        (:func:`ldr_opennmt.domain_record.check_domains`).
    """
    config = runner._finalize_config()  # noqa: SLF001  (in compat.UPSTREAM_NAMES)
    declared = (config.get("data") or {}).get("domains")
    if not isinstance(declared, list) or not declared:
        return None
    model = runner._init_model(config)  # noqa: SLF001  (in compat.UPSTREAM_NAMES)
    regions = model.domain_regions() if hasattr(model, "domain_regions") else 0
    recorded, recorded_regions = domain_record.read_record(runner.model_dir)
    if recorded is not None:
        domain_record.check_domains(
            declared, recorded, recorded_regions or regions, runner.model_dir
        )
    domain_record.write_record(runner.model_dir, declared, regions)
    return declared, regions


def wrap(train):
    """:obj:`train` (``opennmt.Runner.train``) that first records the domains of a training
    run by ``opennmt.Runner`` itself (Horovod: worker 0), not by a subclass."""
    signature = inspect.signature(train)

    @functools.wraps(train)
    def wrapped(self, *args, **kwargs):
        if type(self) is opennmt.Runner:
            hvd = signature.bind(self, *args, **kwargs).arguments.get("hvd")
            if hvd is None or hvd.rank() == 0:
                record_domains(self)
        return train(self, *args, **kwargs)

    wrapped._ldr_opennmt_record = True
    return wrapped


def install():
    """Makes a training run by ``opennmt.Runner`` itself (stock ``onmt-main``; Horovod:
    worker 0) record its domains first (:func:`record_domains`), once."""
    if not getattr(opennmt.Runner.train, "_ldr_opennmt_record", False):
        opennmt.Runner.train = wrap(opennmt.Runner.train)
