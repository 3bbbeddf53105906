"""Terminology given at translation time: source terms annotated inline with their target term
(Dinu et al., ACL 2019, "Training Neural Machine Translation to Apply Terminology
Constraints"), so that any family learns to copy a glossary's translation into its output.

A term of a sentence is marked in its source tokens::

    malignant ｟term｠ neo￭ plasm ｟trans｠ tu￭ meur ｟/term｠ of the stomach

the source term tokenized by the source tokenizer, its translation by the *target* tokenizer
(the model copies the very tokens it must write), the markers being pyonmttok placeholders
that no tokenizer splits. The same function (:func:`annotate`) annotates the training corpus
(``ldr-data terms``, :func:`build_terms_corpus`: a fraction of the training sentences, with the
dominant translations of each domain found in its training data, some of them held out) and
the sentences ``ldr-serve`` receives with a glossary. Nothing here needs TensorFlow: the
serving runtime imports :func:`annotate` and :func:`check_glossary`. The annotation is input
text, so it survives CTranslate2 folding: every family that folds applies it when served.
"""

import collections
import hashlib
import json
import os
import random
import re
import shutil

from ldr_opennmt.errors import UserError

START, TRANSLATION, END = "｟term｠", "｟trans｠", "｟/term｠"
#: The markers a model trained with terminology has in its source vocabulary.
MARKERS = (START, TRANSLATION, END)
#: At most this many entries in one glossary.
MAX_ENTRIES = 1000
_WORD = re.compile(r"[^\W\d_]+")


def check_glossary(entries, where="glossary"):
    """A glossary as ``[(source, target)]``, checked.

    Args:
      entries: ``{source: target}`` or ``[(source, target)]``.
      where: How messages name it.

    Raises:
      UserError: one line naming the entry: not a string, empty, a line break or a tab, a
        marker, or more than :data:`MAX_ENTRIES` entries.
    """
    items = list(entries.items()) if isinstance(entries, dict) else list(entries)
    if len(items) > MAX_ENTRIES:
        raise UserError("%s: %d entries, at most %d" % (where, len(items), MAX_ENTRIES))
    checked = []
    for source, target in items:
        for side, text in (("source", source), ("target", target)):
            if not isinstance(text, str) or not text.strip():
                raise UserError(
                    "%s: %r: the %s term must be a non-empty string" % (where, source, side)
                )
            if any(c in text for c in "\t\n\r") or any(m in text for m in ("｟", "｠")):
                raise UserError(
                    "%s: %r: a tab, a line break or a ｟｠ placeholder in the %s term"
                    % (where, source, side)
                )
        checked.append((source.strip(), target.strip()))
    return checked


def read_glossary(path):
    """The ``SOURCE<tab>TARGET`` lines of a glossary file (blank lines and ``#`` comments
    skipped).

    Raises:
      UserError: ``FILE:LINE: ...`` on a line without exactly one tab, or a bad term.
    """
    entries = []
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise UserError("%s: cannot read the glossary (%s)" % (path, e)) from None
    for number, line in enumerate(lines, 1):
        if not line.strip() or line.startswith("#"):
            continue
        fields = line.split("\t")
        if len(fields) != 2:
            raise UserError(
                "%s:%d: expected SOURCE<tab>TARGET, got %d field(s): %r"
                % (path, number, len(fields), line[:80])
            )
        entries += check_glossary([fields], "%s:%d" % (path, number))
    return entries


def find_terms(text, glossary):
    """Where the glossary's source terms occur in :obj:`text`: ``[(start, end, target)]``,
    case-insensitive whole words, the longest term first where two overlap, left to right."""
    if not glossary:
        return []
    targets = {}
    for source, target in glossary:
        targets.setdefault(source.lower(), target)
    pattern = re.compile(
        r"(?<!\w)(%s)(?!\w)"
        % "|".join(re.escape(s) for s in sorted(targets, key=len, reverse=True)),
        re.IGNORECASE,
    )
    return [(m.start(), m.end(), targets[m.group(1).lower()]) for m in pattern.finditer(text)]


