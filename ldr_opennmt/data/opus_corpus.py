"""OPUS Moses zips as a corpus (``ldr-data build opus``): the ``opus_sources:`` block of a
configuration, and the build that reads every zip (checked by its sha256, UTF-8, bounded)
before :func:`ldr_opennmt.data.corpus.build` writes anything. It lived in
:mod:`ldr_opennmt.data.corpus`.
"""

import collections
import os

import yaml
from tqdm import tqdm

from ldr_opennmt.data import corpus, sources
from ldr_opennmt.errors import UserError, not_utf8_error

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
        corpus.check_domain_name(domain, "%s: opus_sources" % path)
        where = "%s: opus_sources: %s" % (path, domain)
        if isinstance(entry, str) and entry:
            zips[domain] = opus_source(entry)
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
        zips[domain] = opus_source(locations[0], sha256)
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
    log=corpus._stderr,
    max_member_mb=sources.MAX_MEMBER_MB,
    max_member_lines=sources.MAX_MEMBER_LINES,
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
      max_member_mb: The most megabytes a member of a zip may expand to.
      max_member_lines: The most lines a member of a zip may hold (both bounds refuse a
        zip bomb before it is read whole, see :func:`ldr_opennmt.data.sources.zip_member_lines`).

    The paper's defaults: 1000 dev and test sentences per domain, 30k BPE merges.

    A corpus built in :obj:`out` from the same inputs (the domains in order, the sha256
    of each zip's content, the corpus version and the options: the stamp in ``DONE``)
    is reused; any other is rebuilt.
    """
    corpus.check_sizes(
        dev_size=dev_size,
        test_size=test_size,
        bpe_merges=bpe_merges,
        max_member_mb=max_member_mb,
        max_member_lines=max_member_lines,
    )
    for domain in zips:
        corpus.check_domain_name(domain, "ldr-data")
    corpus.check_inputs_outside(
        [
            ("--corpus %s" % domain, source if isinstance(source, str) else source["location"])
            for domain, source in zips.items()
            if "://" not in (source if isinstance(source, str) else source["location"])
        ],
        out,
    )
    root = corpus._output_root(out, log)
    # Every zip is fetched (URLs, through the cache) and hashed first: the stamp holds
    # the sha256 of what the corpus is made of, not the zips' names.
    local = collections.OrderedDict()
    for domain, source in zips.items():
        if isinstance(source, str):
            source = opus_source(source)
        path, digest = sources.opus_zip(
            source["location"], cache_dir=cache_dir, sha256=source.get("sha256"), log=log
        )
        local[domain] = (source["location"], path, digest)
    base = {
        "corpus": "opus",
        "domains": [[domain, digest] for domain, (_, _, digest) in local.items()],
    }
    options = (dev_size, test_size, bpe_merges, corpus.VOCAB_SIZE, source_lang, target_lang)
    info = corpus._up_to_date(root, corpus._stamp_inputs(base, *options), log)
    if info is not None:
        return info
    domain_pairs = collections.OrderedDict()
    for domain, (location, path, _) in tqdm(
        local.items(), desc="reading", unit="corpus", disable=None
    ):
        domain_pairs[domain] = sources.moses_zip_pairs(
            path,
            source_lang=source_lang,
            target_lang=target_lang,
            max_bytes=max_member_mb << 20,
            max_lines=max_member_lines,
        )
        log("[data] %s: %d raw pairs from %s" % (domain, len(domain_pairs[domain]), location))
    return corpus.build(
        domain_pairs,
        root,
        dev_size=dev_size,
        test_size=test_size,
        bpe_merges=bpe_merges,
        source_lang=source_lang,
        target_lang=target_lang,
        log=log,
        inputs=base,
    )
