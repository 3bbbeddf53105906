"""The items of the contrastive test: test sentences whose reference has a word of the
lexicon, each with variants that use another domain's translation of it.

The items (:func:`make_items`) come from the test sets, then the dev sets when the test
set gives fewer than ``max_per_word`` items for a (domain, word) (each item records its split
and line): a sentence of domain ``d`` whose source contains ``w`` and whose raw reference
contains ``d``'s translation of ``w`` as a whole word (case-insensitive, with an optional
final ``s``/``x``). For every domain ``d'`` that contrasts with ``d`` on ``w`` and whose
translation is not already in the reference, a variant replaces every occurrence of ``d``'s
translation by ``d'``'s, keeping number (singular or plural form seen in training) and
capitalization. A variant whose new word does not fit the elision before it is dropped
(``l'équilibre`` -> ``l'balance``, ``le site`` -> ``le accouchement``); gender agreement is not
adjusted (``une balance`` -> ``une équilibre``), so a variant can still be worse French for
reasons other than the word's sense.
At most ``max_per_word`` (20) items per (domain, word) and ``max_items`` (500) in all (taken
round-robin over the (domain, word) groups), in a deterministic order.

:func:`build_items` reads a corpus, finds the lexicon
(:mod:`~ldr_opennmt.evaluation.contrastive.lexicon`), and writes the items (JSON lines) with a
Markdown summary (:func:`items_summary`) and the lexicon next to them; :func:`read_items` reads
and checks an items file.
"""

import collections
import json
import os
import re

from ldr_opennmt.data import corpus as corpus_lib
from ldr_opennmt.errors import UserError
from ldr_opennmt.evaluation.contrastive.lexicon import (
    DEFAULT_SEED_WORDS,
    english_key,
    find_translations,
    read_seed_words,
    words,
)
from ldr_opennmt.reports import markdown_table
from ldr_opennmt.utils import read_lines, write_lines_atomic

ITEM_SPLITS = ("test", "dev")
ITEMS_FILE = "items.jsonl"

_LETTER_BEFORE = r"(?<![^\W\d_])"
_LETTER_AFTER = r"(?![^\W\d_])"


def _pattern(key):
    """A French word (its plural folded) as a whole word, case-insensitive, with an optional
    final ``s``/``x``."""
    return re.compile(_LETTER_BEFORE + "(%s)([sx]?)" % re.escape(key) + _LETTER_AFTER, re.I)


_VOWELS = "aeiouyhàâäéèêëîïôöùûüœæ"
_ELIDED = re.compile(_LETTER_BEFORE + r"(?:[cdjlmnst]|qu|jusqu|lorsqu|puisqu)['’]$", re.I)
_BEFORE_CONSONANT = re.compile(
    _LETTER_BEFORE + r"(?:au|ce|de|du|je|la|le|ma|me|ne|que|sa|se|ta|te)\s+$", re.I
)


def _elision_fits(before, word):
    """Whether :obj:`word` can follow :obj:`before` as far as elision goes (``l'`` before a
    vowel or ``h``, ``le``/``de``/... before a consonant or ``h``)."""
    initial = word[:1].lower()
    if _ELIDED.search(before):
        return initial in _VOWELS
    if _BEFORE_CONSONANT.search(before):
        return initial not in _VOWELS or initial == "h"
    return True


def _replace(reference, sense, other):
    """The reference with :obj:`sense`'s word replaced by :obj:`other`'s, or ``None`` when
    the elision before an occurrence does not fit the new word (``l'équilibre`` ->
    ``l'balance``)."""
    fits = []

    def _substitute(match):
        surface = match.group(0)
        new = other.plural if match.group(2) else other.singular
        fits.append(_elision_fits(reference[: match.start()], new))
        if len(surface) > 1 and surface.isupper():
            return new.upper()
        if surface[0].isupper():
            return new[0].upper() + new[1:]
        return new

    text = _pattern(sense.translation).sub(_substitute, reference)
    return text if all(fits) else None


