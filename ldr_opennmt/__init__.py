"""ldr-opennmt: multi-domain neural machine translation on top of OpenNMT-tf."""

__version__ = "0.1.0"

from ldr_opennmt import compat as _compat
from ldr_opennmt import gpu as _gpu
from ldr_opennmt import guards as _guards
from ldr_opennmt import onmt_main as _onmt_main

_compat.check_upstream()
_onmt_main.install_error_hook()
_gpu.check_stock_onmt_main()
_guards.install_training_lock()
_guards.install_checkpoint_check()
_guards.lock_stock_onmt_main_training()
