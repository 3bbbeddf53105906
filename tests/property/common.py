"""What every property test of this folder checks, and the inputs they share."""

import datetime
import math

from hypothesis import strategies as st

from ldr_opennmt.errors import UserError


def read(reader, *args, **kwargs):
    """Calls a reader of user input; the property every reader of this folder has.

    Returns:
      ``(result, None)`` if the reader accepted its input, ``(None, message)`` if it
      raised :class:`UserError` with a non-empty message of one line (no ``\\n``, no
      ``\\r``, nor any other separator that ``str.splitlines`` cuts at: a message that
      names a value must quote it). Any other exception propagates: hypothesis reports
      it with the input that raised it.
    """
    try:
        return reader(*args, **kwargs), None
    except UserError as e:
        message = str(e)
        if not message or message.splitlines() != [message]:
            raise AssertionError("not a one-line UserError message: %r" % message) from e
        return None, message


#: Separators that are not line ends for the readers (``\\n`` alone is), but that
#: ``str.splitlines`` or a terminal would take for one.
OTHER_SEPARATORS = ["\r", "\u2028", "\u2029", "\u0085", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e"]

#: Text with the pieces that trip line handling and label parsing over-represented.
tricky_text = st.lists(
    st.one_of(
        st.characters(codec="utf-8"),
        st.sampled_from(["\n", " ", "\t", ":", "a", "generic", "ens-"] + OTHER_SEPARATORS),
    ),
    max_size=12,
).map("".join)

#: A path string: a file of the test (resolved by the test), a missing file, a URL-like
#: name whose scheme TensorFlow does not know, names with a line break, any text.
path_tokens = st.one_of(
    st.sampled_from(
        [
            "nope.txt",
            "zz://x/y",
            "s3://bucket/key",
            "hdfs://host/path",
            "ram://nothing",
            "file:///nonexistent",
            "missing\nfile",
            "line\u2028sep",
            "",
            "/",
            "x" * 5000,
        ]
    ),
    tricky_text,
)

#: What YAML hands a reader: every scalar type ``yaml.safe_load`` makes (numbers too big
#: for a float, NaN and infinities included), in lists and mappings.
yaml_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.sampled_from([10**400, -(10**400), 0, 1, -1]),
    st.floats(),
    st.sampled_from([math.nan, math.inf, -math.inf, 1e308]),
    tricky_text,
    st.binary(max_size=8),
    st.dates(),
    st.datetimes(timezones=st.just(datetime.timezone.utc)),
)
yaml_keys = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), tricky_text)


def yaml_values(leaves=yaml_scalars, max_leaves=12):
    """YAML-ish values: :obj:`leaves`, in lists and mappings, nested."""
    return st.recursive(
        leaves,
        lambda children: st.one_of(
            st.lists(children, max_size=4),
            st.dictionaries(yaml_keys, children, max_size=4),
        ),
        max_leaves=max_leaves,
    )