def make_items(lexicon, examples, domains, max_per_word=20, max_items=500):
    """Contrastive items from test sentences.

    Args:
      lexicon: The output of :func:`find_translations`.
      examples: ``(split, domain, line, source, reference)`` tuples (raw text; ``line`` is
        1-based), in the order items are preferred (test before dev).
      domains: The domain order.
      max_per_word: Items kept per (domain, word), the first ones of :obj:`examples`.
      max_items: Items kept in all, round-robin over the (domain, word) groups.

    Returns:
      A list of item dicts (``id``, ``domain``, ``word``, ``split``, ``line``, ``source``,
      ``reference``, ``translation``, ``variants``: a list of ``{"domain", "translation",
      "text"}``), sorted by domain, word, split and line.
    """
    if max_per_word < 1 or max_items < 1:
        raise UserError(
            "max_per_word and max_items must be >= 1, got %r and %r" % (max_per_word, max_items)
        )
    patterns = {}

    def _found(sense, text):
        if sense.translation not in patterns:
            patterns[sense.translation] = _pattern(sense.translation)
        return patterns[sense.translation].search(text) is not None

    splits = []
    groups = collections.OrderedDict(((d, w), []) for d in domains for w in lexicon)
    for split, domain, line, source, reference in examples:
        if split not in splits:
            splits.append(split)
        keys = {english_key(w) for w in words(source)}
        for word, entry in lexicon.items():
            if word not in keys or domain not in entry.contrasts:
                continue
            group = groups[(domain, word)]
            sense = entry.senses[domain]
            if len(group) >= max_per_word or not _found(sense, reference):
                continue
            variants = []
            for other in entry.contrasts[domain]:
                other_sense = entry.senses[other]
                if _found(other_sense, reference):
                    continue  # The reference already has the other word: no clean contrast.
                text = _replace(reference, sense, other_sense)
                if text is None:
                    continue  # The elision would give the variant away.
                variants.append(
                    {"domain": other, "translation": other_sense.singular, "text": text}
                )
            if not variants:
                continue
            group.append(
                {
                    "id": "%s.%s.%d.%s" % (split, domain, line, word),
                    "domain": domain,
                    "word": word,
                    "split": split,
                    "line": line,
                    "source": source,
                    "reference": reference,
                    "translation": sense.singular,
                    "variants": variants,
                }
            )
    items = []
    rank = 0
    while len(items) < max_items and any(len(g) > rank for g in groups.values()):
        for group in groups.values():
            if rank < len(group) and len(items) < max_items:
                items.append(group[rank])
        rank += 1
    order = {d: i for i, d in enumerate(domains)}
    items.sort(key=lambda x: (order[x["domain"]], x["word"], splits.index(x["split"]), x["line"]))
    return items


def _raw_pairs(corpus_dir, split, domain, src, tgt):
    paths = [
        os.path.join(corpus_dir, "raw", "%s.%s.%s" % (split, domain, lang)) for lang in (src, tgt)
    ]
    for path in paths:
        if not os.path.exists(path):
            raise UserError("%s: no such file (corpus %s)" % (path, corpus_dir))
    sources = read_lines(paths[0])
    targets = read_lines(paths[1])
    if len(sources) != len(targets):
        raise UserError(
            "%s: %d lines, but %s has %d" % (paths[1], len(targets), paths[0], len(sources))
        )
    return list(zip(sources, targets))


#: The line of an empty items file's summary that says why it is empty.
NO_ITEMS_PREFIX = "Not run: "


