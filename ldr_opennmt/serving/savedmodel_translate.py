"""``ldr-translate``: translates raw text with an exported multi-domain SavedModel.

::

    ldr-translate --export export/ldr --domain medical < in.txt > out.txt
    ldr-translate --export export/ldr --domain_file in.domain --input in.txt --output out.txt

The export is the directory written by ``onmt-main ... export`` (or ``ldr-main``). The
directory of ``ldr-export ctranslate2`` (one CTranslate2 model per domain, recognised by its
``manifest.json``) goes to :mod:`ldr_opennmt.serving.ct2_client` instead
(:func:`ldr_opennmt.cli.translate.run`), which translates it with the same checks (each
line with its domain's model) and without TensorFlow.
Each input line is tokenized with the source tokenizer exported with the model
(``assets.extra/``: the pyonmttok options and BPE model of ``source_tokenization``,
see :mod:`ldr_opennmt.assets`), translated by the ``serving_default``
signature in batches, and detokenized with the target tokenizer: the same text as
``onmt-main infer`` with that configuration. With ``--tokenized``, input and output
are space-separated tokens and no tokenizer is used.

Everything is checked before anything is translated: the export (a SavedModel with
its ``assets.extra/domains.txt``, which a complete export always has), the domain
labels against that domain list, the line counts, empty input lines and the tokenizer
assets; the output file's directory is checked writable first of all. An error is one
line (``ldr-translate: error: ...``, exit status 2); an output file is written to a
temporary file and renamed at the end, so a failed run leaves no output file.
Translations that stopped at the export's ``maximum_decoding_length`` (possibly cut
short) are counted in one warning line on standard error.

**Domain labels the model ignores**: see :mod:`ldr_opennmt.serving.labels`. The parts that
need no TensorFlow (reading inputs and labels, the label policy, the tokenizers) live in
:mod:`~ldr_opennmt.serving.textio`, :mod:`~ldr_opennmt.serving.labels` and
:mod:`~ldr_opennmt.serving.tokenization`, shared with the CTranslate2 path; this module is
the SavedModel's (TensorFlow).

**Long inputs.** An export whose ``assets.extra/inference.json`` has
``maximum_source_length`` truncates longer sources in its graph (a 20,000-token line
would otherwise take gigabytes). ldr-translate counts the input lines with more tokens
than that (or than ``--max_source_length``, which overrides it downwards), after
tokenization, in one warning line naming the first (``FILE:LINE``), and sends only
that many tokens of each. An export without the file has no limit of its own.

**Threads.** A :class:`SignatureRunner` may be called from several threads at once: every
call into a loaded SavedModel, and every load, holds one process-wide lock. Calls from
several threads into a SavedModel right after loading it were seen to corrupt
TensorFlow's state of the loaded functions (``free(): invalid next size``, the process
killed); the lock serialises them, so threads give no speed-up (each call already uses every core:
batch sentences instead). The lock is shared by all SignatureRunners because that state
belongs to TensorFlow's runtime, not to one model. Only the SignatureRunner's own methods
are safe: do not call the loaded SavedModel (or its signature) directly from several
threads. :func:`translate` is as safe as the translator it is given.
"""

import codecs
import os
import re
import sys
import threading

import tensorflow as tf
from google.protobuf import message as protobuf_message
from opennmt import constants
from tensorflow.core.protobuf import saved_model_pb2
from tqdm import tqdm

from ldr_opennmt import assets as assets_lib
from ldr_opennmt.errors import UserError
from ldr_opennmt.serving import labels, textio, tokenization

SIGNATURE = labels.SIGNATURE
# The names of the TensorFlow-free modules, kept here for the callers of this module.
STDIN = textio.STDIN
WARNING = textio.WARNING
INFERENCE_INFO = labels.INFERENCE_INFO
MAXIMUM_SOURCE_LENGTH = labels.MAXIMUM_SOURCE_LENGTH
IGNORED_DOMAIN_LABELS = labels.IGNORED_DOMAIN_LABELS
ENSEMBLE_REFUSAL = labels.ENSEMBLE_REFUSAL
read_inference_info = labels.read_inference_info
source_length_limit = labels.source_length_limit
label_policy = labels.label_policy
label_reasons = labels.label_reasons
truncate_sentences = textio.truncate_sentences
long_lines_warning = textio.long_lines_warning
translate = textio.translate
_tokenize = tokenization.tokenize
_detokenize = tokenization.detokenize

