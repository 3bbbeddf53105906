"""Names that the package turns into file or directory names.

Domain names (a CTranslate2 model directory per domain, per-domain files of
``ldr-data`` and ``ldr-eval``), system names of ``ldr-eval --system NAME=...`` and
the like become parts of paths. Each is checked once, where it enters the package,
with :func:`check_path_name`: letters, digits, ``-``, ``_`` and ``.``, not starting
with ``.`` (so never ``..``, a hidden file, a separator or an absolute path), at
most :data:`MAX_LENGTH` characters.
"""

import re

from ldr_opennmt.errors import UserError

#: The longest accepted name (file systems allow 255 bytes per path component;
#: names get prefixes and suffixes).
MAX_LENGTH = 100

_PATH_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]*\Z")
# YAML 1.1 (PyYAML) reads these unquoted words as booleans or null.
_YAML_WORDS = "yes, no, on, off, true, false, y, n, null, ~"


def check_path_name(name, what, where):
    """Checks a name that becomes part of a path.

    Args:
      name: The name, as read (a YAML value may not be a string).
      what: What the name is, for the message (``"domain name"``, ``"system name"``).
      where: Where it comes from (a file, a key, an option), for the message.

    Returns:
      :obj:`name`.

    Raises:
      UserError: ``WHERE: invalid WHAT 'NAME' (...)``, naming the YAML cause for a
        value that is not a string.
    """
    if not isinstance(name, str):
        cause = ""
        if isinstance(name, bool) or name is None:
            cause = (
                "; YAML reads the unquoted words %s as booleans or null: quote the name"
                % _YAML_WORDS
            )
        elif isinstance(name, (int, float)):
            cause = "; YAML reads unquoted numbers as numbers: quote the name"
        raise UserError(
            "%s: %s %r is a %s, not a string%s" % (where, what, name, type(name).__name__, cause)
        )
    if len(name) > MAX_LENGTH or not _PATH_NAME.match(name):
        raise UserError(
            "%s: invalid %s %r (it becomes a file name: use letters, digits, '-', '_' and "
            "'.', not first, at most %d characters)" % (where, what, name, MAX_LENGTH)
        )
    return name


def check_unique(names, what, where):
    """Refuses the first name given twice.

    Raises:
      UserError: ``WHERE: WHAT 'NAME' is given twice``.
    """
    seen = set()
    for name in names:
        if name in seen:
            raise UserError("%s: %s %r is given twice" % (where, what, name))
        seen.add(name)
