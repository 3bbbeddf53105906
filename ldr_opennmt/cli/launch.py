"""Where the console scripts of the commands that import TensorFlow start (``setup.py``'s
entry points): each imports its command's module inside the same handling of Ctrl-C as the
command itself (:func:`launch`)."""

import importlib
import sys


def launch(prog, module, argv=None):
    """Imports a command's :obj:`module` and runs its ``main(argv)``: the console scripts of the
    training environment start here, so that Ctrl-C while TensorFlow imports (the first
    seconds of every command) is one line, ``PROG: interrupted``, and exit status 130, as it is
    once the command runs (:func:`ldr_opennmt.errors.run_main`), not Python's traceback of the
    import (26 to 57 lines; issue 71).

    Returns:
      The command's exit status.
    """
    from ldr_opennmt import errors  # pylint: disable=import-outside-toplevel

    try:
        main = importlib.import_module(module).main
    except KeyboardInterrupt:
        sys.stderr.write("%s: interrupted\n" % prog)
        sys.stderr.flush()
        return errors.INTERRUPTED_STATUS
    return main(argv)


def ldr_main(argv=None):
    """The ``ldr-main`` console script (:mod:`ldr_opennmt.cli.main`)."""
    return launch("ldr-main", "ldr_opennmt.cli.main", argv)


def ldr_data(argv=None):
    """The ``ldr-data`` console script (:mod:`ldr_opennmt.cli.data`)."""
    return launch("ldr-data", "ldr_opennmt.cli.data", argv)


def ldr_eval(argv=None):
    """The ``ldr-eval`` console script (:mod:`ldr_opennmt.cli.evaluate`)."""
    return launch("ldr-eval", "ldr_opennmt.cli.evaluate", argv)


def ldr_analyze(argv=None):
    """The ``ldr-analyze`` console script (:mod:`ldr_opennmt.cli.analyze`)."""
    return launch("ldr-analyze", "ldr_opennmt.cli.analyze", argv)


def ldr_export(argv=None):
    """The ``ldr-export`` console script (:mod:`ldr_opennmt.cli.export`)."""
    return launch("ldr-export", "ldr_opennmt.cli.export", argv)
