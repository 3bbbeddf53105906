"""Taking over ``onmt-main``: what ``ldr-main`` and stock ``onmt-main`` runs get from the package.

``ldr-main`` is ``onmt-main`` with the package's Runner; users of stock ``onmt-main
--model FILE.py`` get the same checks and one-line errors through the package's hooks
(:func:`ldr_opennmt.hooks.install`, which the model definition's model reaches).
This module holds that plumbing; the adapters on OpenNMT-tf's classes (Runner,
evaluator, trainer, decoding, optimizer) are :mod:`ldr_opennmt.compat`, whose ledger
(:data:`ldr_opennmt.compat.UPSTREAM_NAMES`) also lists the upstream names used here
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
* :func:`load_run_config`, :func:`split_run_type`, :func:`command_line_model_dir`: the
  configuration, run type and model directory of an ``onmt-main`` command line, read as
  ``onmt-main`` reads them (also used by :mod:`ldr_opennmt.guards`).
* :func:`initialize_logging`: ``onmt-main``'s log format (``_initialize_logging``).
* :func:`install_error_hook`: stock ``onmt-main`` has no error handling to extend,
  so a ``sys.excepthook`` prints :class:`~ldr_opennmt.errors.UserError` as one line.
* :func:`install_tokenizer_paths`: a tokenization file (``source_tokenization:
  data/mine/tokenizer.en.yml``) names its BPE model relative to itself
  (:func:`resolve_tokenizer_files`), so that a corpus built by ``ldr-data`` can be moved;
  OpenNMT-tf alone would look for it in the current directory.
"""

import argparse
import contextlib
import functools
import logging
import os
import sys

import tensorflow as tf
import yaml
from opennmt import config as config_util
from opennmt import tokenizers as onmt_tokenizers
from opennmt.bin import main as stock_main

from ldr_opennmt import config_keys, config_loader, errors, locks, registry

#: ``onmt-main``'s run types (its sub-commands).
ONMT_RUN_TYPES = (
    "train",
    "eval",
    "infer",
    "export",
    "score",
    "average_checkpoints",
    "update_vocab",
)


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

    Raises:
      UserError: naming the file.
    """
    if config is None:
        config = {}
    modules_dir = None
    for path in config_paths:
        loaded = config_loader.load_config_file(path)
        if registry.USER_MODULES_KEY in loaded:
            modules_dir = os.path.dirname(os.path.abspath(path))
        config_util.merge_config(config, loaded)
    specs = config.get(registry.USER_MODULES_KEY)
    if specs is not None:
        key = [k for k in config_keys.keys(config_keys.TOP_LEVEL) if k.name == "user_modules"]
        config_keys.check_value(key[0], specs)
        registry.load_configured_modules(config, base_dir=modules_dir)
    return config


def split_run_type(argv):
    """(global arguments, run type, run arguments), split as ``onmt-main`` splits them
    (at the first argument that is a run type)."""
    for i, arg in enumerate(argv):
        if arg in ONMT_RUN_TYPES:
            return argv[:i], arg, argv[i + 1 :]
    return argv, None, []


def command_line_model_dir(global_argv):
    """The model directory ``onmt-main`` will use, or ``None`` if the arguments do not
    say (``onmt-main`` then reports the problem itself)."""
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    parser.add_argument("--config", nargs="+")
    parser.add_argument("--model_dir")
    parser.add_argument("--run_dir", default="")
    try:
        args, _ = parser.parse_known_args(global_argv)
    except SystemExit:
        return None
    if not args.config:
        return None
    model_dir = args.model_dir or load_run_config(args.config).get("model_dir")
    if not model_dir:
        raise errors.UserError(
            "%s: no model_dir in the configuration or on the command line" % " ".join(args.config)
        )
    return os.path.join(args.run_dir, model_dir) if args.run_dir else model_dir


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
    global_argv, run_type, run_argv = split_run_type(argv)
    model_dir = command_line_model_dir(global_argv)
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


def install_error_hook():
    """Prints an uncaught :class:`~ldr_opennmt.errors.UserError` as one line, exit 2.

    Other exceptions keep the default traceback. Installed by
    :func:`ldr_opennmt.hooks.install`, which ``onmt-main --model`` reaches through the model
    definition (the model's constructor calls it): stock
    ``onmt-main`` catches nothing, so this is the only way its users get the same
    one-line errors as ``ldr-main``.
    """
    previous = sys.excepthook
    if getattr(previous, "_ldr_opennmt", False):
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

    _hook._ldr_opennmt = True
    sys.excepthook = _hook


def resolve_tokenizer_files(tokenization):
    """A tokenization configuration as ``opennmt.tokenizers.make_tokenizer`` takes it, with
    the files a configuration *file* names found beside it.

    OpenNMT-tf passes a file option (``bpe_model_path: bpe.en``) to pyonmttok as it is, and a
    relative path is then relative to the current directory. Here a relative path is first
    looked up in the directory of the configuration file (``ldr-data`` writes
    ``tokenizer.LANG.yml`` so, next to ``bpe.LANG``: a corpus directory can be moved or
    copied), then in the current directory, as OpenNMT-tf would; an absolute path that no
    longer exists (a corpus of an older ``ldr-data``, moved) is looked up by its name beside
    the configuration. Any other configuration (a dict, inline JSON, a path that is not a
    file) is returned as it is, and so is a file option found nowhere: OpenNMT-tf reports it.

    Args:
      tokenization: What ``make_tokenizer`` takes.

    Returns:
      :obj:`tokenization`, or the file's content (a dict) with its file options resolved.
    """
    if not isinstance(tokenization, str) or not tokenization or "://" in tokenization:
        return tokenization
    if not os.path.isfile(tokenization):
        return tokenization
    try:
        with open(tokenization, encoding="utf-8") as config_file:
            loaded = yaml.safe_load(config_file)
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return tokenization  # OpenNMT-tf reads it again and reports.
    if not isinstance(loaded, dict):
        return tokenization
    options = loaded.get("params") if "type" in loaded else loaded
    if not isinstance(options, dict):
        return tokenization
    directory = os.path.dirname(os.path.abspath(tokenization))
    changed = False
    for key, value in list(options.items()):
        if not (isinstance(value, str) and value and key.endswith("_path")):
            continue
        if os.path.isabs(value):
            candidates = [value, os.path.join(directory, os.path.basename(value))]
        else:
            candidates = [os.path.join(directory, value), os.path.abspath(value)]
        found = next((path for path in candidates if os.path.isfile(path)), None)
        if found is not None and found != value:
            options[key] = found
            changed = True
    return loaded if changed else tokenization


def install_tokenizer_paths():
    """Makes ``opennmt.tokenizers.make_tokenizer`` (what the inputters call with
    ``*_tokenization``) resolve the file options of a configuration file beside it
    (:func:`resolve_tokenizer_files`). Installed by :func:`ldr_opennmt.hooks.install`, which
    stock ``onmt-main --model`` reaches when the model definition constructs the model,
    before its inputters make any tokenizer."""
    original = onmt_tokenizers.make_tokenizer
    if getattr(original, "_ldr_opennmt", False):
        return

    @functools.wraps(original)
    def make_tokenizer(config=None):  # OpenNMT-tf's signature.
        return original(resolve_tokenizer_files(config))

    make_tokenizer._ldr_opennmt = True
    onmt_tokenizers.make_tokenizer = make_tokenizer
