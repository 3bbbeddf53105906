"""Where a system's domain knowledge sits on a test set: in its domain-specific parameters or in
the context of the sentence (the findings of ``docs/tables.md``).

BLEU and the contrastive test (:mod:`ldr_opennmt.evaluation.contrastive`) say whether a label
changes a translation; these measures say why it may not:

* :func:`region_shares`: how far an LDR model's domain region moves the fused embedding of
  the words of a test set, relative to the generic embedding (``|M_k e_k(v)| /
  |M_g e_g(v) + b|``, eq. 2 of the LDR paper): a region that moves no word cannot change
  a translation;
* :func:`item_proportions`: the word-level domain proportions of a domain-mixing model on the
  contrastive items, at the ambiguous word itself (the source word, and the target positions
  that predict its translation) and at the other words of the sentence (its context): whether
  the mixing picks the item's domain where the choice is made.

The words are found in the tokenized sentences by :func:`word_positions` (pyonmttok's joiner
annotation: a token ending or starting with the joiner belongs to the same word as its
neighbour).
"""

import collections
import re

import numpy as np

from ldr_opennmt.domains import GENERIC_ID
from ldr_opennmt.layers.mixing import SOURCE, TARGET
from ldr_opennmt.utils import read_lines

#: pyonmttok's default joiner (``joiner_annotate: true``).
JOINER = "\uffed"

#: A run of letters (the contrastive lexicon's words).
_WORD = re.compile(r"[^\W\d_]+")


def _same(word):
    return word


#: Proportions of one record (layer) on the items: the positions of the ambiguous word and of
#: the other words, how many of each have their largest proportion on the item's domain, and
#: the mean proportion of the item's domain at each.
ItemLayer = collections.namedtuple(
    "ItemLayer",
    ["label", "side", "word", "word_correct", "word_mean", "other", "other_correct", "other_mean"],
)


def token_words(tokens):
    """The words of a tokenized sentence: ``[(text, [positions])]``, in order.

    Tokens joined by the joiner (``Deli￭ very``, ``(￭ O``) form one word; the joiner is
    removed from its text. Special tokens (``<s>``) are words of their own.

    Args:
      tokens: The tokens (strings).
    """
    groups = []
    join_next = False
    for position, token in enumerate(tokens):
        starts_joined = token.startswith(JOINER)
        if groups and (join_next or starts_joined):
            groups[-1][1].append(position)
            groups[-1][0].append(token)
        else:
            groups.append(([token], [position]))
        join_next = token.endswith(JOINER) and len(token) > 1
    return [("".join(parts).replace(JOINER, ""), positions) for parts, positions in groups]


def word_positions(tokens, word, key=_same):
    """The positions of the tokens of every occurrence of :obj:`word` in a tokenized sentence.

    A word matches when one of its runs of letters, lowercased, has the same :obj:`key` as
    :obj:`word` (the contrastive lexicon's ``english_key`` folds the English plural,
    ``french_key`` the French ``s``/``x``; the caller passes them: this module does not
    import the evaluation's).

    Args:
      tokens: The tokens of the sentence.
      word: The word (any case).
      key: The folding of both sides (default: none).

    Returns:
      The sorted positions (empty when the word does not occur).
    """
    wanted = key(word.lower())
    found = []
    for text, positions in token_words(tokens):
        if any(key(part) == wanted for part in _WORD.findall(text.lower())):
            found.extend(positions)
    return sorted(found)


def region_shares(embedder, sentences, domain_ids):
    """How far each domain region of an LDR embedder moves the words of some sentences.

    For a word ``v`` of a sentence of domain ``k``: ``|M_k e_k(v)| / |M_g e_g(v) + b|``, the
    norm of what the domain region adds to the fused embedding against the norm of the
    generic one (:meth:`ldr_opennmt.layers.LDREmbedder.fused_table`, without dropout),
    averaged over the token occurrences of the sentences of that domain. Tokens outside the
    vocabulary are left out.

    Args:
      embedder: A built :class:`ldr_opennmt.layers.LDREmbedder` with its trained weights.
      sentences: The tokenized sentences (lists of strings).
      domain_ids: The domain id of each sentence (negative: left out).

    Returns:
      ``{domain id: (mean ratio, token count)}`` for the domains with tokens.
    """
    index = {token: i for i, token in enumerate(read_lines(embedder.vocabulary_file))}
    generic = embedder.fused_table(GENERIC_ID).numpy()
    generic_norms = np.linalg.norm(generic, axis=-1)
    ids_by_domain = collections.defaultdict(list)
    for tokens, domain in zip(sentences, domain_ids):
        if domain >= 0:
            ids_by_domain[int(domain)].extend(index[t] for t in tokens if t in index)
    shares = {}
    for domain, ids in sorted(ids_by_domain.items()):
        if not ids:
            continue
        ids = np.asarray(ids)
        region = embedder.fused_table(domain).numpy()[ids] - generic[ids]
        ratios = np.linalg.norm(region, axis=-1) / np.maximum(generic_norms[ids], 1e-12)
        shares[domain] = (float(np.mean(ratios)), int(len(ids)))
    return shares


def item_positions(result, items, source_key=_same, target_key=_same):
    """Per item, its ambiguous word's positions on each side of a proportions result.

    Args:
      result: A :class:`ldr_opennmt.analysis.proportions.Proportions` computed on the items'
        tokenized sources (and references, for :data:`TARGET`), one sentence per item, in
        order.
      items: The items (``word``: the English word; ``translation``: its translation in the
        item's domain).
      source_key: The folding of source words (:func:`word_positions`).
      target_key: The folding of target words.

    Returns:
      ``{side: [positions of item i]}``: the source positions of the word, and the target
      positions that predict its translation's tokens (the decoder input before each).
    """
    positions = {SOURCE: [], TARGET: []}
    for i, item in enumerate(items):
        positions[SOURCE].append(word_positions(result.tokens[SOURCE][i], item["word"], source_key))
        if TARGET in result.tokens:
            found = word_positions(result.tokens[TARGET][i], item["translation"], target_key)
            positions[TARGET].append([p - 1 for p in found if p >= 1])
    return positions


def item_proportions(result, items, source_key=_same, target_key=_same):
    """The proportions of each mixed layer at the ambiguous word and at the other words.

    Args:
      result: As :func:`item_positions`, computed with the items' domain labels.
      items: The items, in the order of the result's sentences.
      source_key: The folding of source words (:func:`word_positions`).
      target_key: The folding of target words.

    Returns:
      An :class:`ItemLayer` per layer of the result (items whose word was not found on a
      side count for no position of that side).
    """
    positions = item_positions(result, items, source_key, target_key)
    summary = []
    for layer in result.layers:
        word, other = [], []
        for i, proportions in enumerate(layer.sentences):
            domain = int(result.domain_ids[i])
            if domain < 0 or i >= len(positions.get(layer.side, [])):
                continue
            chosen = [p for p in positions[layer.side][i] if p < len(proportions)]
            if not chosen:
                continue
            mask = np.zeros([len(proportions)], bool)
            mask[chosen] = True
            for selected, out in ((mask, word), (~mask, other)):
                rows = proportions[selected]
                out.extend((bool(row.argmax() == domain), float(row[domain])) for row in rows)
        summary.append(
            ItemLayer(
                layer.label,
                layer.side,
                len(word),
                int(sum(hit for hit, _ in word)),
                float(np.mean([p for _, p in word])) if word else float("nan"),
                len(other),
                int(sum(hit for hit, _ in other)),
                float(np.mean([p for _, p in other])) if other else float("nan"),
            )
        )
    return summary