def build_items(
    corpus_dir,
    out_path,
    seed_words=DEFAULT_SEED_WORDS,
    splits=ITEM_SPLITS,
    max_per_word=20,
    max_items=500,
    min_count=4,
    seed_min_count=3,
    min_dice=0.3,
    min_share=0.5,
    min_shared=3,
    max_cross_share=0.2,
    allow_none=False,
):
    """Builds the contrastive items of a corpus and writes them.

    Writes :obj:`out_path` (JSON lines, one item per line), and next to it, with the same stem,
    ``.md`` (the lexicon, items per domain and word, examples) and ``.lexicon.json``.

    Args:
      corpus_dir: A corpus built by ``ldr-data`` (its ``raw/`` files are read).
      out_path: The items file to write.
      seed_words: A seed word file (see ``contrastive_words.txt``), or ``None``.
      splits: The splits items come from, in order of preference (``test``, ``dev``).
      max_per_word: Items per (domain, word).
      max_items: Items in all.
      min_count: See :func:`find_translations` (and the other thresholds).
      seed_min_count: See :func:`find_translations`.
      min_dice: See :func:`find_translations`.
      min_share: See :func:`find_translations`.
      min_shared: See :func:`find_translations`.
      max_cross_share: See :func:`find_translations`.
      allow_none: Where no item is found, write an empty items file and a summary saying why
        (:func:`no_items_reason` reads it) instead of failing: the experiments on a corpus of
        one's own, whose words may have no domain-dependent translation, report the
        contrastive test as not run rather than stop.

    Returns:
      The list of items.

    Raises:
      UserError: on a missing or incomplete corpus, a bad seed file or split, an
        :obj:`out_path` that its summary would replace (``.md``), or when no item is found
        (unless :obj:`allow_none`).
    """
    stem = os.path.splitext(out_path)[0]
    if stem + ".md" == out_path:
        raise UserError(
            "%s: the items file would be replaced by its summary (%s.md): name it .jsonl"
            % (out_path, stem)
        )
    info = corpus_lib.load_info(corpus_dir)
    domains, src, tgt = info["domains"], info["source_lang"], info["target_lang"]
    splits = list(splits)
    for split in splits:
        if split not in ITEM_SPLITS:
            raise UserError(
                "unknown item split %r (items come from %s, never from training data)"
                % (split, " or ".join(ITEM_SPLITS))
            )
    seeds, excluded = read_seed_words(seed_words) if seed_words else ({}, set())
    train = collections.OrderedDict(
        (d, _raw_pairs(corpus_dir, "train", d, src, tgt)) for d in domains
    )
    lexicon = find_translations(
        train,
        seed_words=seeds,
        excluded_words=excluded,
        min_count=min_count,
        seed_min_count=seed_min_count,
        min_dice=min_dice,
        min_share=min_share,
        min_shared=min_shared,
        max_cross_share=max_cross_share,
    )
    examples = [
        (split, domain, i, source, reference)
        for split in splits
        for domain in domains
        for i, (source, reference) in enumerate(
            _raw_pairs(corpus_dir, split, domain, src, tgt), start=1
        )
    ]
    items = make_items(lexicon, examples, domains, max_per_word=max_per_word, max_items=max_items)
    out_dir = os.path.dirname(os.path.abspath(out_path))
    if not items:
        reason = (
            "no contrastive item found in %s (splits %s; %d words with domain-dependent "
            "translations): lower min_count (--min-count) or add words with hand senses to the "
            "seed file (%s)"
            % (corpus_dir, ", ".join(splits), len(lexicon), seed_words or "none given")
        )
        if not allow_none:
            raise UserError(reason)
        os.makedirs(out_dir, exist_ok=True)
        write_lines_atomic(out_path, [])
        write_lines_atomic(stem + ".md", ["# Contrastive items", "", NO_ITEMS_PREFIX + reason])
        return []
    os.makedirs(out_dir, exist_ok=True)
    write_lines_atomic(out_path, [json.dumps(item, ensure_ascii=False) for item in items])
    parameters = collections.OrderedDict(
        [
            ("corpus", corpus_dir),
            ("seed_words", seed_words),
            ("splits", splits),
            ("max_per_word", max_per_word),
            ("max_items", max_items),
            ("min_count", min_count),
            ("seed_min_count", seed_min_count),
            ("min_dice", min_dice),
            ("min_share", min_share),
            ("min_shared", min_shared),
            ("max_cross_share", max_cross_share),
        ]
    )
    lexicon_json = {
        "parameters": parameters,
        "words": {
            word: {
                "seed": entry.seed,
                "senses": {d: s._asdict() for d, s in entry.senses.items()},
                "contrasts": entry.contrasts,
            }
            for word, entry in lexicon.items()
        },
    }
    write_lines_atomic(
        stem + ".lexicon.json", [json.dumps(lexicon_json, indent=2, ensure_ascii=False)]
    )
    tokenizer = corpus_lib.load_tokenizer(corpus_dir, tgt)
    lengths = collections.Counter()
    for item in items:
        reference = len(tokenizer.tokenize(item["reference"])[0])
        for variant in item["variants"]:
            difference = len(tokenizer.tokenize(variant["text"])[0]) - reference
            lengths["longer" if difference > 0 else "shorter" if difference < 0 else "equal"] += 1
    summary = items_summary(items, lexicon, domains, parameters, lengths)
    write_lines_atomic(stem + ".md", [summary])
    return items


def no_items_reason(items_path):
    """Why an items file that :func:`build_items` wrote with ``allow_none`` is empty (the
    line of its summary), or ``None`` where it has items or no such summary."""
    if os.path.exists(items_path) and any(line.strip() for line in read_lines(items_path)):
        return None
    summary = os.path.splitext(items_path)[0] + ".md"
    if not os.path.exists(summary):
        return None
    for line in read_lines(summary):
        if line.startswith(NO_ITEMS_PREFIX):
            return line[len(NO_ITEMS_PREFIX) :]
    return None


