"""A contrastive test of domain-dependent lexical choice, built from the corpus itself.

BLEU cannot show what a domain label is for. This test asks a system to choose between the
reference translation of a test sentence and *variants* of it in which the translation of one
English word is replaced by its translation in another domain (``save``: ``enregistrer`` in
software, ``sauver`` in the Bible). A system is right on an item when it gives the reference a
higher log-probability (forced decoding of the whole target, OpenNMT-tf's ``score``) than
every variant.

**The lexicon** (:func:`find_translations`), from the raw training data of each domain:

* text is lowercased and split into words of letters (``[^\\W\\d_]+``: apostrophes, hyphens,
  digits and punctuation separate words, so ``l'esprit`` gives ``esprit``); English words of
  fewer than 3 letters and stop words are left out, and so are French ones; plurals are folded
  (English ``-ies`` -> ``-y``, ``-s`` -> ``''`` except after ``ss``/``us``/``is``; French
  final ``s``/``x`` dropped, for words of 4 letters or more), so ``cells`` counts as ``cell``
  and ``cellules`` as ``cellule``;
* association is the **Dice coefficient over sentence pairs**, per domain:
  ``dice(e, f) = 2 n(e, f) / (n(e) + n(f))``, with ``n`` the number of training pairs whose
  source contains ``e``, whose target contains ``f``, or both. It is count-based, symmetric,
  and does not favour frequent French words the way raw co-occurrence does;
* candidates: English words found in at least ``min_count`` (4) training pairs of at least two
  domains, plus the seed words of ``contrastive_words.txt`` (the issue's examples and a few
  dictionary words; they need only ``seed_min_count`` (3) pairs in a domain);
* the **dominant translation** of ``e`` in a domain: its French word of highest Dice among
  those found with it in at least ``min_shared`` (3) pairs, kept only if its Dice is at least
  ``min_dice`` (0.3), it occurs in at least ``min_share`` (50%) of the pairs that contain
  ``e``, and ``e`` is its own best English associate (no English word has a higher Dice with
  it: a one-to-one, "mutual best" link, which drops collocates such as ``early`` -> ``matin``);
* two domains **contrast** on ``e`` when their dominant translations are different words (not
  equal up to accents, not one inside the other, no common prefix of 5 letters: ``trouvé`` /
  ``trouvée`` and ``clé`` / ``clef`` are one word) and each is rare with ``e`` in the other
  domain (in fewer than ``max_cross_share`` (20%) of its pairs there). A word is kept when at
  least two domains contrast on it. The seed file can also give hand senses
  (``save religious=sauver``), used only in a domain where the data give the word no dominant
  translation, and exclude words checked by hand (``-eye``: ``œil`` / ``yeux``).

**The items** (:func:`make_items`) come from the test sets, then the dev sets when the test
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

**Scoring** (:func:`evaluate`): each system scores every item's reference and variants with
OpenNMT-tf's ``score`` run (:meth:`opennmt.Runner.score` of the system's multi-domain Runner:
the sum of the target tokens' log-probabilities, ``</s>`` included), text tokenized with the
corpus' BPE tokenizers, label files as in :mod:`~ldr_opennmt.evaluation.evaluate`. Label modes:

* ``oracle``, ``generic``, ``wrong``: as :func:`~ldr_opennmt.evaluation.evaluate.labels_for`
  (the item's domain, ``generic``, the next domain); reported: **accuracy**, the % of items
  where the reference scores strictly above every variant (a tie is not right);
* ``flipped``: each variant is compared with the reference under *the variant's* domain label;
  reported: **follow**, the % of (item, variant) pairs where the system then scores the variant
  above the reference, i.e. follows the label.

With both ``oracle`` and ``flipped``, the **label effect** (:func:`label_shift`) compares the
two for each pair: the % of pairs where the variant's label, instead of the item's, raises the
variant's log-probability relative to the reference's. Whole-sentence log-probabilities favour
short texts, and most variants have more target tokens than their reference (a rarer word cut
into more BPE pieces), so accuracy and follow rates carry a length bias that even a random
model shows; the label effect compares the same two texts under two labels, so that bias
cancels out.

Models that ignore labels (Mixed; domain mixing, labels for training only) are scored once;
their follow rate, from the same scores, is what a system that does not listen to the label
gets (their label effect is 0). Scores are written per system and mode (under exclusive
temporary names, renamed when complete) and reused while the checkpoint, the items and the
corpus tokenizers are unchanged (``NAME.contrastive.stamp``, written before them). Only
files under a stamp are ever removed: a score file without its system's stamp is refused
(:func:`check_outputs`), and so are two systems of one name.
"""

