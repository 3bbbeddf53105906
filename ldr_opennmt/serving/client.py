"""``ldr-translate``: translates raw text with an exported multi-domain SavedModel.

::

    ldr-translate --export export/ldr --domain medical < in.txt > out.txt
    ldr-translate --export export/ldr --domain_file in.domain --input in.txt --output out.txt

The export is the directory written by ``onmt-main ... export`` (or ``ldr-main``).
Each input line is tokenized with the source tokenizer exported with the model
(``assets.extra/``: the pyonmttok options and BPE model of ``source_tokenization``,
see :mod:`ldr_opennmt.assets`), translated by the ``serving_default``
signature in batches, and detokenized with the target tokenizer: the same text as
``onmt-main infer`` with that configuration. With ``--tokenized``, input and output
are space-separated tokens and no tokenizer is used.

Everything is checked before anything is translated: the export (a SavedModel with
its ``assets.extra/domains.txt``, which a complete export always has), the domain
labels against that domain list, the line counts, empty input lines and the tokenizer
assets. An error is one line (``ldr-translate: error: ...``, exit status 2); an output
file is written to a temporary file and renamed at the end, so a failed run leaves no
output file. Translations that stopped at the export's ``maximum_decoding_length``
(possibly cut short) are counted in one warning line on standard error.
"""

import codecs
import os
import re
import sys

import tensorflow as tf
from opennmt import constants
from tqdm import tqdm

from ldr_opennmt import assets as assets_lib
from ldr_opennmt import domains as domains_lib
from ldr_opennmt import ensembles
from ldr_opennmt.errors import UserError
from ldr_opennmt.utils import decode_lines, read_lines, write_lines_atomic

STDIN = "<stdin>"


def _read_text_lines(path):
    """The lines of a UTF-8 file (or stdin), split on ``\\n`` only, as a TextLineDataset."""
    if path is None:
        return decode_lines(sys.stdin.buffer.read(), STDIN)
    if not os.path.isfile(path):
        raise UserError("%s: input file not found" % path)
    return read_lines(path)


def _check_export(export_dir):
    if not os.path.isdir(export_dir):
        raise UserError("%s: export directory not found" % export_dir)
    if not os.path.isfile(os.path.join(export_dir, "saved_model.pb")):
        raise UserError(
            "%s: not a SavedModel directory (no saved_model.pb; export one with "
            "onmt-main --config ... export --output_dir %s)" % (export_dir, export_dir)
        )
    # OpenNMT-tf writes assets.extra/ after the SavedModel, and domains.txt last: without
    # it the export was interrupted (or made before the domain list was recorded), and
    # its tokenizers cannot be trusted either.
    if not os.path.isfile(os.path.join(assets_lib.assets_dir(export_dir), assets_lib.DOMAINS)):
        raise UserError(
            "%s: incomplete export (no %s/%s: interrupted, or made by an older version): "
            "export the model again" % (export_dir, assets_lib.ASSETS_EXTRA, assets_lib.DOMAINS)
        )


def _read_labels(args, input_name, num_lines, domains):
    """One domain label per input line, validated against the declared domains."""
    if args.domain is not None:
        label = args.domain.strip()
        if not _ensemble_label(domains)(label, "--domain"):
            domains_lib.label_id(label, domains, "--domain")
        return [label] * num_lines
    if not os.path.isfile(args.domain_file):
        raise UserError("%s: domain label file not found" % args.domain_file)
    domains_lib.read_label_file(
        args.domain_file,
        domains,
        expected_lines=num_lines,
        source_path=input_name,
        ensemble=_ensemble_label(domains),
    )
    return [label.strip() for label in _read_text_lines(args.domain_file)]


def _ensemble_label(domains):
    """Checks ensemble labels as far as the export's domain list allows: the weights of
    ``ens-learned`` and whether the model has domain views are the SavedModel's to check."""

    def _read(label, where):
        if not ensembles.is_ensemble_label(label):
            return False
        if domains and label.strip(domains_lib.ASCII_SPACE) != ensembles.ENS_LEARNED:
            ensembles.parse_label(label, domains, where=where)
        return True

    return _read