#: Held by every call into a loaded SavedModel and every load (see the module docstring).
_SAVED_MODEL_LOCK = threading.Lock()


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


def _check_decoding_options(args):
    """Refuses the decoding options of a CTranslate2 directory on a SavedModel export
    (its decoding is exported).

    Raises:
      UserError: if one is given.
    """
    for name in ("beam_size", "max_decoding_length"):
        if getattr(args, name, None) is not None:
            raise UserError(
                "--%s: only for an ldr-export ctranslate2 directory: the SavedModel %s decodes "
                "as it was exported (params: beam_width, maximum_decoding_length)"
                % (name, args.export)
            )


def serving_inputs(export_dir):
    """The input names of the export's ``serving_default`` signature, read from
    ``saved_model.pb`` without loading the model.

    Raises:
      UserError: if the SavedModel cannot be parsed or has no such signature.
    """
    path = os.path.join(export_dir, "saved_model.pb")
    saved_model = saved_model_pb2.SavedModel()
    try:
        with open(path, "rb") as saved_model_file:
            saved_model.ParseFromString(saved_model_file.read())
    except (OSError, protobuf_message.DecodeError) as e:
        raise UserError("%s: cannot read the SavedModel (%s)" % (path, e)) from None
    for meta_graph in saved_model.meta_graphs:
        if SIGNATURE in meta_graph.signature_def:
            return set(meta_graph.signature_def[SIGNATURE].inputs)
    raise UserError("%s: the SavedModel has no %s signature" % (export_dir, SIGNATURE))


def _assertion_message(error):
    """The message of a failed in-graph assertion (or the error's last line)."""
    match = re.search(r"assertion failed: \[(.*)\]", error.message)
    if match:
        # TensorFlow prints the string data C-escaped.
        return codecs.escape_decode(match.group(1))[0].decode("utf-8", "replace")
    lines = [line for line in error.message.splitlines() if line.strip()]
    return lines[-1] if lines else type(error).__name__


def _unknown_label_error(error, line_labels, label_source):
    """Names the file and line of an unknown label the model refused."""
    message = _assertion_message(error)
    match = re.match(r"(Unknown domain|Invalid ensemble) label '(.*)' \((.*)\)$", message)
    if match and match.group(2) in line_labels:
        line = line_labels.index(match.group(2)) + 1
        where = label_source if label_source == "--domain" else "%s:%d" % (label_source, line)
        return UserError(
            "%s: %s label %r (%s)" % (where, match.group(1).lower(), match.group(2), match.group(3))
        )
    return UserError(message)