import collections
import hashlib
import json
import math
import os
import re
import tempfile
import unicodedata

from tqdm import tqdm

from ldr_opennmt.data import corpus as corpus_lib
from ldr_opennmt.errors import UserError
from ldr_opennmt.evaluation import evaluate as evaluate_lib
from ldr_opennmt.utils import read_lines, save_figure, write_lines, write_lines_atomic

MODES = ("oracle", "generic", "wrong", "flipped")
#: The seed words shipped with the package.
DEFAULT_SEED_WORDS = os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "contrastive_words.txt"
)
ITEM_SPLITS = ("test", "dev")
RESULTS_FILE = "contrastive.json"
TABLE_FILE = "contrastive.md"
CHART_FILE = "contrastive.png"
ITEMS_FILE = "items.jsonl"

_WORD = re.compile(r"[^\W\d_]+")
_LETTER_BEFORE = r"(?<![^\W\d_])"
_LETTER_AFTER = r"(?![^\W\d_])"

EN_STOPWORDS = frozenset(
    """a about above after again against all also am an and any are as at be because been
    before being below between both but by can cannot could did do does doing down during each
    few for from further had has have having he her here hers herself him himself his how i if
    in into is it its itself just let me more most my myself no nor not now of off on once only
    or other our ours ourselves out over own same shall she should so some such than that the
    their theirs them themselves then there these they this those through thus to too under
    until up upon us very was we were what when where which while who whom why will with would
    ye yet you your yours yourself yourselves""".split()
)
FR_STOPWORDS = frozenset(
    """a à au aux avec ce ces cet cette ceux comme dans de des du elle elles en et eux il ils je
    la le les leur leurs lui ma mais me mes moi mon même ne ni nos notre nous on ou où par pas
    pour qu que quel quelle qui sa sans se ses si son sont sur ta te tes toi ton tous tout toute
    toutes tu un une vos votre vous été être est sera sont était avait ont ai as avez avons
    fut plus""".split()
)

#: One domain's dominant translation of an English word.
Sense = collections.namedtuple(
    "Sense", ("translation", "singular", "plural", "dice", "share", "count", "origin")
)
Sense.__doc__ += """

Fields: ``translation`` (the French word with its plural folded: the form matched in
references), ``singular`` and ``plural`` (the surface forms written into variants), ``dice``
and ``share`` (its Dice coefficient with the English word and the share of the English word's
training pairs that contain it; ``None`` for a hand sense), ``count`` (training pairs of the
domain whose source has the English word) and ``origin`` (``"data"`` or ``"seed"``)."""

#: A word of the lexicon: its senses per domain and, per domain, the domains it contrasts with.
Entry = collections.namedtuple("Entry", ("word", "senses", "contrasts", "seed"))


def words(text):
    """The lowercased words (runs of letters) of :obj:`text`."""
    return _WORD.findall(text.lower())


def english_key(word):
    """An English word with its plural folded (``cells`` -> ``cell``, ``parties`` -> ``party``)."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def french_key(word):
    """A French word with a final plural ``s``/``x`` dropped (words of 4 letters or more)."""
    if len(word) > 3 and word[-1] in "sx":
        return word[:-1]
    return word


def _strip_accents(text):
    return "".join(c for c in unicodedata.normalize("NFD", text) if not unicodedata.combining(c))


def related(first, second):
    """Whether two French words are one word up to accents, inflection or spelling: equal
    without accents, one inside the other, or a common prefix of 5 letters."""
    a, b = _strip_accents(first), _strip_accents(second)
    return a in b or b in a or len(os.path.commonprefix([a, b])) >= 5


def _content_en(word):
    return len(word) >= 3 and word not in EN_STOPWORDS


def _content_fr(word):
    return len(word) >= 3 and word not in FR_STOPWORDS


def _pattern(key):
    return re.compile(_LETTER_BEFORE + "(%s)([sx]?)" % re.escape(key) + _LETTER_AFTER, re.I)


class _DomainCounts:
    """Sentence-pair counts of one domain's training data."""

    def __init__(self, pairs):
        self.en = collections.Counter()
        self.fr = collections.Counter()
        self.forms = collections.defaultdict(collections.Counter)
        self._sources, self._targets = [], []
        self._en_index = collections.defaultdict(list)
        self._fr_index = collections.defaultdict(list)
        for i, (source, target) in enumerate(pairs):
            en_keys = {english_key(w) for w in words(source) if _content_en(w)}
            fr_keys = set()
            for w in words(target):
                if _content_fr(w):
                    key = french_key(w)
                    fr_keys.add(key)
                    self.forms[key][w] += 1
            self._sources.append(en_keys)
            self._targets.append(fr_keys)
            for key in en_keys:
                self._en_index[key].append(i)
            for key in fr_keys:
                self._fr_index[key].append(i)
        self.en.update({k: len(v) for k, v in self._en_index.items()})
        self.fr.update({k: len(v) for k, v in self._fr_index.items()})

    def cooccurrences(self, en_key):
        """French word -> pairs shared with :obj:`en_key`."""
        counts = collections.Counter()
        for i in self._en_index.get(en_key, ()):
            counts.update(self._targets[i])
        return counts

    def reverse_cooccurrences(self, fr_key):
        """English word -> pairs shared with :obj:`fr_key`."""
        counts = collections.Counter()
        for i in self._fr_index.get(fr_key, ()):
            counts.update(self._sources[i])
        return counts

    def dice(self, en_key, fr_key, shared):
        return 2.0 * shared / (self.en[en_key] + self.fr[fr_key])

    def surface_forms(self, key):
        """(singular, plural) surface forms of a French word, from the training data."""
        forms = self.forms.get(key)
        if not forms:
            return key, _plural(key)
        ranked = sorted(forms, key=lambda w: (-forms[w], w))
        singular = key if key in forms else ranked[0]
        plurals = [w for w in ranked if w != key and w[:-1] == key]
        return singular, plurals[0] if plurals else _plural(singular)


