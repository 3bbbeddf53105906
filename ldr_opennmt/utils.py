"""Small file helpers shared by the corpus builder and the evaluation."""

import os


def read_lines(path):
    """The lines of a UTF-8 text file, without line ends."""
    with open(path, encoding="utf-8") as f:
        return f.read().splitlines()


def write_lines(path, lines):
    """Writes lines to a UTF-8 text file."""
    with open(path, "w", encoding="utf-8") as f:
        for line in lines:
            f.write(line + "\n")


def write_lines_atomic(path, lines):
    """Writes lines to ``path + ".partial"`` then renames it: no half-written file
    ever looks complete."""
    partial = path + ".partial"
    try:
        write_lines(partial, lines)
        os.replace(partial, path)
    finally:
        if os.path.exists(partial):  # A failed write leaves nothing behind.
            os.remove(partial)


DEFAULT_CACHE = os.environ.get(
    "LDR_CACHE", os.path.join(os.path.expanduser("~"), ".cache", "ldr-opennmt")
)
