"""The package's one seam to OpenNMT-tf: what it relies on, what it changes, and when.

* :mod:`~ldr_opennmt.upstream.ledger`: the adapters on OpenNMT-tf's classes and the ledger of
  every upstream name the package uses (:data:`~ldr_opennmt.upstream.ledger.UPSTREAM_NAMES`),
  so that whoever upgrades OpenNMT-tf reads one list;
* :mod:`~ldr_opennmt.upstream.patches`: every change made to OpenNMT-tf and to the process
  (the error hook, the guard of ``Runner.train``, the checkpoint check), installed by
  :func:`install` only;
* :mod:`~ldr_opennmt.upstream.addons` and :mod:`~ldr_opennmt.upstream.addons_hook`: on the
  Python 3.12 stack, the replacement for what OpenNMT-tf takes from TensorFlow Addons (which
  has no wheel there) and the start-up hook that puts it in place (docs/installation.md);
* :mod:`~ldr_opennmt.upstream.onmt_main`: ``ldr-main``'s run of ``onmt-main``'s ``main()``
  with the package's Runner, and :mod:`~ldr_opennmt.upstream.command_line`, an ``onmt-main``
  command line read as ``onmt-main`` reads it.

:func:`install` is called by the entry points only: the package's commands that run
TensorFlow, and every model definition at its top (for stock ``onmt-main --model FILE``).
Importing this package imports no TensorFlow; :func:`install` does.
"""

import sys


def install():
    """Installs the package's patches of OpenNMT-tf and runs the checks of the process, once
    (:func:`ldr_opennmt.upstream.patches.install`).

    Raises:
      UserError: under stock ``onmt-main``, for GPUs asked for but not usable, or a training
        whose ``model_dir`` another training holds.
    """
    from ldr_opennmt.upstream import patches

    patches.install()


def installed():
    """Whether :func:`install` ran in this process."""
    patches = sys.modules.get("ldr_opennmt.upstream.patches")
    return patches is not None and patches.installed()
