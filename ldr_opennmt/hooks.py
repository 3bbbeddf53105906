"""The package's hooks into OpenNMT-tf and stock ``onmt-main``, installed explicitly.

Importing ``ldr_opennmt`` or any of its modules only defines things; :func:`install` is what
puts the hooks in place, once per process:

* the one-line errors of stock ``onmt-main`` (:func:`ldr_opennmt.onmt_main.install_error_hook`)
  and the tokenization files found beside their configuration
  (:func:`ldr_opennmt.onmt_main.install_tokenizer_paths`);
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

from ldr_opennmt import compat, gpu, guards, onmt_main, stock_record

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
    onmt_main.install_error_hook()
    onmt_main.install_tokenizer_paths()
    stock_record.install()  # Before the lock: the lock is taken first, then the record.
    guards.install_training_lock()
    guards.install_checkpoint_check()
    compat.check_upstream()
    gpu.check_stock_onmt_main()
    guards.lock_stock_onmt_main_training()
