"""The lexicon of the contrastive test: the English words whose dominant French translation
depends on the domain, found in the raw training data of each domain (:func:`find_translations`).

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
"""

import collections
import os
import re
import unicodedata

from ldr_opennmt.errors import UserError
from ldr_opennmt.utils import read_lines

#: The seed words shipped with the package.
DEFAULT_SEED_WORDS = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "contrastive_words.txt"
)

_WORD = re.compile(r"[^\W\d_]+")

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


def dominant_translations(pairs, min_count=4, min_dice=0.3, min_share=0.5, min_shared=3):
    """Every English content word of one domain's raw training pairs that has a dominant
    French translation there (the same criteria as :func:`find_translations`, without the
    contrast between domains): the terms of ``ldr-data terms``.

    Args:
      pairs: ``[(english, french), ...]`` of raw text.
      min_count: Pairs the word needs.
      min_dice, min_share, min_shared: As :func:`find_translations`.

    Returns:
      ``{english key: Sense}``, sorted by word.
    """
    counts = _DomainCounts(pairs)
    found = collections.OrderedDict()
    for word in sorted(w for w, n in counts.en.items() if n >= min_count):
        sense = _dominant(counts, word, min_dice, min_share, min_shared)
        if sense is not None:
            found[word] = sense
    return found


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