def _plural(word):
    return word if word[-1:] in ("s", "x", "z") else word + "s"


def read_seed_words(path):
    """Reads a seed file (see ``contrastive_words.txt``).

    Returns:
      ``(seeds, excluded)``: ``{word: {domain: hand translation}}`` in file order, and the
      set of words (lines ``-word``) never to keep.

    Raises:
      UserError: naming the file and line of a malformed entry.
    """
    if not os.path.exists(path):
        raise UserError("%s: no such seed word file" % path)
    seeds = collections.OrderedDict()
    excluded = set()
    for number, line in enumerate(read_lines(path), start=1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        fields = line.split()
        word = fields[0].lower()
        exclude = word.startswith("-")
        word = word[1:] if exclude else word
        if words(word) != [word]:
            raise UserError(
                "%s:%d: %r is not an English word (letters only)" % (path, number, word)
            )
        if exclude:
            if len(fields) > 1:
                raise UserError(
                    "%s:%d: an excluded word (-%s) takes no senses" % (path, number, word)
                )
            excluded.add(english_key(word))
            continue
        senses = {}
        for field in fields[1:]:
            domain, sep, translation = field.partition("=")
            translation = translation.lower()
            if not sep or not domain or words(translation) != [translation]:
                raise UserError(
                    "%s:%d: expected DOMAIN=FRENCH_WORD after the word, got %r"
                    % (path, number, field)
                )
            senses[domain] = translation
        seeds[english_key(word)] = senses
    return seeds, excluded


def find_translations(
    pairs_by_domain,
    seed_words=None,
    excluded_words=(),
    min_count=4,
    seed_min_count=3,
    min_dice=0.3,
    min_share=0.5,
    min_shared=3,
    max_cross_share=0.2,
):
    """The words whose dominant French translation depends on the domain.

    See the module documentation for the criteria.

    Args:
      pairs_by_domain: An ordered dict ``{domain: [(english, french), ...]}`` of raw text.
      seed_words: Optional ``{word: {domain: hand translation}}`` (:func:`read_seed_words`).
      excluded_words: Words never kept (checked by hand: not domain-dependent translations).
      min_count: Training pairs an automatic candidate needs in at least two domains.
      seed_min_count: Training pairs a seed word needs in a domain to get a sense there.
      min_dice: Minimum Dice coefficient of a dominant translation.
      min_share: Minimum share of the word's pairs that contain its dominant translation.
      min_shared: Minimum number of pairs that contain both the word and its translation.
      max_cross_share: Maximum share of a word's pairs in one domain that may contain another
        domain's translation for the two domains to contrast.

    Returns:
      An ordered dict ``{word: Entry}``, sorted by word; ``Entry.contrasts`` maps each domain
      to the domains (in domain order) whose translation differs.

    Raises:
      UserError: on an unknown domain in a hand sense or a bad threshold.
    """
    domains = list(pairs_by_domain)
    seed_words = seed_words or {}
    for name, value in (("min_count", min_count), ("seed_min_count", seed_min_count)):
        if value < 1:
            raise UserError("%s must be >= 1, got %r" % (name, value))
    for word, senses in seed_words.items():
        for domain in senses:
            if domain not in domains:
                raise UserError(
                    "seed word %r: unknown domain %r (domains: %s)"
                    % (word, domain, ", ".join(domains))
                )
    counts = collections.OrderedDict((d, _DomainCounts(p)) for d, p in pairs_by_domain.items())
    everything = set()
    for c in counts.values():
        everything.update(c.en)
    candidates = {w for w in everything if sum(counts[d].en[w] >= min_count for d in domains) >= 2}
    candidates.update(seed_words)
    candidates.difference_update(english_key(w) for w in excluded_words)

    lexicon = collections.OrderedDict()
    for word in sorted(candidates):
        threshold = seed_min_count if word in seed_words else min_count
        senses = collections.OrderedDict()
        for domain in domains:
            c = counts[domain]
            sense = None
            if c.en[word] >= threshold:
                sense = _dominant(c, word, min_dice, min_share, min_shared)
            hand = seed_words.get(word, {}).get(domain)
            if sense is None and hand:
                sense = Sense(french_key(hand), hand, _plural(hand), None, None, c.en[word], "seed")
            if sense is not None:
                senses[domain] = sense
        contrasts = collections.OrderedDict()
        for domain, sense in senses.items():
            others = [
                other
                for other, other_sense in senses.items()
                if other != domain
                and not related(sense.translation, other_sense.translation)
                and _rare(counts[domain], word, other_sense.translation, threshold, max_cross_share)
                and _rare(counts[other], word, sense.translation, threshold, max_cross_share)
            ]
            if others:
                contrasts[domain] = others
        if contrasts:
            lexicon[word] = Entry(word, senses, contrasts, word in seed_words)
    return lexicon


def _dominant(counts, word, min_dice, min_share, min_shared):
    shared = counts.cooccurrences(word)
    ranked = sorted(
        ((counts.dice(word, f, n), n, f) for f, n in shared.items() if n >= min_shared),
        key=lambda x: (-x[0], -x[1], x[2]),
    )
    if not ranked:
        return None
    dice, n, translation = ranked[0]
    share = n / counts.en[word]
    if dice < min_dice or share < min_share:
        return None
    # Mutual best: no English word is more associated with the translation.
    reverse = counts.reverse_cooccurrences(translation)
    if any(counts.dice(e, translation, m) > dice + 1e-12 for e, m in reverse.items()):
        return None
    singular, plural = counts.surface_forms(translation)
    return Sense(translation, singular, plural, dice, share, counts.en[word], "data")


def _rare(counts, word, translation, threshold, max_share):
    """Whether :obj:`translation` is rare with :obj:`word` in a domain (or the domain has too
    few pairs with the word to tell)."""
    if counts.en[word] < threshold:
        return True
    return counts.cooccurrences(word)[translation] / counts.en[word] < max_share


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

    Returns:
      The list of items.

    Raises:
      UserError: on a missing or incomplete corpus, a bad seed file or split, an
        :obj:`out_path` that its summary would replace (``.md``), or when no item is found.
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
    if not items:
        raise UserError(
            "no contrastive item found in %s (splits %s; %d words with domain-dependent "
            "translations): lower min_count (--min-count) or add words with hand senses to the "
            "seed file (%s)"
            % (corpus_dir, ", ".join(splits), len(lexicon), seed_words or "none given")
        )
    out_dir = os.path.dirname(os.path.abspath(out_path))
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
    parts += ["## Lexicon (dominant translation per domain)", ""]
    parts.append("| word | seed | %s |" % " | ".join(domains))
    parts.append("|---|---|%s|" % "|".join("---" for _ in domains))
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
        parts.append("| %s | %s | %s |" % (word, "yes" if entry.seed else "", " | ".join(cells)))
    parts += ["", "## Items per word and domain", ""]
    counts = collections.Counter((item["word"], item["domain"]) for item in items)
    splits = collections.Counter(item["split"] for item in items)
    item_words = sorted({item["word"] for item in items})
    parts.append("| word | %s | all |" % " | ".join(domains))
    parts.append("|---|%s---:|" % ("---:|" * len(domains)))
    for word in item_words:
        row = [counts[(word, d)] for d in domains]
        parts.append("| %s | %s | %d |" % (word, " | ".join(str(n) for n in row), sum(row)))
    totals = [sum(counts[(w, d)] for w in item_words) for d in domains]
    parts.append("| **all** | %s | %d |" % (" | ".join(str(n) for n in totals), len(items)))
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
    if not items:
        raise UserError("%s: no items" % path)
    return items


def _digest(path):
    with open(path, "rb") as f:
        return hashlib.sha1(f.read()).hexdigest()


def _candidates(item, mode, domains):
    """The (label, target) pairs scored for an item in a mode, in a fixed layout: the
    reference then each variant (one label), or per variant (reference, variant) under the
    variant's label (``flipped``)."""
    if mode == "flipped":
        return [
            (variant["domain"], text)
            for variant in item["variants"]
            for text in (item["reference"], variant["text"])
        ]
    label = evaluate_lib.labels_for(mode, item["domain"], domains, 1)[0]
    return [(label, item["reference"])] + [(label, v["text"]) for v in item["variants"]]


def _score_system(system, items, modes, domains, tokenizers, out_dir, outputs):
    """Scores the items in the given modes with one OpenNMT-tf score run; writes one score
    file per mode (JSON lines: ``{"id", "reference", "variants"}`` log-probabilities)."""
    src_tok, tgt_tok = tokenizers
    lines = collections.OrderedDict()
    layout = {}
    for mode in modes:
        layout[mode] = []
        for item in items:
            source = " ".join(src_tok.tokenize(item["source"])[0])
            indices = []
            for label, target in _candidates(item, mode, domains):
                key = (source, label, " ".join(tgt_tok.tokenize(target)[0]))
                indices.append(lines.setdefault(key, len(lines)))
            layout[mode].append(indices)
    # The score run's inputs and output live in an exclusive temporary directory (no
    # predictable name a planted link could redirect), removed even if the run fails.
    with tempfile.TemporaryDirectory(
        prefix=".%s.contrastive." % system.file_name, dir=out_dir
    ) as directory:
        paths = [os.path.join(directory, name) for name in ("input.src", "input.labels")]
        paths.append(os.path.join(directory, "input.tgt"))
        for i, path in enumerate(paths):
            write_lines(path, [key[i] for key in lines])
        scores_path = os.path.join(directory, "scores")
        system.runner.score(
            [paths[0], paths[1]] if system.reads_labels else paths[0],
            predictions_file=paths[2],
            checkpoint_path=system.checkpoint(),
            output_file=scores_path,
        )
        scored = read_lines(scores_path)
    if len(scored) != len(lines):
        raise UserError(
            "system %s: OpenNMT-tf scored %d targets of %d" % (system.name, len(scored), len(lines))
        )
    log_probs = []
    for number, (line, key) in enumerate(zip(scored, lines), start=1):
        score, sep, tokens = line.partition(" ||| ")
        if not sep or tokens != key[2]:
            raise UserError(
                "system %s: score %d is for %r, not %r" % (system.name, number, tokens, key[2])
            )
        log_probs.append(-float(score))  # OpenNMT-tf's score is the negative log-likelihood.
    for mode in modes:
        records = []
        for item, indices in zip(items, layout[mode]):
            values = [log_probs[i] for i in indices]
            if mode == "flipped":
                record = {"id": item["id"], "reference": values[0::2], "variants": values[1::2]}
            else:
                record = {"id": item["id"], "reference": values[0], "variants": values[1:]}
            records.append(json.dumps(record))
        write_lines_atomic(outputs[mode], records)


def _read_scores(path, items):
    records = [json.loads(line) for line in read_lines(path)]
    if [r["id"] for r in records] != [item["id"] for item in items]:
        raise UserError("%s: scores of other items (delete it to score again)" % path)
    return records


def _percent(hits, total):
    return 100.0 * hits / total if total else None


def summarize(items, records, domains, follow=False):
    """Per-domain results of one system and mode.

    Args:
      items: The items.
      records: Their scores (``{"reference", "variants"}`` per item; for ``flipped``, lists of
        the reference's score under each variant's label).
      domains: The domain order.
      follow: Whether to count pairs where a variant beats the reference (``flipped``, or the
        scores of a system that ignores labels) rather than items where the reference beats
        every variant.

    Returns:
      ``{"values": {domain|"all": percent}, "counts": {...}, "margin": {...}}``; ``margin`` is
      the mean log-probability of the reference minus that of its best variant (accuracy) or
      of each variant minus the reference (follow). Domains without items have ``None``.
    """
    hits = collections.Counter()
    totals = collections.Counter()
    margins = collections.defaultdict(float)
    words = collections.defaultdict(lambda: [0, 0])
    for item, record in zip(items, records):
        domain = item["domain"]
        references = record["reference"]
        if not isinstance(references, list):
            references = [references] * len(record["variants"])
        if follow:
            for reference, variant in zip(references, record["variants"]):
                for key in (domain, "all"):
                    totals[key] += 1
                    hits[key] += variant > reference
                    margins[key] += variant - reference
        else:
            right = all(reference > v for reference, v in zip(references, record["variants"]))
            margin = min(reference - v for reference, v in zip(references, record["variants"]))
            for key in (domain, "all"):
                totals[key] += 1
                hits[key] += right
                margins[key] += margin
            words[item["word"]][0] += right
            words[item["word"]][1] += 1
    keys = list(domains) + ["all"]
    result = {
        "values": {k: _percent(hits[k], totals[k]) for k in keys},
        "counts": {k: totals[k] for k in keys},
        "margin": {k: margins[k] / totals[k] if totals[k] else None for k in keys},
    }
    if not follow:
        result["words"] = {w: _percent(h, n) for w, (h, n) in sorted(words.items())}
    return result


def label_shift(items, oracle, flipped, domains):
    """How much the variant's label moves a system towards the variant, text length aside.

    For each (item, variant) pair, the shift is ``(v_f - r_f) - (v_o - r_o)``: the variant's
    log-probability minus the reference's under the variant's label (``flipped``), minus the
    same difference under the item's label (``oracle``). Both differences compare the same two
    texts, so whatever favours one text under any label (its length in tokens, rare words)
    cancels out; a system that ignores labels has a shift of 0.

    Args:
      items: The items.
      oracle: Their ``oracle`` scores.
      flipped: Their ``flipped`` scores.
      domains: The domain order.

    Returns:
      ``{"values": {domain|"all": % of pairs with a positive shift}, "counts": {...},
      "margin": {...: mean shift}}``.
    """
    hits = collections.Counter()
    totals = collections.Counter()
    shifts = collections.defaultdict(float)
    for item, o, f in zip(items, oracle, flipped):
        for v_o, r_f, v_f in zip(o["variants"], f["reference"], f["variants"]):
            shift = (v_f - r_f) - (v_o - o["reference"])
            for key in (item["domain"], "all"):
                totals[key] += 1
                hits[key] += shift > 0
                shifts[key] += shift
    keys = list(domains) + ["all"]
    return {
        "values": {k: _percent(hits[k], totals[k]) for k in keys},
        "counts": {k: totals[k] for k in keys},
        "margin": {k: shifts[k] / totals[k] if totals[k] else None for k in keys},
    }


def _scores_path(out_dir, name, mode):
    return os.path.join(out_dir, "%s.%s.contrastive.jsonl" % (name, mode))


def _stamp_path(out_dir, name):
    return os.path.join(out_dir, "%s.contrastive.stamp" % name)


def check_outputs(systems, out_dir):
    """Refuses, before any work, two systems of one name and a score file that this
    evaluation did not write.

    A system's score files (``NAME.MODE.contrastive.jsonl``) are the evaluation's only while
    its stamp (``NAME.contrastive.stamp``, written before the first of them) is next to them:
    they are removed when the stamp no longer matches. A file at such a path without a stamp
    would be lost.

    Raises:
      UserError: naming the system name given twice, or the file and the missing stamp.
    """
    evaluate_lib.check_system_names(systems, "systems")
    for system in systems:
        stamp_path = _stamp_path(out_dir, system.file_name)
        if os.path.lexists(stamp_path):
            continue
        for mode in MODES:
            path = _scores_path(out_dir, system.file_name, mode)
            if os.path.lexists(path):
                raise UserError(
                    "%s: a file ldr-eval contrastive did not write (no %s), where it would "
                    "write the scores of system %s: move it away or choose another output "
                    "directory" % (path, stamp_path, system.name)
                )


def evaluate(
    corpus_dir,
    systems,
    out_dir,
    items_path=None,
    modes=MODES,
    system_modes=None,
    cache_only=False,
):
    """Scores the contrastive items with each system and label mode.

    Writes ``contrastive.json``, ``contrastive.md`` (:func:`markdown_table`) and
    ``contrastive.png`` in :obj:`out_dir`, and the scores of each system and mode
    (``{name}.{mode}.contrastive.jsonl``, reused while the checkpoint and items are the same).

    Args:
      corpus_dir: The corpus the items come from (for its tokenizers and domains).
      systems: A list of :class:`~ldr_opennmt.evaluation.evaluate.System` (their ``modes``,
        for the BLEU evaluation, are not used here: see :obj:`system_modes`).
      out_dir: The output directory.
      items_path: The items file (default: built by :func:`build_items` into
        ``out_dir/items.jsonl``).
      modes: Label modes for systems that use domains (:data:`MODES`).
      system_modes: Optional ``{system name: modes}`` overriding :obj:`modes`.
      cache_only: Only score (what is not scored yet) and write no summary: a later
        evaluation of these systems and others reuses the scores. Runs of different
        systems may share :obj:`out_dir` side by side (with the same items file).

    Returns:
      The results dict (also written to ``contrastive.json``), or ``None`` with
      :obj:`cache_only`.

    Raises:
      UserError: on an unknown mode or system name, a malformed items file, a domain the
        corpus lacks, or a system without a trained model.
    """
    info = corpus_lib.load_info(corpus_dir)
    domains = info["domains"]
    check_outputs(systems, out_dir)
    os.makedirs(out_dir, exist_ok=True)
    system_modes = dict(system_modes or {})
    names = [system.name for system in systems]
    for name, chosen in [(None, modes)] + list(system_modes.items()):
        if name is not None and name not in names:
            raise UserError("contrastive modes given for %r, which is not a system" % name)
        unknown = [m for m in chosen if m not in MODES]
        if unknown or not chosen:
            raise UserError(
                "%sunknown contrastive label modes %s (known: %s)"
                % ("system %s: " % name if name else "", unknown or list(chosen), ", ".join(MODES))
            )
    for system in systems:
        for domain in system.config.get("data", {}).get("domains") or []:
            if domain not in domains:
                raise UserError(
                    "system %s declares domain %r but the corpus %s has no files for it "
                    "(its domains: %s)" % (system.name, domain, corpus_dir, ", ".join(domains))
                )
    if items_path is None:
        items_path = os.path.join(out_dir, ITEMS_FILE)
        build_items(corpus_dir, items_path)
    items = read_items(items_path, domains)
    digest = _digest(items_path)
    tokenizers_digest = "".join(
        _digest(os.path.join(corpus_dir, "bpe.%s" % info[key]))[:12]
        for key in ("source_lang", "target_lang")
    )
    tokenizers = (
        corpus_lib.load_tokenizer(corpus_dir, info["source_lang"]),
        corpus_lib.load_tokenizer(corpus_dir, info["target_lang"]),
    )

    rows = []
    for system in tqdm(systems, desc="scoring", unit="system", disable=None):
        uses_domains = system.uses_domains
        chosen = tuple(system_modes.get(system.name, modes)) if uses_domains else ("oracle",)
        outputs = {mode: _scores_path(out_dir, system.file_name, mode) for mode in chosen}
        checkpoint = system.checkpoint()
        stamp_path = _stamp_path(out_dir, system.file_name)
        # Scores are reused only for the same checkpoint, items and tokenizers.
        stamp = [checkpoint, "items %s" % digest, "tokenizers %s" % tokenizers_digest]
        previous = read_lines(stamp_path) if os.path.isfile(stamp_path) else None
        if previous != stamp:
            # Only under a stamp (check_outputs found no file without one); those of other
            # runs too: the new stamp will cover them.
            if os.path.lexists(stamp_path):
                for mode in MODES:
                    path = _scores_path(out_dir, system.file_name, mode)
                    if os.path.lexists(path):
                        os.remove(path)
            # Written before any score file, so that each is covered by the stamp of the
            # inputs it was computed from (a run killed after the scores used to leave them
            # under the previous stamp, valid again for those inputs).
            write_lines_atomic(stamp_path, stamp)
        missing = [mode for mode in chosen if not os.path.exists(outputs[mode])]
        if missing:
            _score_system(system, items, missing, domains, tokenizers, out_dir, outputs)
        if cache_only:
            continue
        scores = {}
        for mode in chosen:
            records = scores[mode] = _read_scores(outputs[mode], items)
            if mode == "flipped" or not uses_domains:
                # A system that ignores labels: its follow rate is the baseline.
                row = system.name if not uses_domains else "%s (flipped)" % system.name
                summary = summarize(items, records, domains, follow=True)
                rows.append(_row(system, row, mode, "follow", checkpoint, summary))
            if mode != "flipped":
                row = system.name if len(chosen) == 1 else "%s (%s)" % (system.name, mode)
                summary = summarize(items, records, domains)
                rows.append(_row(system, row, mode, "accuracy", checkpoint, summary))
        if "oracle" in scores and "flipped" in scores:
            summary = label_shift(items, scores["oracle"], scores["flipped"], domains)
            rows.append(_row(system, system.name, "flipped", "shift", checkpoint, summary))

    if cache_only:
        return None
    counts = collections.Counter(item["domain"] for item in items)
    pairs = collections.Counter()
    for item in items:
        pairs[item["domain"]] += len(item["variants"])
    results = {
        "items_file": items_path,
        "items_sha1": digest,
        "domains": domains,
        "items": {d: counts[d] for d in domains},
        "pairs": {d: pairs[d] for d in domains},
        "rows": rows,
    }
    write_lines_atomic(os.path.join(out_dir, RESULTS_FILE), [json.dumps(results, indent=2)])
    write_lines_atomic(os.path.join(out_dir, TABLE_FILE), [markdown_table(results)])
    bar_chart(results, os.path.join(out_dir, CHART_FILE))
    return results


def _row(system, row, mode, metric, checkpoint, summary):
    return dict(
        row=row,
        system=system.name,
        mode=mode,
        metric=metric,
        labels=system.uses_domains,
        checkpoint=checkpoint,
        **summary,
    )


def _cell(value):
    return "-" if value is None else "%.1f" % value


def _metric_rows(results, metric, keys, name):
    return [
        "| %s | %s |" % (name(row), " | ".join(_cell(row["values"][k]) for k in keys))
        for row in results["rows"]
        if row["metric"] == metric
    ]


def markdown_table(results):
    """The accuracy and follow tables of :func:`evaluate` results, in Markdown."""
    domains = results["domains"]
    keys = list(domains) + ["all"]
    header = [
        "| system | %s | all |" % " | ".join(domains),
        "|---|%s---:|" % ("---:|" * len(domains)),
    ]
    parts = [
        "### Accuracy: % of items where the reference scores above every variant",
        "",
    ]
    parts += header
    items = dict(results["items"], all=sum(results["items"].values()))
    parts.append("| *items* | %s |" % " | ".join(str(items[k]) for k in keys))
    parts += _metric_rows(results, "accuracy", keys, lambda row: row["row"])
    parts += [
        "",
        "### Following the label: % of (item, variant) pairs where the variant scores above the "
        "reference under the variant's domain label (flipped)",
        "",
    ]
    parts += header
    pairs = dict(results["pairs"], all=sum(results["pairs"].values()))
    parts.append("| *pairs* | %s |" % " | ".join(str(pairs[k]) for k in keys))
    parts += _metric_rows(
        results,
        "follow",
        keys,
        lambda row: row["row"] if row["labels"] else "%s (labels ignored)" % row["row"],
    )
    shift_rows = [row for row in results["rows"] if row["metric"] == "shift"]
    if shift_rows:
        parts += [
            "",
            "### Label effect: % of pairs where the variant's label, instead of the item's, "
            "raises the variant against the reference (mean change of the log-probability "
            "difference in parentheses)",
            "",
        ]
        parts += header
        parts.append("| *pairs* | %s |" % " | ".join(str(pairs[k]) for k in keys))
        for row in shift_rows:
            cells = [
                (
                    "-"
                    if row["values"][k] is None
                    else "%.1f (%+.2f)" % (row["values"][k], row["margin"][k])
                )
                for k in keys
            ]
            parts.append("| %s | %s |" % (row["row"], " | ".join(cells)))
    parts += [
        "",
        "Columns: the domain of the item (its source sentence and reference). A system that "
        "ignores labels is scored once: its follow rate (the pairs where it prefers the other "
        "domain's word anyway) is the baseline a flipped row compares with. Ties count as "
        "wrong. Items: %s (sha1 %s)." % (results["items_file"], results["items_sha1"][:12]),
    ]
    return "\n".join(parts)


def bar_chart(results, path):
    """Writes the accuracy, follow and label-effect rates per domain as a PNG (a panel each)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = list(results["domains"]) + ["all"]
    panels = [
        ("accuracy", "Reference above every variant (% items)"),
        ("follow", "Variant preferred under its label (% pairs)"),
    ]
    if any(row["metric"] == "shift" for row in results["rows"]):
        panels.append(("shift", "Variant raised by its label (% pairs)"))
    figure, axes = plt.subplots(
        len(panels), 1, figsize=(3 + 1.6 * len(keys), 3.2 * len(panels)), squeeze=False
    )
    axes = axes[:, 0]
    for axis, (metric, title) in zip(axes, panels):
        rows = [row for row in results["rows"] if row["metric"] == metric]
        width = 0.8 / max(1, len(rows))
        for i, row in enumerate(rows):
            values = [row["values"][k] for k in keys]
            xs = [k + i * width for k in range(len(keys))]
            bars = axis.bar(
                xs,
                [0.0 if v is None or math.isnan(v) else v for v in values],
                width,
                label=row["row"],
            )
            axis.bar_label(bars, fmt="%.0f", fontsize=6, padding=1)
        axis.set_xticks([k + width * (len(rows) - 1) / 2 for k in range(len(keys))])
        axis.set_xticklabels(keys)
        axis.set_ylim(0, 105)
        axis.set_ylabel("%")
        axis.set_title(title, fontsize=9)
        if rows:
            axis.legend(fontsize=6, ncol=2)
    figure.tight_layout()
    try:
        save_figure(figure, path, dpi=120, format="png")  # Atomically, PNG named explicitly.
    finally:
        plt.close(figure)