def _check_empty_lines(lines, input_name, keep_empty):
    for line_number, line in enumerate(lines, start=1):
        if not line.strip() and not keep_empty:
            raise UserError(
                "%s:%d: empty input line (pass --keep_empty to write an empty translation)"
                % (input_name, line_number)
            )


def _load_tokenizers(export_dir, tokenized):
    """(source, target) tokenizers, or ``None`` where tokens are joined by spaces."""
    if tokenized:
        return None, None
    source = assets_lib.load_tokenizer(export_dir, "source")
    if source is None:
        raise UserError(
            "%s: missing tokenizer asset: the export has no source tokenizer (export a model "
            "whose configuration has source_tokenization, or pass --tokenized with tokenized "
            "input)"
            % os.path.join(
                assets_lib.assets_dir(export_dir), assets_lib.TOKENIZER_CONFIGS["source"]
            )
        )
    # Without target_tokenization, onmt-main infer also joins the tokens with spaces.
    return source, assets_lib.load_tokenizer(export_dir, "target")


def _tokenize(tokenizer, line):
    if tokenizer is None:
        return line.split()
    tokens, _ = tokenizer.tokenize(line, training=False)
    return tokens


def _detokenize(tokenizer, tokens):
    if tokenizer is None:
        return " ".join(tokens)
    return tokenizer.detokenize(tokens)


def _assertion_message(error):
    """The message of a failed in-graph assertion (or the error's last line)."""
    match = re.search(r"assertion failed: \[(.*)\]", error.message)
    if match:
        # TensorFlow prints the string data C-escaped.
        return codecs.escape_decode(match.group(1))[0].decode("utf-8", "replace")
    lines = [line for line in error.message.splitlines() if line.strip()]
    return lines[-1] if lines else type(error).__name__


def _unknown_label_error(error, labels, label_source):
    """Names the file and line of an unknown label the model refused."""
    message = _assertion_message(error)
    match = re.match(r"(Unknown domain|Invalid ensemble) label '(.*)' \((.*)\)$", message)
    if match and match.group(2) in labels:
        line = labels.index(match.group(2)) + 1
        where = label_source if label_source == "--domain" else "%s:%d" % (label_source, line)
        return UserError(
            "%s: %s label %r (%s)" % (where, match.group(1).lower(), match.group(2), match.group(3))
        )
    return UserError(message)


class Translator:
    """Runs the ``serving_default`` signature of an export on token batches.

    It counts the translations that stopped at the export's maximum decoding length
    (:attr:`stopped`, out of :attr:`translated`; the limit in :attr:`limit`).
    """

    def __init__(self, export_dir):
        imported = tf.saved_model.load(export_dir)
        if "serving_default" not in imported.signatures:
            raise UserError("%s: the SavedModel has no serving_default signature" % export_dir)
        self._imported = imported  # Keeps the variables alive.
        self._signature = imported.signatures["serving_default"]
        self.translated = 0
        self.stopped = 0
        self.limit = None

    def __call__(self, tokens, labels):
        """Translates a batch of token lists with their domain labels.

        Returns:
          The best hypothesis of each sentence, as a list of tokens.
        """
        length = max(len(sentence) for sentence in tokens)
        inputs = dict(
            tokens=tf.constant(
                [s + [constants.PADDING_TOKEN] * (length - len(s)) for s in tokens], tf.string
            ),
            length=tf.constant([len(s) for s in tokens], tf.int32),
        )
        if "domain" in self._signature.structured_input_signature[1]:
            inputs["domain"] = tf.constant(labels, tf.string)
        outputs = self._signature(**inputs)
        hypotheses = outputs["tokens"].numpy()[:, 0]
        lengths = outputs["length"].numpy()[:, 0]
        self._count_stopped(lengths, hypotheses.shape[-1])
        return [
            [token.decode("utf-8") for token in hypothesis[:hypothesis_length]]
            for hypothesis, hypothesis_length in zip(hypotheses, lengths)
        ]

    def _count_stopped(self, lengths, steps):
        """Counts the hypotheses that the decoding length limit stopped.

        The export does not record its ``maximum_decoding_length``, and need not: beam
        search runs until every hypothesis has produced the end token or the limit is
        reached, and the output ``tokens`` has one position per step, the end token's
        included, while ``length`` excludes it. So a hypothesis as long as the output
        (:obj:`steps`) never ended: decoding stopped at the limit, which is then
        :obj:`steps`. This holds for every export, whatever its params said.
        """
        self.translated += len(lengths)
        stopped = int((lengths >= steps).sum())
        if stopped:
            self.stopped += stopped
            self.limit = steps


