"""Taking over ``onmt-main``: what ``ldr-main`` and stock ``onmt-main`` runs get from the package.

``ldr-main`` is ``onmt-main`` with the package's Runner; users of stock ``onmt-main
--model FILE.py`` get the same checks and one-line errors through the package's patches
(:func:`ldr_opennmt.upstream.install`, which the model definition calls).
This module holds that plumbing; the adapters on OpenNMT-tf's classes (Runner,
evaluator, trainer, decoding, optimizer) are :mod:`ldr_opennmt.upstream.ledger`, whose ledger
(:data:`ldr_opennmt.upstream.ledger.UPSTREAM_NAMES`) also lists the upstream names used here
(``opennmt.bin.main``'s ``main``, ``Runner``, ``config_util`` and
``_initialize_logging``), so that whoever upgrades OpenNMT-tf still reads one list.

* :func:`run_onmt_main`: ``onmt-main``'s ``main()`` builds ``opennmt.bin.main.Runner``
  from ``sys.argv``; ``ldr-main`` runs it with its own Runner class. ``main()`` also
  creates ``model_dir`` and copies the model definition there (through the module
  global ``opennmt.bin.main.config_util``) before it builds its Runner: the copy is
  deferred until the Runner has checked the configuration, so that a configuration
  error writes nothing. ``main()`` also sets TensorFlow's thread counts, which TensorFlow
  refuses once started: the default (0) then keeps what is in force, so that ``ldr-main``
  runs in process too (tests).
* :func:`load_run_config`: the run configuration of an ``onmt-main`` command line, read
  as ``onmt-main`` reads it, with the user modules of its ``user_modules`` loaded; its run
  type and model directory: :mod:`ldr_opennmt.upstream.command_line`.
* :func:`initialize_logging`: ``onmt-main``'s log format (``_initialize_logging``).

What stock ``onmt-main`` gets (the one-line error hook, the guard of ``Runner.train``, the
checkpoint check) is :mod:`ldr_opennmt.upstream.patches`.
"""

import contextlib
import copy
import logging
import os
import sys

import tensorflow as tf
from opennmt import config as config_util
from opennmt.bin import main as stock_main

from ldr_opennmt import config_keys, config_loader, errors, locks, registry, utils
from ldr_opennmt.upstream import command_line


def load_run_config(config_paths, config=None):
    """``opennmt.config.load_config`` through the package's bounded YAML loader
    (:mod:`ldr_opennmt.config_loader`): one-line errors for a missing, empty, oversized
    or invalid file and for alias bombs.

    The user modules of the top-level key ``user_modules`` are loaded here, before any
    model is built (they register model families: :mod:`ldr_opennmt.registry`); a relative
    path is relative to the directory of the configuration file that gives the key (the
    rightmost one, whose value the merge keeps), see
    :func:`ldr_opennmt.registry.load_user_module`. Loading a module imports it: its code
    runs, so a configuration that names user modules is code (docs/training.md).

    Each file's keys are checked (:func:`ldr_opennmt.config_keys.check_known`): a key that
    neither OpenNMT-tf nor the package reads is refused, naming the file and line.

    Raises:
      UserError: naming the file.
    """
    if config is None:
        config = {}
    modules_dir = None
    files = []
    for path in config_paths:
        loaded = config_loader.load_config_file(path)
        if registry.USER_MODULES_KEY in loaded:
            modules_dir = os.path.dirname(os.path.abspath(path))
        files.append((path, copy.deepcopy(loaded)))
        config_util.merge_config(config, loaded)
    specs = config.get(registry.USER_MODULES_KEY)
    if specs is not None:
        key = [k for k in config_keys.keys(config_keys.TOP_LEVEL) if k.name == "user_modules"]
        config_keys.check_value(key[0], specs)
        registry.load_configured_modules(config, base_dir=modules_dir)
    # Once the user modules have declared their keys, if any.
    for path, loaded in files:
        config_keys.check_known(loaded, path)
    return config


