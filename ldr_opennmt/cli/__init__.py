"""The command-line tools, on top of the package's layers.

``ldr-main`` (:mod:`.main`), ``ldr-data`` (:mod:`.data`), ``ldr-eval``
(:mod:`.evaluate`), ``ldr-export`` (:mod:`.export`), ``ldr-translate``
(:mod:`.translate`) and ``ldr-analyze`` (:mod:`.analyze`). Each parses its
arguments, calls the package and reports a :class:`~ldr_opennmt.errors.UserError`
through :func:`ldr_opennmt.errors.run_main`; nothing in the package imports them.
"""

import argparse
import os
import warnings

# The commands' own output first: TensorFlow's C++ start-up lines (oneDNN, CUDA stubs, CPU
# features, TensorRT) and TensorFlow Addons' end-of-life notice printed a dozen lines before
# `--help`'s usage. A level the user set is kept; errors (level 2 shows them) still print.
# Only the commands import this package (the library itself changes nothing on import).
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
warnings.filterwarnings(
    "ignore", message=r"\s*TensorFlow Addons \(TFA\) has ended", category=UserWarning
)


def positive_int(text):
    """An ``argparse`` type: a positive integer (argparse names the option in its error:
    ``argument --dev-size: must be a positive integer, got '-5'``)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError("must be a positive integer, got %r" % text)
    return value
