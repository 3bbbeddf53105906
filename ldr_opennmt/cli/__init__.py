"""The command-line tools, on top of the package's layers.

``ldr-main`` (:mod:`.main`), ``ldr-data`` (:mod:`.data`), ``ldr-eval``
(:mod:`.evaluate`), ``ldr-export`` (:mod:`.export`), ``ldr-translate``
(:mod:`.translate`) and ``ldr-analyze`` (:mod:`.analyze`). Each parses its
arguments, calls the package and reports a :class:`~ldr_opennmt.errors.UserError`
through :func:`ldr_opennmt.errors.run_main`; nothing in the package imports them. The
console scripts of the commands that import TensorFlow start in :mod:`.launch`.
"""

import argparse
import os
import sys
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


class ArgumentParser(argparse.ArgumentParser):
    """``argparse.ArgumentParser`` that takes each long option in both spellings.

    The package's options are spelled as OpenNMT-tf spells its own (``--model_dir``,
    ``--features_file``), except some older ones (``--dev-size``): each is accepted with
    ``_`` or ``-`` between its words (``--dev_size`` and ``--dev-size``, ``--model-dir`` and
    ``--model_dir``), so nobody has to remember which; ``--help`` shows the declared one.
    Sub-parsers (``add_subparsers``) are of this class too.
    """

    def _known_options(self):
        return {
            option
            for action in self._actions
            for option in action.option_strings
            if option.startswith("--")
        }

    def _respelled(self, args):
        known = self._known_options()
        result = []
        for arg in args:
            if arg == "--":
                result.extend(args[len(result) :])
                break
            if arg.startswith("--") and len(arg) > 2:
                name, sep, value = arg.partition("=")
                if name not in known:
                    for other in (name[:2] + name[2:].replace("-", "_"),
                                  name[:2] + name[2:].replace("_", "-")):  # fmt: skip
                        if other in known:
                            arg = other + sep + value
                            break
            result.append(arg)
        return result

    def parse_known_args(self, args=None, namespace=None):
        if args is None:
            args = sys.argv[1:]
        return super().parse_known_args(self._respelled(list(args)), namespace)