class _DeferredModelDescription:
    """``opennmt.config`` as ``onmt-main``'s ``main()`` sees it, with the copy of the model
    definition to ``model_dir`` (``load_model(..., serialize_model=True)``) held back
    until :meth:`write` (once the Runner has checked the configuration)."""

    def __init__(self):
        self._pending = []

    def __getattr__(self, name):
        return getattr(config_util, name)

    def load_config(self, config_paths, config=None):
        return load_run_config(config_paths, config=config)

    def load_model(self, model_dir, model_file=None, model_name=None, serialize_model=True,
                   as_builder=False):  # fmt: skip
        if model_file and not os.path.isfile(model_file):
            raise errors.UserError("--model: %s: no such model definition file" % model_file)
        if not model_file and not model_name:
            description = os.path.join(model_dir, config_util.MODEL_DESCRIPTION_FILENAME)
            if not tf.io.gfile.exists(description):
                raise errors.UserError(
                    "%s: no %s: give the model definition with --model"
                    % (model_dir, config_util.MODEL_DESCRIPTION_FILENAME)
                )
        model = config_util.load_model(
            model_dir,
            model_file=model_file,
            model_name=model_name,
            serialize_model=False,
            as_builder=as_builder,
        )
        if serialize_model and (model_file or model_name):
            self._pending.append((model_dir, model_file, model_name))
        return model

    def write(self):
        """Writes the held-back model descriptions (as ``load_model`` would have)."""
        while self._pending:
            model_dir, model_file, model_name = self._pending.pop(0)
            # As a builder: instantiating the model here would build one more Keras model
            # on worker 0 only, shifting its layer names (Horovod pairs tensors by name).
            config_util.load_model(
                model_dir,
                model_file=model_file,
                model_name=model_name,
                serialize_model=True,
                as_builder=True,
            )


@contextlib.contextmanager
def _default_threads_after_start():
    """Lets ``onmt-main``'s ``main()`` run in a process where TensorFlow has started.

    ``main()`` always sets TensorFlow's thread counts (0 by default: TensorFlow picks),
    which TensorFlow refuses with a ``RuntimeError`` once its runtime has started, even
    for the default. Within this context, setting the default then keeps what is in
    force, so ``ldr-main``'s ``main(argv)`` also runs in process (tests, notebooks); an
    explicit count still fails.
    """
    api = tf.config.threading
    names = ("set_intra_op_parallelism_threads", "set_inter_op_parallelism_threads")
    saved = {name: getattr(api, name) for name in names}

    def _tolerant(setter):
        def _set(num_threads):
            try:
                setter(num_threads)
            except RuntimeError:
                if num_threads:
                    raise

        return _set

    for name in names:
        setattr(api, name, _tolerant(saved[name]))
    try:
        yield
    finally:
        for name in names:
            setattr(api, name, saved[name])


def run_onmt_main(argv, runner_class):
    """Runs ``onmt-main``'s ``main()`` on :obj:`argv` with :obj:`runner_class`.

    Every flag and sub-command of ``onmt-main`` works unchanged. Nothing is written
    before the configuration is checked: the Runner is built (its constructor checks
    the configuration) and its ``validate(run_type, with_eval=...)``, if it has one,
    runs before the model definition is copied to ``model_dir``; a ``model_dir`` that
    this call created is removed again if the run fails and leaves it empty.
    """
    argv = list(argv)
    global_argv, run_type, run_argv = command_line.split_run_type(argv)
    # What the run will write, before it reads or translates anything (a read-only folder
    # was a traceback, for infer after translating everything).
    for what, path, is_directory in command_line.output_paths(global_argv, run_type, run_argv):
        utils.check_writable(path, what, directory=is_directory)
    model_dir = command_line.command_line_model_dir(global_argv)
    created = model_dir is not None and not os.path.exists(model_dir)
    description = _DeferredModelDescription()
    held = []

    def _runner(model, config, **kwargs):
        runner = runner_class(model, config, **kwargs)
        validate = getattr(runner, "validate", None)
        if validate is not None:
            validate(run_type, with_eval="--with_eval" in run_argv)
        if run_type == "train" and "--horovod" not in global_argv:
            # Before the model definition is copied: a second training on this model_dir
            # must not replace the first one's model_description.py. (With Horovod, worker
            # 0 alone locks, in Runner.train.)
            held.append(locks.acquire(runner.model_dir))
        description.write()
        return runner

    saved = stock_main.Runner, stock_main.config_util, sys.argv
    stock_main.Runner, stock_main.config_util = _runner, description
    sys.argv = [sys.argv[0]] + argv
    try:
        with _default_threads_after_start():
            return stock_main.main()
    except BaseException:
        while held:
            locks.release(held.pop(), failed=True)
        if created and os.path.isdir(model_dir) and not os.listdir(model_dir):
            os.rmdir(model_dir)
        raise
    finally:
        stock_main.Runner, stock_main.config_util, sys.argv = saved
        while held:
            locks.release(held.pop())


def initialize_logging(level_name):
    """Sets up logging as ``onmt-main`` does (level name, e.g. ``"INFO"``)."""
    stock_main._initialize_logging(getattr(logging, level_name))
