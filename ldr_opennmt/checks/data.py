"""Generated parallel data for ``ldr-main check-family``: a few sentences per domain over
a small vocabulary, written as the files a data configuration names.

Each domain prefers its own words (its third of the vocabulary, mostly), and a target
is its source with every word mapped to a target word, so that a few training steps have
something to learn and a domain label says something about the words.
"""

import os
import random

from ldr_opennmt.utils import write_lines_atomic

#: The declared domains of the checks (two: one present in a batch, one absent).
DOMAINS = ("d0", "d1")
#: OpenNMT-tf's special tokens, first in a vocabulary file.
SPECIAL_TOKENS = ("<blank>", "<s>", "</s>")
VOCABULARY_SIZE = 18


def source_words():
    return ["s%02d" % i for i in range(VOCABULARY_SIZE)]


def target_words():
    return ["t%02d" % i for i in range(VOCABULARY_SIZE)]


def make_pairs(domain_id, count, seed=0):
    """``count`` (source, target) sentence pairs of domain :obj:`domain_id`."""
    rng = random.Random("%d-%d" % (seed, domain_id))
    sources, targets = source_words(), target_words()
    third = VOCABULARY_SIZE // 3
    own = list(range(domain_id * third, (domain_id + 1) * third))
    pairs = []
    for _ in range(count):
        length = rng.randint(2, 5)
        ids = [rng.choice(own) if rng.random() < 0.7 else rng.randrange(VOCABULARY_SIZE)
               for _ in range(length)]  # fmt: skip
        # The target word of a source word depends on the domain: label information.
        shift = domain_id * 5
        pairs.append(
            (
                " ".join(sources[i] for i in ids),
                " ".join(targets[(i + shift) % VOCABULARY_SIZE] for i in ids),
            )
        )
    return pairs


def write_corpus(directory, count=8, extra_target_tokens=()):
    """Writes a training corpus of both domains and the vocabularies.

    Args:
      directory: Where to write (created).
      count: Sentence pairs per domain.
      extra_target_tokens: Tokens appended to the target vocabulary (a family whose
        targets start with a domain token).

    Returns:
      ``{"src", "tgt", "domain", "d0_src", ..., "src_vocab", "tgt_vocab"}``: paths.
    """
    os.makedirs(directory, exist_ok=True)
    paths = {}
    everything = {"src": [], "tgt": [], "domain": []}
    for domain_id, domain in enumerate(DOMAINS):
        pairs = make_pairs(domain_id, count)
        everything["src"] += [source for source, _ in pairs]
        everything["tgt"] += [target for _, target in pairs]
        everything["domain"] += [domain] * len(pairs)
    for name, lines in everything.items():
        paths[name] = os.path.join(directory, "train.%s" % name)
        write_lines_atomic(paths[name], lines)
    paths["src_vocab"] = os.path.join(directory, "src.vocab")
    paths["tgt_vocab"] = os.path.join(directory, "tgt.vocab")
    write_lines_atomic(paths["src_vocab"], list(SPECIAL_TOKENS) + source_words())
    write_lines_atomic(
        paths["tgt_vocab"], list(SPECIAL_TOKENS) + target_words() + list(extra_target_tokens)
    )
    return paths


def data_config(paths):
    """The ``data`` section of a configuration over :func:`write_corpus`'s files."""
    return {
        "domains": list(DOMAINS),
        "source_vocabulary": paths["src_vocab"],
        "target_vocabulary": paths["tgt_vocab"],
        "train_features_file": [paths["src"], paths["domain"]],
        "train_labels_file": paths["tgt"],
    }