def annotate(text, glossary, tokenize_source, tokenize_target):
    """The source tokens of :obj:`text` with the glossary's terms annotated.

    Args:
      text: A raw sentence.
      glossary: ``[(source, target)]`` (:func:`check_glossary`).
      tokenize_source: Raw text -> source tokens.
      tokenize_target: Raw text -> target tokens.

    Returns:
      ``(tokens, applied)``: the tokens, and the ``(source as found, target)`` annotated.
    """
    tokens, applied, position = [], [], 0
    for start, end, target in find_terms(text, glossary):
        if text[position:start].strip():
            tokens += tokenize_source(text[position:start])
        tokens += [START] + tokenize_source(text[start:end]) + [TRANSLATION]
        tokens += tokenize_target(target) + [END]
        applied.append((text[start:end], target))
        position = end
    if text[position:].strip() or not tokens:
        tokens += tokenize_source(text[position:])
    return tokens, applied


def pair_glossary(source, target, terms, key):
    """The glossary of one training (or test) pair: each word of :obj:`source` that is a term
    (``key(word)`` in :obj:`terms`) and whose translation (its singular or plural form) is a
    word of :obj:`target`, with that form.

    Args:
      source, target: The raw pair.
      terms: ``{english key: (singular, plural)}``.
      key: The English word's key (the lexicon's ``english_key``).
    """
    found = {word.lower() for word in _WORD.findall(target)}
    glossary, seen = [], set()
    for word in _WORD.findall(source):
        forms = terms.get(key(word))
        if forms is None or word.lower() in seen:
            continue
        form = next((f for f in forms if f.lower() in found), None)
        if form is not None:
            glossary.append((word, form))
            seen.add(word.lower())
    return glossary


def held_out(word, share):
    """Whether a term is held out (never annotated in training): a fixed share of the terms,
    by the hash of the word (the same split on every machine)."""
    digest = hashlib.sha256(word.encode("utf-8")).digest()
    return int.from_bytes(digest[:4], "big") / 2**32 < share


