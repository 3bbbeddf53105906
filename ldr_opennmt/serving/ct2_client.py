"""``ldr-translate`` on an ``ldr-export ctranslate2`` directory (one model per domain).

::

    ldr-translate --export export/ct2 --domain_file in.domain --input in.txt --output out.txt

Each input line goes to its label's CTranslate2 model (``export/ct2/medical``...), with the
tokenizers exported in that model's ``assets.extra/``. The checks and messages are those of
a SavedModel export (:mod:`ldr_opennmt.serving.savedmodel_translate`), from the same TensorFlow-free
modules (:mod:`~ldr_opennmt.serving.textio`, :mod:`~ldr_opennmt.serving.labels`,
:mod:`~ldr_opennmt.serving.tokenization`), so this runs in the serving runtime:
everything is checked before anything is translated; a label must be a declared domain or
``generic`` and have a model in the directory (an export of some domains only:
``ldr-export ctranslate2 --domains``);
ensemble labels are refused (the directory has no domain views to mix,
:data:`~ldr_opennmt.serving.ct2_models.ENSEMBLE_REFUSAL`); the labels of a model without
domain-specific parameters are translated as ``generic`` with one warning line.

Decoding is CTranslate2's with ``--beam_size`` (default 1: greedy) and
``--max_decoding_length`` (default 256), the defaults of ``ldr-serve``: the translations
equal the server's for the same lines and domains. ``--max_source_length`` cuts the
tokenized lines (no limit by default: CTranslate2 is told not to cut them either).
The models are loaded one at a time, the domains in the order of their first line, each
checked against the manifest's sha256 first.
"""

import sys

from tqdm import tqdm

from ldr_opennmt import domains as domains_lib
from ldr_opennmt.data import terms
from ldr_opennmt.errors import UserError
from ldr_opennmt.serving import ct2_models, labels, textio, tokenization


def stopped_warning(stopped, translated, limit):
    """The warning line about translations that reached ``--max_decoding_length``."""
    return (
        textio.WARNING + "%d of %d translations reached --max_decoding_length (%d): they may be "
        "cut short (raise --max_decoding_length)" % (stopped, translated, limit)
    )


def _routes(args, line_labels, label_source, paths, ignored):
    """The model of each line: its label's, or ``generic`` for a model that ignores labels.

    Raises:
      UserError: on a label without a model in the directory (first line named).
    """
    if ignored is not None:
        return [domains_lib.GENERIC] * len(line_labels)
    for number, label in enumerate(line_labels, start=1):
        if label not in paths:
            where = label_source if label_source == "--domain" else "%s:%d" % (label_source, number)
            raise UserError(
                "%s: domain %r has no model in %s (exported: %s; export it with "
                "ldr-export ctranslate2 --domains)" % (where, label, args.export, ", ".join(paths))
            )
    return list(line_labels)


def _glossary(args, export):
    """The entries of ``--glossary`` (``None`` without one).

    Raises:
      UserError: for a model not trained with terminology, tokenized input, or a bad file.
    """
    path = getattr(args, "glossary", None)
    if not path:
        return None
    if not export.manifest.get("terminology"):
        raise UserError(
            "--glossary: %s: this model was not trained to apply terminology (train it on a"
            " corpus of ldr-data terms, then export it again)" % args.export
        )
    if args.tokenized:
        raise UserError("--glossary: a glossary annotates raw text, not --tokenized input")
    return terms.read_glossary(path)


def run(args):
    """Translates as :obj:`args` says, with the CTranslate2 models of ``args.export``.

    Raises:
      UserError: on bad input, before any output.
    """
    textio.check_paths(args)
    textio.check_output(args.output)
    export = ct2_models.Export(args.export, where="--export")
    paths = export.paths
    ignored, refusal = (
        None if reason is None else "%s: %s" % (args.export, reason)
        for reason in (export.ignored, export.ensemble_refusal)
    )
    input_name = textio.STDIN if textio.is_stdin(args.input) else args.input
    lines = textio.read_text_lines(args.input)
    label_source = labels.label_source(args)
    line_labels = labels.read_labels(args, input_name, len(lines), export.declared, refusal)
    routes = _routes(args, line_labels, label_source, paths, ignored)
    textio.check_empty_lines(lines, input_name, args.keep_empty)
    used = list(dict.fromkeys(r for r, line in zip(routes, lines) if line.strip()))
    models = export.models(used, tokenized=args.tokenized, intra_threads=0, load=False)
    glossary = _glossary(args, export)

    def tokens(route, line):
        if not glossary:
            return models[route].tokenize(line)
        model = models[route]
        return terms.annotate(
            line,
            glossary,
            model.tokenize,
            lambda target: tokenization.tokenize(model.target_tokenizer, target),
        )[0]

    sentences = [tokens(route, line) if line.strip() else [] for route, line in zip(routes, lines)]
    labels.warn_ignored_labels(ignored, line_labels, label_source)
    source_tokens, long = textio.truncate_sentences(sentences, args.max_source_length)
    if long:
        print(
            textio.long_lines_warning(
                len(long),
                len(sentences),
                args.max_source_length,
                "--max_source_length",
                "%s:%d" % (input_name, long[0] + 1),
                len(sentences[long[0]]),
            ),
            file=sys.stderr,
        )
    beam_size = args.beam_size or ct2_models.BEAM_SIZE
    limit = args.max_decoding_length or ct2_models.MAX_DECODING_LENGTH
    outputs = [[] for _ in lines]
    stopped = translated = 0
    with tqdm(
        total=sum(1 for s in sentences if s),
        desc="translating",
        unit="sent",
        file=sys.stderr,
        disable=None if not textio.is_stdin(args.input) else True,
    ) as progress:
        for domain, model in models.items():
            indices = [i for i, route in enumerate(routes) if route == domain and sentences[i]]
            model.load()

            def _translate(tokens, _, model=model):
                return [
                    hypotheses[0]
                    for hypotheses, _ in model.translate(
                        tokens, beam_size=beam_size, max_decoding_length=limit
                    )
                ]

            results = textio.translate(
                _translate,
                [source_tokens[i] for i in indices],
                [domain] * len(indices),
                args.batch_size,
                progress,
            )
            model.unload()
            for i, tokens in zip(indices, results):
                outputs[i] = tokens
                translated += 1
                stopped += len(tokens) >= limit
    textio.write_output(
        args.output,
        [
            models[route].detokenize(tokens) if tokens else ""
            for route, tokens in zip(routes, outputs)
        ],
    )
    if stopped:
        print(stopped_warning(stopped, translated, limit), file=sys.stderr)
