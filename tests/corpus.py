"""A tiny synthetic multi-domain corpus written by the tests themselves.

The same source word translates differently per domain (cross-domain polysemy),
so a model can only translate it right if it uses the domain label.
"""

import os
import random

DOMAINS = ["medical", "religious", "software"]

# source word -> translation per domain
_POLYSEMOUS = {
    "cell": {"medical": "cellule", "religious": "cachot", "software": "case"},
    "host": {"medical": "hote", "religious": "hostie", "software": "serveur"},
    "spirit": {"medical": "alcool", "religious": "esprit", "software": "esprit"},
}
_SHARED = {
    "the": "le",
    "a": "un",
    "big": "grand",
    "small": "petit",
    "red": "rouge",
    "is": "est",
    "here": "ici",
    "now": "maintenant",
}


def make_pairs(domain, count, seed):
    """Returns ``count`` (source, target) token-string pairs for ``domain``."""
    rng = random.Random("%s-%d" % (domain, seed))
    pairs = []
    shared = sorted(_SHARED)
    for _ in range(count):
        words = [rng.choice(shared) for _ in range(rng.randint(1, 3))]
        words.insert(rng.randint(0, len(words)), rng.choice(sorted(_POLYSEMOUS)))
        source = " ".join(words)
        target = " ".join(_POLYSEMOUS[w][domain] if w in _POLYSEMOUS else _SHARED[w] for w in words)
        pairs.append((source, target))
    return pairs


def write_lines(path, lines):
    """Writes lines to a UTF-8 file; returns :obj:`path`."""
    with open(path, "w", encoding="utf-8") as f:
        for line in lines:
            f.write(line + "\n")
    return path


def read_lines(path):
    """The lines of a UTF-8 file."""
    with open(path, encoding="utf-8") as f:
        return f.read().splitlines()


def write_vocab(path, lines):
    tokens = sorted({t for line in lines for t in line.split()})
    write_lines(path, ["<blank>", "<s>", "</s>"] + tokens)


def write_corpus(directory, count=40, seed=0, domains=DOMAINS):
    """Writes train/test files for all domains and returns a dict of paths."""
    os.makedirs(directory, exist_ok=True)
    paths = {}
    splits = {"train": count, "test": max(2, count // 10)}
    for split, size in splits.items():
        sources, targets, labels = [], [], []
        for domain in domains:
            for source, target in make_pairs(domain, size, seed + (split == "test")):
                sources.append(source)
                targets.append(target)
                labels.append(domain)
        for name, lines in (("src", sources), ("tgt", targets), ("domain", labels)):
            path = os.path.join(directory, "%s.%s" % (split, name))
            write_lines(path, lines)
            paths["%s_%s" % (split, name)] = path
    sources = [line for d in domains for line, _ in make_pairs(d, count, seed)]
    targets = [line for d in domains for _, line in make_pairs(d, count, seed)]
    paths["src_vocab"] = os.path.join(directory, "src.vocab")
    paths["tgt_vocab"] = os.path.join(directory, "tgt.vocab")
    write_vocab(paths["src_vocab"], sources)
    write_vocab(paths["tgt_vocab"], targets)
    return paths


def data_config(paths, domains=DOMAINS):
    """Returns the ``data`` section of an OpenNMT-tf configuration."""
    return {
        "domains": list(domains),
        "source_vocabulary": paths["src_vocab"],
        "target_vocabulary": paths["tgt_vocab"],
        "train_features_file": [paths["train_src"], paths["train_domain"]],
        "train_labels_file": paths["train_tgt"],
    }


def write_domain_corpora(directory, sizes, seed=0, split="train"):
    """Writes one (source, target) file pair per domain; returns {domain: [src, tgt]}."""
    os.makedirs(directory, exist_ok=True)
    corpora = {}
    for domain, size in sizes.items():
        pairs = make_pairs(domain, size, seed)
        paths = [os.path.join(directory, "%s.%s.%s" % (split, domain, s)) for s in ("src", "tgt")]
        write_lines(paths[0], [source for source, _ in pairs])
        write_lines(paths[1], [target for _, target in pairs])
        corpora[domain] = paths
    return corpora