def translate(translator, sentences, labels, batch_size, progress=None):
    """Translates token lists in batches of similar lengths, in input order.

    Args:
      translator: A callable ``(token lists, labels) -> token lists``.
      sentences: The token list of each sentence (empty lists are skipped and
        translated as empty lists).
      labels: The domain label of each sentence.
      batch_size: The number of sentences per batch.
      progress: An optional ``tqdm`` progress bar, advanced by sentence.

    Returns:
      The translated token list of each sentence.
    """
    results = [[] for _ in sentences]
    order = sorted((i for i, s in enumerate(sentences) if s), key=lambda i: len(sentences[i]))
    for start in range(0, len(order), batch_size):
        batch = order[start : start + batch_size]
        outputs = translator([sentences[i] for i in batch], [labels[i] for i in batch])
        for i, output in zip(batch, outputs):
            results[i] = output
        if progress is not None:
            progress.update(len(batch))
    return results


def _write_output(path, lines):
    """Writes to stdout, or to a temporary file next to :obj:`path` renamed at the end."""
    if path is None:
        sys.stdout.buffer.write("".join(line + "\n" for line in lines).encode("utf-8"))
        sys.stdout.flush()
        return
    write_lines_atomic(path, lines)


def run(args):
    """Translates as :obj:`args` says (see :func:`main`).

    Raises:
      UserError, UserError, UserError: on bad input, before any output.
    """
    _check_export(args.export)
    if args.output is not None:
        directory = os.path.dirname(os.path.abspath(args.output))
        if not os.path.isdir(directory):
            raise UserError("--output: directory %s not found" % directory)
    input_name = args.input or STDIN
    lines = _read_text_lines(args.input)
    _, domains = assets_lib.read_domains(args.export)
    labels = _read_labels(args, input_name, len(lines), domains)
    _check_empty_lines(lines, input_name, args.keep_empty)
    source_tokenizer, target_tokenizer = _load_tokenizers(args.export, args.tokenized)
    sentences = [_tokenize(source_tokenizer, line) for line in lines]
    translator = Translator(args.export)
    with tqdm(
        total=sum(1 for s in sentences if s),
        desc="translating",
        unit="sent",
        file=sys.stderr,
        disable=None if args.input else True,
    ) as progress:
        try:
            outputs = translate(translator, sentences, labels, args.batch_size, progress)
        except tf.errors.InvalidArgumentError as e:
            # Labels are checked up front against domains.txt; a label file that the
            # model still refuses (a domains.txt edited by hand) is reported the same way.
            raise _unknown_label_error(
                e, labels, "--domain" if args.domain is not None else args.domain_file
            ) from e
    _write_output(
        args.output,
        [_detokenize(target_tokenizer, tokens) if tokens else "" for tokens in outputs],
    )
    if translator.stopped:
        print(
            stopped_warning(translator.stopped, translator.translated, translator.limit),
            file=sys.stderr,
        )


def stopped_warning(stopped, translated, limit):
    """The warning line about translations that stopped at the decoding length limit."""
    return (
        "ldr-translate: warning: %d of %d translations stopped at maximum_decoding_length "
        "(%d): they may be cut short (export the model again with a larger params: "
        "maximum_decoding_length)" % (stopped, translated, limit)
    )
