"""ldr-opennmt: multi-domain neural machine translation on top of OpenNMT-tf.

Importing the package, or any of its modules, or constructing its objects only defines
things: it checks nothing, patches nothing in OpenNMT-tf and imports TensorFlow only in the
modules that need it. The patches of stock ``onmt-main`` and OpenNMT-tf (one-line errors, the
training lock, the checkpoint check, ``domains.json``, the GPU check) are installed by
:func:`ldr_opennmt.upstream.install`, which the commands and every model definition call.
Where TensorFlow is not installed (the serving runtime, ``.venv-serve``: ``ldr-serve`` and
``ldr-translate`` on CTranslate2 exports), only the serving modules are usable.
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