class SignatureRunner:
    """Runs the ``serving_default`` signature of an export on token batches.

    It counts the translations that stopped at the export's maximum decoding length
    (:attr:`stopped`, out of :attr:`translated`; the limit in :attr:`limit`). It may be
    called from several threads: its calls into the SavedModel hold one process-wide
    lock (see the module docstring).
    """

    def __init__(self, export_dir, maximum_source_length=None):
        """Loads the export.

        Args:
          export_dir: The SavedModel directory.
          maximum_source_length: The number of tokens of a sentence that are sent
            (default: the export's ``maximum_source_length`` if it has one, see
            :func:`source_length_limit`).

        Raises:
          UserError: if the SavedModel has no ``serving_default`` signature, or
            :obj:`maximum_source_length` is above the export's.
        """
        self.maximum_source_length = source_length_limit(
            export_dir, read_inference_info(export_dir), maximum_source_length
        )
        with _SAVED_MODEL_LOCK:
            imported = tf.saved_model.load(export_dir)
            if SIGNATURE not in imported.signatures:
                raise UserError("%s: the SavedModel has no %s signature" % (export_dir, SIGNATURE))
            self._imported = imported  # Keeps the variables alive.
            self._signature = imported.signatures[SIGNATURE]
            self.takes_domain = "domain" in self._signature.structured_input_signature[1]
        self.translated = 0
        self.stopped = 0
        self.limit = None

    @property
    def num_hypotheses(self):
        """The hypotheses the export gives per sentence (its ``params: num_hypotheses``),
        or ``None`` if its signature does not say."""
        return self._signature.structured_outputs["tokens"].shape[1]

    def __call__(self, tokens, labels):
        """Translates a batch of token lists with their domain labels.

        Sentences longer than :attr:`maximum_source_length` are cut to it. The labels
        are not sent to a SavedModel that takes none (:attr:`takes_domain` is ``False``;
        see :func:`label_policy` for the checks ``ldr-translate`` makes first).

        Returns:
          The best hypothesis of each sentence, as a list of tokens.
        """
        return [hypotheses[0] for hypotheses, _ in self.translate_batch(tokens, labels)]

    def translate_batch(self, tokens, labels):
        """Translates a batch of token lists with their domain labels, as :meth:`__call__`.

        Returns:
          One ``(hypotheses, scores)`` per sentence: every hypothesis of the export, best
          first, as token lists, and their log-probabilities (empty if the export gives
          none).
        """
        tokens, _ = truncate_sentences(tokens, self.maximum_source_length)
        length = max(len(sentence) for sentence in tokens)
        inputs = dict(
            tokens=tf.constant(
                [s + [constants.PADDING_TOKEN] * (length - len(s)) for s in tokens], tf.string
            ),
            length=tf.constant([len(s) for s in tokens], tf.int32),
        )
        if self.takes_domain:
            inputs["domain"] = tf.constant(labels, tf.string)
        with _SAVED_MODEL_LOCK:
            outputs = self._signature(**inputs)
            hypotheses = outputs["tokens"].numpy()
            lengths = outputs["length"].numpy()
            scores = outputs["log_probs"].numpy() if "log_probs" in outputs else None
            self._count_stopped(lengths[:, 0], hypotheses.shape[-1])
        return [
            (
                [
                    [token.decode("utf-8") for token in hypothesis[:hypothesis_length]]
                    for hypothesis, hypothesis_length in zip(sentence, sentence_lengths)
                ],
                [] if scores is None else [float(score) for score in scores[i]],
            )
            for i, (sentence, sentence_lengths) in enumerate(zip(hypotheses, lengths))
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


def run(args):
    """Translates as :obj:`args` says with a SavedModel export (``ldr-translate``, which
    sends an ``ldr-export ctranslate2`` directory to :mod:`ldr_opennmt.serving.ct2_client`).

    Raises:
      UserError: on bad input, before any output.
    """
    textio.check_paths(args)
    _check_export(args.export)
    _check_decoding_options(args)
    textio.check_output(args.output)
    info = read_inference_info(args.export)
    limit = source_length_limit(args.export, info, args.max_source_length)
    input_name = textio.STDIN if textio.is_stdin(args.input) else args.input
    lines = textio.read_text_lines(args.input)
    _, domains = assets_lib.read_domains(args.export)
    ignored, ensemble_refusal = label_policy(
        args.export, domains, info, "domain" in serving_inputs(args.export)
    )
    label_source = labels.label_source(args)
    line_labels = labels.read_labels(args, input_name, len(lines), domains, ensemble_refusal)
    textio.check_empty_lines(lines, input_name, args.keep_empty)
    source_tokenizer, target_tokenizer = tokenization.load_tokenizers(args.export, args.tokenized)
    sentences = [_tokenize(source_tokenizer, line) for line in lines]
    labels.warn_ignored_labels(ignored, line_labels, label_source)
    source_tokens, long = truncate_sentences(sentences, limit)
    if long:
        print(
            long_lines_warning(
                len(long),
                len(sentences),
                limit,
                (
                    "--max_source_length"
                    if args.max_source_length is not None
                    else "the export's %s" % MAXIMUM_SOURCE_LENGTH
                ),
                "%s:%d" % (input_name, long[0] + 1),
                len(sentences[long[0]]),
            ),
            file=sys.stderr,
        )
    translator = SignatureRunner(args.export, maximum_source_length=limit)
    with tqdm(
        total=sum(1 for s in sentences if s),
        desc="translating",
        unit="sent",
        file=sys.stderr,
        disable=None if not textio.is_stdin(args.input) else True,
    ) as progress:
        try:
            outputs = translate(translator, source_tokens, line_labels, args.batch_size, progress)
        except tf.errors.InvalidArgumentError as e:
            # Labels are checked up front against domains.txt; a label file that the
            # model still refuses (a domains.txt edited by hand) is reported the same way.
            raise _unknown_label_error(e, line_labels, label_source) from e
    textio.write_output(
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