def items_summary(items, lexicon, domains, parameters=None, lengths=None):
    """A Markdown summary: the lexicon, items per domain and word, and a few examples.

    Args:
      items: The items.
      lexicon: The lexicon they come from (:func:`find_translations`).
      domains: The domain order.
      parameters: Optional build parameters to list.
      lengths: Optional counts of variants ``longer``, ``shorter`` or ``equal`` to their
        reference in target tokens.
    """
    parts = ["# Contrastive items", ""]
    if parameters:
        parts.append(
            "Built with %s."
            % ", ".join("%s=%s" % (k, v) for k, v in parameters.items() if k != "corpus")
        )
        parts.append("")
    lexicon_rows = []
    for word, entry in lexicon.items():
        cells = []
        for domain in domains:
            sense = entry.senses.get(domain)
            if sense is None:
                cells.append("")
            elif sense.origin == "seed":
                cells.append("%s (hand)" % sense.singular)
            else:
                cells.append(
                    "%s (dice %.2f, %d%% of %d)"
                    % (sense.singular, sense.dice, round(100 * sense.share), sense.count)
                )
        lexicon_rows.append([word, "yes" if entry.seed else ""] + cells)
    counts = collections.Counter((item["word"], item["domain"]) for item in items)
    splits = collections.Counter(item["split"] for item in items)
    item_words = sorted({item["word"] for item in items})
    count_rows = []
    for word in item_words:
        row = [counts[(word, d)] for d in domains]
        count_rows.append([word] + row + [sum(row)])
    totals = [sum(counts[(w, d)] for w in item_words) for d in domains]
    count_rows.append(["**all**"] + totals + [len(items)])
    parts += [
        "## Lexicon (dominant translation per domain)",
        "",
        markdown_table(
            ["word", "seed"] + list(domains), lexicon_rows, align="l" * (len(domains) + 2)
        ),
        "",
        "## Items per word and domain",
        "",
        markdown_table(["word"] + list(domains) + ["all"], count_rows),
    ]
    parts.append("")
    parts.append(
        "%d items (%s), %d variants."
        % (
            len(items),
            ", ".join("%s %d" % (s, n) for s, n in sorted(splits.items())),
            sum(len(item["variants"]) for item in items),
        )
    )
    if lengths:
        total = sum(lengths.values())
        parts.append("")
        parts.append(
            "In target (BPE) tokens, %s of the variants are longer than their reference, %s "
            "shorter, %s of equal length: a system that ignores the sentence (a short-trained or "
            "random one) tends to prefer the shorter text, which the accuracy does not correct; "
            "the label effect of `ldr-eval contrastive` does."
            % tuple("%.0f%%" % (100.0 * lengths[k] / total) for k in ("longer", "shorter", "equal"))
        )
    parts += ["", "## Examples", ""]
    shown = set()
    for item in items:
        if item["domain"] in shown:
            continue
        shown.add(item["domain"])
        parts.append("* `%s` (%s, *%s*)" % (item["id"], item["domain"], item["word"]))
        parts.append("  * source: %s" % item["source"])
        parts.append("  * reference: %s" % item["reference"])
        for variant in item["variants"]:
            parts.append("  * %s variant: %s" % (variant["domain"], variant["text"]))
    return "\n".join(parts)


_ITEM_KEYS = {"domain": str, "word": str, "source": str, "reference": str, "variants": list}


def read_items(path, domains=None):
    """Reads and checks an items file (JSON lines, see :func:`make_items`).

    Args:
      path: The items file.
      domains: If set, the domains items and variants may name.

    Raises:
      UserError: naming the file and line of a malformed item.
    """
    if not os.path.exists(path):
        raise UserError("%s: no such items file" % path)
    items = []
    for number, line in enumerate(read_lines(path), start=1):
        if not line.strip():
            continue
        where = "%s:%d" % (path, number)
        try:
            item = json.loads(line)
        except ValueError as e:
            raise UserError("%s: not a JSON object (%s)" % (where, e)) from e
        if not isinstance(item, dict):
            raise UserError("%s: not a JSON object" % where)
        for key, kind in _ITEM_KEYS.items():
            if not isinstance(item.get(key), kind) or not item[key]:
                raise UserError("%s: item without a valid %r (%r)" % (where, key, item.get(key)))
        if domains is not None and item["domain"] not in domains:
            raise UserError(
                "%s: unknown domain %r (domains: %s)" % (where, item["domain"], ", ".join(domains))
            )
        for variant in item["variants"]:
            if (
                not isinstance(variant, dict)
                or not isinstance(variant.get("domain"), str)
                or not isinstance(variant.get("text"), str)
                or not variant["text"].strip()
            ):
                raise UserError(
                    '%s: a variant must be {"domain": ..., "text": ...}, got %r' % (where, variant)
                )
            if variant["domain"] == item["domain"] or (
                domains is not None and variant["domain"] not in domains
            ):
                raise UserError(
                    "%s: variant domain %r must be another domain than the item's (%s)"
                    % (where, variant["domain"], item["domain"])
                )
        item.setdefault("id", "%s:%d" % (os.path.basename(path), number))
        items.append(item)
    if not items and no_items_reason(path) is None:  # Not a corpus without items.
        raise UserError("%s: no items" % path)
    return items