def build_terms_corpus(corpus_dir, out, terms, key, rate=0.1, heldout=0.2, seed=1234, log=print):
    """Writes a copy of a corpus built by ``ldr-data`` whose training sources have terms
    annotated (``ldr-data terms``).

    A share :obj:`rate` of each domain's training pairs (drawn with :obj:`seed`) get every
    term of :func:`pair_glossary` annotated, with the terms not :func:`held_out`; the source
    vocabulary gets the markers and the target subwords the annotations bring. Dev and test
    sets are copied as they are (a glossary is given at translation time). ``terms/`` holds
    each domain's training and held-out terms (``KEY<tab>SINGULAR<tab>PLURAL``).

    Args:
      corpus_dir: The corpus (its ``raw/`` text, tokenizers and ``corpus.json``).
      out: The new corpus directory (must not exist).
      terms: ``{domain: {english key: (singular, plural)}}``.
      key: The English word's key.
      rate: The share of training pairs annotated.
      heldout: The share of terms held out.
      seed: The sampling seed.
      log: A callable taking a progress line.

    Returns:
      The new ``corpus.json`` as a dict.
    """
    from ldr_opennmt.data import corpus as corpus_lib  # pylint: disable=import-outside-toplevel
    from ldr_opennmt.utils import atomic_directory  # pylint: disable=import-outside-toplevel

    info = corpus_lib.load_info(corpus_dir)
    source, target = info["source_lang"], info["target_lang"]
    if os.path.exists(out):
        raise UserError("%s already exists: give a new directory for the annotated corpus" % out)
    tokenizers = {lang: corpus_lib.load_tokenizer(corpus_dir, lang) for lang in (source, target)}

    def tokenize(lang):
        return lambda text: tokenizers[lang].tokenize(text)[0]

    summary = collections.OrderedDict()
    new_tokens = collections.Counter()
    with atomic_directory(out) as partial:
        for name in sorted(os.listdir(corpus_dir)):
            path = os.path.join(corpus_dir, name)
            if os.path.isfile(path) and name not in (corpus_lib.DONE_FILE, "corpus.json"):
                shutil.copyfile(path, os.path.join(partial, name))
        shutil.copytree(os.path.join(corpus_dir, "raw"), os.path.join(partial, "raw"))
        os.makedirs(os.path.join(partial, "terms"))
        vocabulary = read_lines(os.path.join(corpus_dir, "vocab.%s" % source))
        known = set(vocabulary)
        combined = []
        for domain in info["domains"]:
            rng = random.Random("%d-%s" % (seed, domain))
            kept = {w: f for w, f in terms.get(domain, {}).items() if not held_out(w, heldout)}
            _write_terms(partial, domain, terms.get(domain, {}), heldout)
            sources = read_lines(os.path.join(corpus_dir, "raw", "train.%s.%s" % (domain, source)))
            targets = read_lines(os.path.join(corpus_dir, "raw", "train.%s.%s" % (domain, target)))
            tokenized = read_lines(os.path.join(corpus_dir, "train.%s.%s" % (domain, source)))
            if not len(sources) == len(targets) == len(tokenized):
                raise UserError(
                    "%s: raw/train.%s.* and train.%s.%s differ in length: rebuild the corpus"
                    % (corpus_dir, domain, domain, source)
                )
            annotated = 0
            for i, (src, tgt) in enumerate(zip(sources, targets)):
                if rng.random() >= rate:
                    continue
                glossary = pair_glossary(src, tgt, kept, key)
                if not glossary:
                    continue
                tokens, _ = annotate(src, glossary, tokenize(source), tokenize(target))
                tokenized[i] = " ".join(tokens)
                new_tokens.update(t for t in tokens if t not in known)
                annotated += 1
            _write_lines(os.path.join(partial, "train.%s.%s" % (domain, source)), tokenized)
            combined += tokenized
            summary[domain] = {
                "annotated": annotated,
                "pairs": len(sources),
                "terms": len(kept),
                "held_out": len(terms.get(domain, {})) - len(kept),
            }
            log(
                "[terms] %s: %d of %d training pairs annotated, %d terms (%d held out)"
                % (domain, annotated, len(sources), len(kept), summary[domain]["held_out"])
            )
        _write_lines(os.path.join(partial, "train.%s" % source), combined)
        added = [m for m in MARKERS if m not in known]
        added += [t for t, _ in new_tokens.most_common() if t not in MARKERS]
        _write_lines(os.path.join(partial, "vocab.%s" % source), vocabulary + added)
        info = dict(info)
        info["terminology"] = {
            "from": os.path.abspath(corpus_dir),
            "rate": rate,
            "heldout": heldout,
            "seed": seed,
            "markers": list(MARKERS),
            "domains": summary,
            "vocabulary_added": len(added),
        }
        with open(os.path.join(partial, "corpus.json"), "w", encoding="utf-8") as f:
            json.dump(info, f, indent=2, ensure_ascii=False)
        with open(os.path.join(partial, ".ldr-data"), "w", encoding="utf-8") as f:
            f.write("Written by ldr-data terms.\n")
        with open(os.path.join(partial, corpus_lib.DONE_FILE), "w", encoding="utf-8") as f:
            json.dump({"terminology": info["terminology"]}, f)
    return info


def read_terms(corpus_dir, domain, which):
    """``{english key: (singular, plural)}`` of ``terms/DOMAIN.WHICH.tsv`` (``train`` or
    ``heldout``) of a corpus built by ``ldr-data terms``."""
    path = os.path.join(corpus_dir, "terms", "%s.%s.tsv" % (domain, which))
    terms = collections.OrderedDict()
    for line in read_lines(path):
        word, singular, plural = line.split("\t")
        terms[word] = (singular, plural)
    return terms


def _write_terms(directory, domain, terms, heldout):
    for which, keep in (("train", False), ("heldout", True)):
        lines = [
            "%s\t%s\t%s" % (word, forms[0], forms[1])
            for word, forms in terms.items()
            if held_out(word, heldout) == keep
        ]
        _write_lines(os.path.join(directory, "terms", "%s.%s.tsv" % (domain, which)), lines)


def read_lines(path):
    try:
        with open(path, encoding="utf-8") as f:
            return f.read().splitlines()
    except OSError as e:
        raise UserError("%s: cannot read it (%s)" % (path, e.strerror or e)) from None


def _write_lines(path, lines):
    with open(path, "w", encoding="utf-8") as f:
        f.write("".join(line + "\n" for line in lines))
