"""The commands of the serving runtime (``.venv-serve``, made by ``run/setup_serve.sh``).

The package is installed there whole (``pip install --no-deps -e .``), and pip writes every
console script of ``setup.py`` into ``.venv-serve/bin``. Without TensorFlow and OpenNMT-tf,
``ldr-main``, ``ldr-data``, ``ldr-eval``, ``ldr-export``... would die there with a
``ModuleNotFoundError`` traceback, and, first on ``PATH``, they would hide the training
environment's commands of the same names. ``run/setup_serve.sh`` therefore runs
``python -m ldr_opennmt.serving.runtime`` after the installation, which removes every console
script of the package but :data:`SERVING_COMMANDS` from the environment's ``bin``: with both
environments on ``PATH``, ``ldr-data`` is the training environment's.
"""

import os
import sys

#: The commands of the serving runtime.
SERVING_COMMANDS = ("ldr-serve", "ldr-translate")
DISTRIBUTION = "ldr-opennmt"


def package_commands(distribution=DISTRIBUTION):
    """The names of the console scripts the installed package declares."""
    from importlib import metadata  # pylint: disable=import-outside-toplevel

    entry_points = metadata.distribution(distribution).entry_points
    return sorted(ep.name for ep in entry_points if ep.group == "console_scripts")


def remove_other_commands(bin_dir, commands, keep=SERVING_COMMANDS):
    """Removes from :obj:`bin_dir` the scripts of :obj:`commands` not in :obj:`keep`.

    Returns:
      The names removed (those not there are skipped).
    """
    removed = []
    for name in commands:
        if name in keep:
            continue
        path = os.path.join(bin_dir, name)
        if os.path.isfile(path) or os.path.islink(path):
            os.remove(path)
            removed.append(name)
    return removed


def main(argv=None):
    """Removes the package's other commands from the running Python's ``bin`` (or the
    folder given), and says so in one line."""
    argv = sys.argv[1:] if argv is None else argv
    bin_dir = argv[0] if argv else os.path.dirname(sys.executable)
    removed = remove_other_commands(bin_dir, package_commands())
    if removed:
        print(
            "[serve] %s has %s only (%s need the training environment: source "
            "run/setup_env.sh)" % (bin_dir, " and ".join(SERVING_COMMANDS), ", ".join(removed))
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
