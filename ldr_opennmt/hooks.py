"""The package's hooks into OpenNMT-tf and stock ``onmt-main``, installed explicitly.

Importing ``ldr_opennmt`` or any of its modules only defines things; :func:`install` is what
puts the hooks in place, once per process:

* the one-line errors of stock ``onmt-main`` (:func:`install_error_hook`) and the
  tokenization files found beside their configuration (:func:`install_tokenizer_paths`);
* ``domains.json`` written by a training run by OpenNMT-tf's own Runner
  (:func:`ldr_opennmt.stock_record.install`), the training lock
  (:func:`ldr_opennmt.guards.install_training_lock`) and the checkpoint check
  (:func:`ldr_opennmt.guards.install_checkpoint_check`);
* then the checks of the process: the upstream version (:func:`ldr_opennmt.compat.check_upstream`),
  and under stock ``onmt-main`` its GPU request (:func:`ldr_opennmt.gpu.check_stock_onmt_main`)
  and its training's lock on ``model_dir``
  (:func:`ldr_opennmt.guards.lock_stock_onmt_main_training`).

Who calls it:

* the package's commands that run TensorFlow (``ldr-main``, ``ldr-eval``, ``ldr-data``,
  ``ldr-export``, ``ldr-analyze``), first thing in their ``main``; ``ldr-serve`` and
  ``ldr-translate`` do not (they run without TensorFlow);
* every model definition, at its top (``model_defs/``, ``examples/``, the snippets of the
  documentation): stock ``onmt-main --model FILE`` imports the file, copies it to
  ``model_dir/model_description.py`` and only then calls its ``model()`` (OpenNMT-tf 2.32
  loads it as a builder, called inside ``Runner.train``), so the hooks must be in place when
  the file is imported: the training lock before the copy, the wrappers of ``Runner.train``
  before it is called;
* every multi-domain model, when it is constructed
  (:class:`ldr_opennmt.models.sequence_to_sequence.MultiDomainModel`): the copies
  ``model_dir/model_description.py`` of older model directories (``return
  models.ldr_transformer()``, without the call) and user definitions that omit it. That is
  in time for ``infer``, ``export``, ``eval`` and ``score`` (the checkpoint check wraps the
  restoration, which follows), and for the tokenizers; a stock ``onmt-main ... train``
  continuing such a directory is locked (by its command line) but writes no
  ``domains.json`` in that run (``ldr-main`` does, and so does a definition that calls
  :func:`install`).

Needs TensorFlow and OpenNMT-tf (the training environment).
"""

import functools
import os
import sys

import yaml
from opennmt import tokenizers as onmt_tokenizers

from ldr_opennmt import compat, errors, gpu, guards, stock_record

_installed = False


def installed():
    """Whether :func:`install` ran in this process."""
    return _installed


def install():
    """Installs the package's hooks and runs the checks of the process, once (later calls do
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
    install_tokenizer_paths()
    stock_record.install()  # Before the lock: the lock is taken first, then the record.
    guards.install_training_lock()
    guards.install_checkpoint_check()
    compat.check_upstream()
    gpu.check_stock_onmt_main()
    guards.lock_stock_onmt_main_training()


def install_error_hook():
    """Prints an uncaught :class:`~ldr_opennmt.errors.UserError` as one line, exit 2.

    Other exceptions keep the default traceback. Installed by :func:`install`, which
    ``onmt-main --model`` reaches through the model definition: stock
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
    (:func:`resolve_tokenizer_files`). Installed by :func:`install`, before any inputter
    makes a tokenizer."""
    original = onmt_tokenizers.make_tokenizer
    if getattr(original, "_ldr_opennmt", False):
        return

    @functools.wraps(original)
    def make_tokenizer(config=None):  # OpenNMT-tf's signature.
        return original(resolve_tokenizer_files(config))

    make_tokenizer._ldr_opennmt = True
    onmt_tokenizers.make_tokenizer = make_tokenizer
