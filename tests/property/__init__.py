"""Property-based tests of the readers of user input (hypothesis).

Each reader of something a user hands the project (label files, per-domain corpora,
domain lists, ensemble labels, vocabulary and tokenization entries, configuration
files, the SavedModel's domain input) either accepts its input or raises
:class:`~ldr_opennmt.errors.UserError` with a one-line message: never another
exception type, never a hang.

The Hypothesis profile (no example database, a derandomized search) is registered and
loaded by ``tests/conftest.py``.
"""
