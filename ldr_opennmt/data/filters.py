"""Cleaning filters of a parallel corpus, each counted per domain.

Every filter looks at one raw pair and either keeps it, rewrites it (``modified``) or
drops it (``removed``). ``ldr-data`` applies them in order to every domain before the
train/dev/test split and prints what each one did (also in ``corpus.md`` and
``corpus.json``). The noise they remove was found in the default corpus:

- ``verse_reference``: Louis Segond keeps its own numbering where it differs from the
  English Bible's, and writes it at the start of the verse ("(21:4) Et toute chair
  verra ..."); the reference is stripped (the verse itself is aligned).
- ``merged_verses``: a reference left inside a segment means Segond merged a psalm's
  title with its first verse ("(18:1) Au chef des chantres ... (18:2) Je t'aime"): the
  two sides do not say the same thing, the pair is dropped.
- ``psalm_title``: the World English Bible glues the next psalm's title to the last
  verse of a psalm ("... Praise Yah! Psalm 147", "... Psalm 34 By David; when he
  pretended to be insane ..."); the title is stripped.
- ``no_letters``: a side with no letter at all (numbers, placeholders, punctuation).
- ``placeholders``: the format placeholders (``%s``, ``%(name)s``, ``{0}``, ``{name}``)
  differ between the sides: a translation that lost or invented a field.
- ``length_ratio``: one side has more than :data:`MAX_LENGTH_RATIO` times the words of
  the other (+1 each): ICD-10 short labels whose French repeats the parent category
  ("Expectorants" -> "Effets indésirables des expectorants au cours de leur usage
  thérapeutique"), verses split differently in the two Bibles.
- ``copy``: the target is the source (up to case): not a translation.
"""

import collections
import re

from ldr_opennmt.reports import markdown_table

#: The largest ratio of word counts (each + 1) between the two sides of a pair.
MAX_LENGTH_RATIO = 3.0

_LEADING_REFERENCE = re.compile(r"^\(\d+:\d+\)\s*")
_REFERENCE = re.compile(r"\(\d+:\d+\)")
# The title follows the verse's last sentence: "... to all generations. Praise Yah! Psalm 147".
_PSALM_TITLE = re.compile(r"(?<=[.!?;:,'\"`\u2019\u201d])\s+Psalm \d+\b.*$")
_LETTER = re.compile(r"[^\W\d_]")
_PLACEHOLDER = re.compile(
    r"%\([^)\s]+\)[-#0 +]*\d*(?:\.\d+)?[a-zA-Z]|%[-#0 +]*\d*(?:\.\d+)?[sdifr]|\{[\w.]*\}"
)


def _verse_reference(source, target):
    return _LEADING_REFERENCE.sub("", source), _LEADING_REFERENCE.sub("", target)


def _merged_verses(source, target):
    if _REFERENCE.search(source) or _REFERENCE.search(target):
        return None
    return source, target


def _psalm_title(source, target):
    return _PSALM_TITLE.sub("", source), _PSALM_TITLE.sub("", target)


def _no_letters(source, target):
    if _LETTER.search(_PLACEHOLDER.sub("", source)) and _LETTER.search(
        _PLACEHOLDER.sub("", target)
    ):
        return source, target
    return None


def placeholders(text):
    """The sorted format placeholders of a text (``%s``, ``%(name)s``, ``{0}``, ...)."""
    return sorted(_PLACEHOLDER.findall(text))


def _placeholders(source, target):
    if placeholders(source) != placeholders(target):
        return None
    return source, target


def length_ratio(source, target):
    """The ratio of word counts, larger over smaller, each plus one."""
    a, b = len(source.split()) + 1, len(target.split()) + 1
    return max(a, b) / min(a, b)


def _length_ratio(source, target):
    return (source, target) if length_ratio(source, target) <= MAX_LENGTH_RATIO else None


def _copy(source, target):
    return None if source.lower() == target.lower() else (source, target)


#: The filters, in the order they apply: (name, function).
FILTERS = (
    ("verse_reference", _verse_reference),
    ("merged_verses", _merged_verses),
    ("psalm_title", _psalm_title),
    ("no_letters", _no_letters),
    ("placeholders", _placeholders),
    ("length_ratio", _length_ratio),
    ("copy", _copy),
)


def clean(pairs):
    """Applies :data:`FILTERS` to raw pairs.

    Args:
      pairs: A list of ``(source, target)`` raw text pairs.

    Returns:
      A tuple ``(kept pairs, counts)``, where ``counts`` maps each filter's name to
      ``{"removed": n, "modified": n}`` (a pair is removed by the first filter that
      drops it; ``modified`` counts the kept pairs a filter rewrote).
    """
    counts = collections.OrderedDict((name, {"removed": 0, "modified": 0}) for name, _ in FILTERS)
    kept = []
    for pair in pairs:
        modified = []
        for name, function in FILTERS:
            result = function(*pair)
            if result is None:
                counts[name]["removed"] += 1
                pair = None
                break
            result = (result[0].strip(), result[1].strip())
            if result != pair:
                modified.append(name)
                pair = result
        if pair is not None:
            # A pair rewritten, then removed, counts only as removed.
            for name in modified:
                counts[name]["modified"] += 1
            kept.append(pair)
    return kept, counts


def problems(source, target):
    """The noise a clean pair must not have: a list of descriptions (empty if clean).

    The invariants the filters establish, checked again on a built corpus.
    """
    found = []
    if _REFERENCE.search(target) and not _REFERENCE.search(source):
        found.append("verse reference in the target only")
    if _PSALM_TITLE.search(source):
        found.append("psalm title glued to the source")
    if placeholders(source) != placeholders(target):
        found.append("placeholders differ")
    if length_ratio(source, target) > MAX_LENGTH_RATIO:
        found.append("length ratio %.1f" % length_ratio(source, target))
    return found


def table(filter_counts):
    """A Markdown table of what each filter did per domain.

    Args:
      filter_counts: ``{domain: {filter: {"removed": n, "modified": n}}}``, the
        filters in the same order for every domain.
    """
    domains = list(filter_counts)
    rows = []
    for name in filter_counts[domains[0]]:
        cells = []
        for domain in domains:
            count = filter_counts[domain].get(name, {"removed": 0, "modified": 0})
            cell = "-%d" % count["removed"]
            if count["modified"]:
                cell += " (%d fixed)" % count["modified"]
            cells.append(cell)
        rows.append([name] + cells)
    return markdown_table(["filter"] + domains, rows)
