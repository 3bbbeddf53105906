"""ldr-opennmt: multi-domain neural machine translation on top of OpenNMT-tf.

Where TensorFlow is installed (the training environment), importing the package checks the
upstream versions and installs its hooks into stock ``onmt-main``. Where it is not (the
serving runtime, ``.venv-serve``: ``ldr-serve`` and ``ldr-translate`` on CTranslate2
exports), nothing of that is imported: only the serving modules are usable there.
"""

import importlib.util

__version__ = "0.1.0"


def _training_stack_installed():
    """Whether TensorFlow can be imported (without importing it)."""
    try:
        return importlib.util.find_spec("tensorflow") is not None
    except (ImportError, ValueError):  # A blocked import (tests), a broken installation.
        return False


#: Whether the training stack (TensorFlow, OpenNMT-tf) is installed.
TRAINING_STACK = _training_stack_installed()

if TRAINING_STACK:
    from ldr_opennmt import compat as _compat
    from ldr_opennmt import gpu as _gpu
    from ldr_opennmt import guards as _guards
    from ldr_opennmt import onmt_main as _onmt_main
    from ldr_opennmt.training import stock_record as _stock_record

    _compat.check_upstream()
    _onmt_main.install_error_hook()
    _onmt_main.install_tokenizer_paths()
    _gpu.check_stock_onmt_main()
    _stock_record.install()  # Before the lock: the lock is taken first, then the record.
    _guards.install_training_lock()
    _guards.install_checkpoint_check()
    _guards.lock_stock_onmt_main_training()
