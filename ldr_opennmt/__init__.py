"""ldr-opennmt: multi-domain neural machine translation on top of OpenNMT-tf."""

__version__ = "0.1.0"
