"""The package's replacement for what OpenNMT-tf 2.32 and the package take from TensorFlow
Addons, which has no wheel for Python 3.12 (docs/installation.md).

``import tensorflow_addons`` finds this package on the Python 3.12 stack only
(:mod:`ldr_opennmt.upstream.addons_hook`); on Python 3.11 the real TensorFlow Addons 0.21 is
installed and used. :mod:`~ldr_opennmt.upstream.addons.seq2seq` and
:mod:`~ldr_opennmt.upstream.addons.optimizers` are the parts in use;
:mod:`~ldr_opennmt.upstream.addons.missing` names the rest.
"""

from ldr_opennmt.upstream.addons import missing as rnn  # noqa: F401
from ldr_opennmt.upstream.addons import missing as text
from ldr_opennmt.upstream.addons import optimizers, seq2seq  # noqa: F401

__version__ = "0.21.0+ldr-opennmt"
