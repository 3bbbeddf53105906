"""Guards installed on OpenNMT-tf by :func:`ldr_opennmt.hooks.install`.

Stock ``onmt-main`` reaches the package through the model definition and offers no hook
around training or checkpoint restoration, so two of its methods are wrapped in place,
once (the upstream names are in :data:`ldr_opennmt.compat.UPSTREAM_NAMES`):

* :func:`install_training_lock` and :func:`lock_stock_onmt_main_training`: one training per
  ``model_dir`` (:mod:`ldr_opennmt.locks`);
* :func:`install_checkpoint_check`: a checkpoint of another model is refused by name before
  inference, export, evaluation or scoring restores it
  (:func:`ldr_opennmt.checkpoints.check_model_checkpoint`).
"""

import functools
import inspect
import os
import sys

import opennmt
import tensorflow as tf
from opennmt.utils import checkpoint as checkpoint_module

from ldr_opennmt import checkpoints, command_line, compat, locks


def _is_master(hvd):
    return hvd is None or hvd.rank() == 0


def install_training_lock():
    """Makes every ``opennmt.Runner.train`` hold the training lock of its ``model_dir``
    (:mod:`ldr_opennmt.locks`; Horovod: worker 0 only).

    Installed by :func:`ldr_opennmt.hooks.install`, which stock ``onmt-main --model``
    reaches through the model definition: ``onmt-main`` has no hook around training, so
    the method is wrapped in place, once.
    """
    original = opennmt.Runner.train
    if getattr(original, "_ldr_opennmt", False):
        return
    signature = inspect.signature(original)

    @functools.wraps(original)
    def train(self, *args, **kwargs):
        hvd = signature.bind(self, *args, **kwargs).arguments.get("hvd")
        if not _is_master(hvd):
            return original(self, *args, **kwargs)
        with locks.model_dir_lock(self.model_dir):
            return original(self, *args, **kwargs)

    train._ldr_opennmt = True
    opennmt.Runner.train = train


def lock_stock_onmt_main_training(argv=None, prog=None):
    """Under stock ``onmt-main ... train`` (not ``ldr-main``), takes the training lock
    of its ``model_dir`` when :func:`ldr_opennmt.hooks.install` runs, and holds it until
    the process ends.

    ``onmt-main`` calls the model definition's ``model()`` (whose model installs the hooks)
    before it copies that definition to ``model_dir``: locking here keeps a second training from
    replacing the first one's ``model_description.py``. With ``--horovod`` the lock is
    taken by worker 0 in ``Runner.train`` instead.

    Raises:
      UserError: if another training holds the lock.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    prog = os.path.basename(sys.argv[0] if prog is None else prog)
    if prog != "onmt-main":
        return None
    global_argv, run_type, _ = command_line.split_run_type(argv)
    if run_type != "train" or "--horovod" in global_argv:
        return None
    model_dir = command_line.command_line_model_dir(global_argv)
    if model_dir is None:
        return None
    return locks.acquire(model_dir)


def install_checkpoint_check():
    """Makes ``opennmt.utils.checkpoint.Checkpoint.restore`` check, for a model of the
    package (``checks_checkpoints``) restored without an optimizer (``infer``,
    ``export``, ``eval``, ``score``), that the checkpoint holds every variable of the
    model with its shape, before restoring.

    The model's variables are created first, as OpenNMT-tf would when it first calls
    the model (no distribution strategy is involved in these run types). A restoration
    with an optimizer (training) is left as it is: its variables are created later,
    under the training's distribution strategy; ``ldr-main train`` checks a
    ``--checkpoint_path`` on a separate model instead.
    """
    original = checkpoint_module.Checkpoint.restore
    if getattr(original, "_ldr_opennmt", False):
        return

    @functools.wraps(original)
    def restore(self, checkpoint_path=None, weights_only=False):
        model = compat.instance_attribute(self, "_model")
        if getattr(model, "checks_checkpoints", False) and (
            compat.instance_attribute(self, "_optimizer") is None
        ):
            path = checkpoint_path
            if path is None:
                path = tf.train.latest_checkpoint(compat.instance_attribute(self, "_model_dir"))
            elif tf.io.gfile.isdir(path):
                path = tf.train.latest_checkpoint(path)
            if path is not None:
                if not model.built:
                    model.create_variables()
                checkpoints.check_model_checkpoint(model, path)
        return original(self, checkpoint_path=checkpoint_path, weights_only=weights_only)

    restore._ldr_opennmt = True
    checkpoint_module.Checkpoint.restore = restore
