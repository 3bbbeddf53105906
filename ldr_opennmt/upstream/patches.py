"""Every change the package makes to OpenNMT-tf and to the process, installed by :func:`install`.

Importing ``ldr_opennmt`` or any of its modules, or constructing any of its objects (a model,
a Runner), changes nothing outside the package (``tests/upstream/test_patches.py`` checks it).
:func:`install` is what puts these in place, once per process:

* the one-line errors of stock ``onmt-main`` (:func:`install_error_hook`);
* one wrapper of ``opennmt.Runner.train`` (:func:`install_training_guard`): a training run by
  OpenNMT-tf's own Runner (stock ``onmt-main``) holds the training lock of its ``model_dir``
  and writes ``domains.json``, as ``ldr-main``'s Runner does for itself, and a training whose
  ``model_dir`` already reached ``max_step`` says so in one line and ends (both commands);
* the checkpoint check of ``infer``, ``export``, ``eval`` and ``score``
  (:func:`install_checkpoint_check`);
* then the checks of the process: the upstream version (:func:`ldr_opennmt.upstream.ledger.
  check_upstream`), and under stock ``onmt-main`` its GPU request
  (:func:`ldr_opennmt.gpu.check_stock_onmt_main`), its ``--config`` files read again through
  the package's loader (:func:`check_stock_onmt_main_config`: a repeated key is refused) and
  its training's lock on ``model_dir`` (:func:`lock_stock_onmt_main_training`).

The upstream names wrapped here are in :data:`ldr_opennmt.upstream.ledger.UPSTREAM_NAMES`.

Who calls :func:`install` (the entry points, nothing else):

* the package's commands that run TensorFlow (``ldr-main``, ``ldr-eval``, ``ldr-data``,
  ``ldr-export``, ``ldr-analyze``), first thing in their ``main``; ``ldr-serve`` and
  ``ldr-translate`` do not (they run without TensorFlow);
* every model definition, at its top (``model_defs/``, ``examples/``, the snippets of the
  documentation): stock ``onmt-main --model FILE`` imports the file, copies it to
  ``model_dir/model_description.py`` and only then calls its ``model()``, so the patches must
  be in place when the file is imported: the training lock before the copy, the wrapper of
  ``Runner.train`` before it is called.

A model directory's ``model_description.py`` copied before the definitions called it (``return
models.ldr_transformer()`` alone) still trains and translates under ``ldr-main``, which installs
the patches itself; under stock ``onmt-main`` it runs without them (no lock, no
``domains.json``, no checkpoint check): add the two lines of a current definition to it.

Needs TensorFlow and OpenNMT-tf (the training environment).
"""

import functools
import inspect
import os
import sys

import opennmt
import tensorflow as tf
from opennmt.utils import checkpoint as checkpoint_module

from ldr_opennmt import checkpoints, domain_record, errors, gpu, locks
from ldr_opennmt.upstream import command_line, ledger

_installed = False

#: Set on the wrappers of this module (a second :func:`install` wraps nothing again).
MARK = "_ldr_opennmt"


def installed():
    """Whether :func:`install` ran in this process."""
    return _installed


def install():
    """Installs the package's patches and runs the checks of the process, once (later calls do
    nothing).

    Raises:
      UserError: under stock ``onmt-main``, for GPUs asked for but not usable, or a training
        whose ``model_dir`` another training holds.
    """
    global _installed
    if _installed:
        return
    _installed = True
    install_error_hook()
    install_training_guard()
    install_checkpoint_check()
    ledger.check_upstream()
    gpu.check_stock_onmt_main()
    check_stock_onmt_main_config()
    lock_stock_onmt_main_training()


def install_error_hook():
    """Prints an uncaught :class:`~ldr_opennmt.errors.UserError` as one line, exit 2.

    Other exceptions keep the default traceback. Stock ``onmt-main`` catches nothing, so this
    is the only way its users get the same one-line errors as ``ldr-main``.
    """
    previous = sys.excepthook
    if getattr(previous, MARK, False):
        return

    def _hook(exc_type, exc, traceback):
        if isinstance(exc, errors.UserError):
            errors.report(errors.PACKAGE_PROG, exc)
            raise SystemExit(errors.EXIT_STATUS)
        disk_full = errors.disk_full_message(exc)
        if disk_full is not None:
            errors.report(errors.PACKAGE_PROG, disk_full)
            raise SystemExit(errors.DISK_FULL_STATUS)
        previous(exc_type, exc, traceback)

    setattr(_hook, MARK, True)
    sys.excepthook = _hook


def record_domains(runner):
    """Writes ``domains.json`` in the model directory of a stock ``opennmt.Runner`` whose
    configuration declares ``data: domains``, the region count read from a model initialized
    as configured (not built). ``ldr-main``'s Runner writes its own
    (:mod:`ldr_opennmt.domain_record`).

    Returns:
      (domains, regions), or ``None`` when the configuration declares no domains.

    Raises:
      UserError: if the directory's record lists other domains, or in another order
        (:func:`ldr_opennmt.domain_record.check_domains`).
    """
    config = runner._finalize_config()  # noqa: SLF001  (in ledger.UPSTREAM_NAMES)
    declared = (config.get("data") or {}).get("domains")
    if not isinstance(declared, list) or not declared:
        return None
    model = runner._init_model(config)  # noqa: SLF001  (in ledger.UPSTREAM_NAMES)
    regions = model.domain_regions() if hasattr(model, "domain_regions") else 0
    recorded, recorded_regions = domain_record.read_record(runner.model_dir)
    if recorded is not None:
        domain_record.check_domains(
            declared, recorded, recorded_regions or regions, runner.model_dir
        )
    domain_record.write_record(runner.model_dir, declared, regions)
    return declared, regions


