"""ldr-opennmt: multi-domain neural machine translation on top of OpenNMT-tf."""

__version__ = "0.1.0"

from ldr_opennmt.domains import install_error_hook as _install_error_hook

_install_error_hook()