#: The optimizer's step in an OpenNMT-tf checkpoint.
STEP_KEY = "optimizer/iter/.ATTRIBUTES/VARIABLE_VALUE"


def trained_already(runner):
    """Whether the training :obj:`runner` would start is done: the last checkpoint of its
    ``model_dir`` has reached ``train: max_step``. Says so in one log line (OpenNMT-tf would
    raise a 33-line ``RuntimeError: The training already reached max_step``).

    A training that starts from weights given with ``--checkpoint_path`` is not asked.
    """
    path = tf.train.latest_checkpoint(runner.model_dir)
    if path is None:
        return False
    max_step = (runner._finalize_config().get("train") or {}).get("max_step")  # noqa: SLF001
    if not max_step:
        return False
    try:
        step = int(tf.train.load_checkpoint(path).get_tensor(STEP_KEY))
    except (tf.errors.OpError, ValueError):
        return False  # Not a checkpoint of an OpenNMT-tf training: the restore will say.
    if step < max_step:
        return False
    tf.get_logger().warning(
        "%s is trained: its last checkpoint (%s) reached train: max_step %d; nothing to train"
        " (raise max_step to continue the training)",
        runner.model_dir,
        os.path.basename(path),
        max_step,
    )
    return True


def guard_training(train):
    """:obj:`train` (``opennmt.Runner.train``) that, for a Runner which does not guard its own
    ``model_dir`` (``guards_model_dir``, set by ``ldr-main``'s Runner), holds the training lock
    of its ``model_dir`` (:mod:`ldr_opennmt.locks`) and records its domains
    (:func:`record_domains`) first. With Horovod, worker 0 alone."""
    signature = inspect.signature(train)

    @functools.wraps(train)
    def wrapped(self, *args, **kwargs):
        if getattr(self, "guards_model_dir", False):
            return train(self, *args, **kwargs)  # ldr-main's Runner: its own checks.
        arguments = signature.bind(self, *args, **kwargs).arguments
        if not arguments.get("checkpoint_path") and trained_already(self):
            return self.model_dir
        hvd = arguments.get("hvd")
        if hvd is not None and hvd.rank() != 0:
            return train(self, *args, **kwargs)
        with locks.model_dir_lock(self.model_dir):
            record_domains(self)
            return train(self, *args, **kwargs)

    setattr(wrapped, MARK, True)
    return wrapped


def install_training_guard():
    """Wraps ``opennmt.Runner.train`` with :func:`guard_training`, once: stock ``onmt-main``
    has no hook around training."""
    if not getattr(opennmt.Runner.train, MARK, False):
        opennmt.Runner.train = guard_training(opennmt.Runner.train)


def check_stock_onmt_main_config(argv=None, prog=None):
    """Under stock ``onmt-main`` (any run type), reads its ``--config`` files again through
    the package's loader (:mod:`ldr_opennmt.config_loader`), which OpenNMT-tf's own
    ``yaml.safe_load`` was not: a key repeated in a mapping (whose first value OpenNMT-tf kept
    without a word) is refused here, naming both lines, before anything is trained or written;
    so is a key that neither OpenNMT-tf nor the package reads
    (:func:`ldr_opennmt.config_keys.check_known`).

    Raises:
      UserError: on the first file refused.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    prog = os.path.basename(sys.argv[0] if prog is None else prog)
    if prog != "onmt-main":
        return None
    paths = command_line.command_line_configs(command_line.split_run_type(argv)[0])
    if not paths:
        return None
    from ldr_opennmt.upstream import onmt_main  # pylint: disable=import-outside-toplevel

    return onmt_main.load_run_config(paths)


def lock_stock_onmt_main_training(argv=None, prog=None):
    """Under stock ``onmt-main ... train`` (not ``ldr-main``), takes the training lock
    of its ``model_dir`` when :func:`install` runs, and holds it until the process ends.

    ``onmt-main`` imports the model definition (which installs the patches) before it copies
    that definition to ``model_dir``: locking here keeps a second training from replacing the
    first one's ``model_description.py``. With ``--horovod`` the lock is taken by worker 0 in
    ``Runner.train`` instead.

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
    if getattr(original, MARK, False):
        return

    @functools.wraps(original)
    def restore(self, checkpoint_path=None, weights_only=False):
        model = ledger.instance_attribute(self, "_model")
        if getattr(model, "checks_checkpoints", False) and (
            ledger.instance_attribute(self, "_optimizer") is None
        ):
            path = checkpoint_path
            if path is None:
                path = tf.train.latest_checkpoint(ledger.instance_attribute(self, "_model_dir"))
            elif tf.io.gfile.isdir(path):
                path = tf.train.latest_checkpoint(path)
            if path is not None:
                if not model.built:
                    model.create_variables()
                checkpoints.check_model_checkpoint(model, path)
        return original(self, checkpoint_path=checkpoint_path, weights_only=weights_only)

    setattr(restore, MARK, True)
    checkpoint_module.Checkpoint.restore = restore
