"""``ldr-translate``: translates raw text with an exported multi-domain SavedModel.

::

    ldr-translate --export export/ldr --domain medical < in.txt > out.txt
    ldr-translate --export export/ldr --domain_file in.domain --input in.txt --output out.txt

The export is the directory written by ``onmt-main ... export`` (or ``ldr-main``), or
the directory of ``ldr-export ctranslate2`` (one CTranslate2 model per domain, recognised by
its ``manifest.json``), which :mod:`ldr_opennmt.serving.ct2_client` translates with the same
checks (each line with its domain's model).
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

**Domain labels the model ignores.** Some exports translate without reading the label:
a SavedModel whose ``serving_default`` signature has no ``domain`` input (families that
use labels for training only: domain mixing, ML, AdvL), an export that declares no
domains (an empty ``domains.txt``: a Mixed model trained without them), or one whose
``assets.extra/inference.json`` says so (``ignored_domain_labels``: a Mixed model,
which has no domain-specific parameters). An ensemble label is then refused (one line
naming the file and line, or ``--domain``): it asks for a mixture of domain views the
model does not have. A plain label other than ``generic`` is translated the same as
``generic``, with one warning line (see :func:`label_policy` for why).

**Long inputs.** An export whose ``assets.extra/inference.json`` has
``maximum_source_length`` truncates longer sources in its graph (a 20,000-token line
would otherwise take gigabytes). The client counts the input lines with more tokens
than that (or than ``--max_source_length``, which overrides it downwards), after
tokenization, in one warning line naming the first (``FILE:LINE``), and sends only
that many tokens of each. An export without the file has no limit of its own.

**Threads.** A :class:`Translator` may be called from several threads at once: every
call into a loaded SavedModel, and every load, holds one process-wide lock. Calls from
several threads into a SavedModel right after loading it were seen to corrupt
TensorFlow's state of the loaded functions (``free(): invalid next size``, the process
killed); the lock serialises them, so threads give no speed-up (each call already uses every core:
batch sentences instead). The lock is shared by all Translators because that state
belongs to TensorFlow's runtime, not to one model. Only the Translator's own methods
are safe: do not call the loaded SavedModel (or its signature) directly from several
threads. :func:`translate` is as safe as the translator it is given.
"""

import codecs
import json
import os
import re
import sys
import tempfile
import threading

import tensorflow as tf
from google.protobuf import message as protobuf_message
from opennmt import constants
from tensorflow.core.protobuf import saved_model_pb2
from tqdm import tqdm

from ldr_opennmt import assets as assets_lib
from ldr_opennmt import domains as domains_lib
from ldr_opennmt import ensembles
from ldr_opennmt.errors import UserError
from ldr_opennmt.serving import ct2_export
from ldr_opennmt.utils import decode_lines, read_lines, write_lines_atomic

STDIN = "<stdin>"
WARNING = "ldr-translate: warning: "
SIGNATURE = "serving_default"

#: ``assets.extra/inference.json``: what the client needs to know about the exported
#: model beyond its signature. Optional (exports made before it have none); a JSON
#: object whose keys are all optional:
#:
#: * ``maximum_source_length``: the number of source tokens the SavedModel keeps
#:   (an integer >= 1; longer sources are truncated in its graph);
#: * ``ignored_domain_labels``: why the model's translation does not depend on the
#:   domain label (a string), or ``null``;
#: * ``ensemble_refusal``: why the model translates no ensemble of domain views (a
#:   string), or ``null``.
INFERENCE_INFO = assets_lib.INFERENCE
MAXIMUM_SOURCE_LENGTH = "maximum_source_length"
IGNORED_DOMAIN_LABELS = "ignored_domain_labels"
ENSEMBLE_REFUSAL = "ensemble_refusal"

#: Held by every call into a loaded SavedModel and every load (see the module docstring).
_SAVED_MODEL_LOCK = threading.Lock()


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


def _check_output(path):
    """Refuses an output file that could not be written, before any work.

    Raises:
      UserError: if its directory is missing or not writable, or it is a directory.
    """
    if path is None:
        return
    if os.path.isdir(path):
        raise UserError("--output: %s is a directory" % path)
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise UserError("--output: directory %s not found" % directory)
    # Tried the way the output is written (a temporary file in that directory), not asked
    # with os.access(): root passes os.access() on a read-only directory, and a read-only
    # file system or an ACL shows only when trying.
    try:
        fd, probe = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", dir=directory)
    except OSError as e:
        raise UserError(
            "--output: cannot write to directory %s (%s)" % (directory, e.strerror or e)
        ) from None
    os.close(fd)
    os.remove(probe)


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


def read_inference_info(export_dir):
    """Reads ``assets.extra/inference.json`` of an export (see :data:`INFERENCE_INFO`).

    Returns:
      The JSON object as a dictionary (empty when the export has no such file; keys
      this client does not know are ignored).

    Raises:
      UserError: if the file is not a JSON object or a known key has a bad value.
    """
    path = os.path.join(assets_lib.assets_dir(export_dir), INFERENCE_INFO)
    if not os.path.isfile(path):
        return {}
    try:
        with open(path, encoding="utf-8") as info_file:
            info = json.load(info_file)
    except (ValueError, UnicodeDecodeError) as e:
        raise UserError("%s: not valid JSON (%s)" % (path, e)) from None
    if not isinstance(info, dict):
        raise UserError("%s: expected a JSON object, got %s" % (path, json.dumps(info)[:80]))
    limit = info.get(MAXIMUM_SOURCE_LENGTH)
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise UserError(
            "%s: %s must be an integer >= 1, got %s"
            % (path, MAXIMUM_SOURCE_LENGTH, json.dumps(limit))
        )
    for key in (IGNORED_DOMAIN_LABELS, ENSEMBLE_REFUSAL):
        if info.get(key) is not None and not isinstance(info[key], str):
            raise UserError(
                "%s: %s must be a string or null, got %s" % (path, key, json.dumps(info[key]))
            )
    return info


def source_length_limit(export_dir, info, requested=None):
    """The number of source tokens translated per sentence, or ``None`` for no limit.

    Args:
      export_dir: The export (for messages).
      info: Its :func:`read_inference_info`.
      requested: ``--max_source_length``, or ``None``.

    Raises:
      UserError: if :obj:`requested` is below 1, or above the export's own limit (its
        SavedModel truncates there whatever the client sends).
    """
    exported = info.get(MAXIMUM_SOURCE_LENGTH)
    if requested is None:
        return exported
    if requested < 1:
        raise UserError("--max_source_length must be >= 1, got %d" % requested)
    if exported is not None and requested > exported:
        raise UserError(
            "--max_source_length: %d is above the export's %s (%d, in %s), where its SavedModel "
            "truncates every source: export the model again with a larger params: %s"
            % (
                requested,
                MAXIMUM_SOURCE_LENGTH,
                exported,
                os.path.join(assets_lib.assets_dir(export_dir), INFERENCE_INFO),
                MAXIMUM_SOURCE_LENGTH,
            )
        )
    return requested


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


def label_policy(export_dir, domains, info, takes_domain):
    """Whether the export's model reads domain labels, and ensembles of them.

    Decided from what the export says: its signature (no ``domain`` input: labels are
    for training only), then ``inference.json`` (``ignored_domain_labels``, which covers
    a model without domain-specific parameters, whose graph reads labels but no layer
    uses them), or for an export without that key, its domain list (none declared:
    every label reads as ``generic``).

    An ensemble label on a model that ignores labels, or cannot mix its domain views, is
    refused: it asks for a mixture the model cannot make, and translating it as one view
    would be silently wrong. A plain label on a model that ignores labels is translated
    (as ``generic``) with a warning, not refused: that is the documented behaviour of
    these families (``onmt-main infer`` checks the label file and ignores it, the Mixed
    baseline is "trained on all domains, the domain labels are ignored"), and an
    evaluation runs the same label files through every system, the baselines included.

    Args:
      export_dir: The export.
      domains: Its declared domains (:func:`ldr_opennmt.assets.read_domains`).
      info: Its :func:`read_inference_info`.
      takes_domain: Whether its signature has a ``domain`` input.

    Returns:
      ``(ignored, ensemble_refusal)``: why the labels are ignored and why ensemble labels
      are refused, each ``None`` when they are not, each prefixed with :obj:`export_dir`
      (:func:`label_reasons` without it).
    """
    return tuple(
        None if reason is None else "%s: %s" % (export_dir, reason)
        for reason in label_reasons(domains, info, takes_domain)
    )


def label_reasons(domains, info, takes_domain):
    """:func:`label_policy`'s reasons, without the export's name (``ldr-serve`` gives them
    in its answers)."""
    if not takes_domain:
        ignored = (
            "the model reads no domain label to translate (its %s signature has no domain "
            "input)" % SIGNATURE
        )
    elif IGNORED_DOMAIN_LABELS in info:  # The model's own word (null: labels are read).
        ignored = info[IGNORED_DOMAIN_LABELS] or None
    elif domains is None:  # An export made before the model said it.
        ignored = "the model declares no domains (empty %s/%s): every label reads as %s" % (
            assets_lib.ASSETS_EXTRA,
            assets_lib.DOMAINS,
            domains_lib.GENERIC,
        )
    else:
        ignored = None
    refusal = (info.get(ENSEMBLE_REFUSAL) or None) if ignored is None else ignored
    return ignored, refusal


def _read_labels(args, input_name, num_lines, domains, ensemble_refusal=None):
    """One domain label per input line, validated against the declared domains."""
    if args.domain is not None:
        label = args.domain.strip()
        if not _ensemble_label(domains, ensemble_refusal)(label, "--domain"):
            domains_lib.label_id(label, domains, "--domain")
        return [label] * num_lines
    if not os.path.isfile(args.domain_file):
        raise UserError("%s: domain label file not found" % args.domain_file)
    domains_lib.read_label_file(
        args.domain_file,
        domains,
        expected_lines=num_lines,
        source_path=input_name,
        ensemble=_ensemble_label(domains, ensemble_refusal),
    )
    return [label.strip() for label in _read_text_lines(args.domain_file)]


def _ensemble_label(domains, refusal=None):
    """Checks ensemble labels as far as the export allows: refused with :obj:`refusal`
    (see :func:`label_policy`); otherwise the weights of ``ens-learned`` and whether the
    model has domain views are the SavedModel's to check."""

    def _read(label, where):
        if not ensembles.is_ensemble_label(label):
            return False
        if refusal:
            raise UserError("%s: ensemble label %r: %s" % (where, label, refusal))
        if domains and label.strip(domains_lib.ASCII_SPACE) != ensembles.ENS_LEARNED:
            ensembles.parse_label(label, domains, where=where)
        return True

    return _read


def _warn_ignored_labels(ignored, labels, label_source):
    """One warning line when a label other than ``generic`` goes to a model that
    ignores labels (:func:`label_policy`)."""
    if ignored is None:
        return
    named = [label for label in labels if label != domains_lib.GENERIC]
    if not named:
        return
    others = len(set(named)) - 1
    if label_source != "--domain":
        first = [label != domains_lib.GENERIC for label in labels].index(True)
        label_source = "%s:%d" % (label_source, first + 1)
    print(
        WARNING
        + "%s: domain label %r%s ignored, translated as %s: %s"
        % (
            label_source,
            named[0],
            " (and %d other%s)" % (others, "s" if others > 1 else "") if others else "",
            domains_lib.GENERIC,
            ignored,
        ),
        file=sys.stderr,
    )


def truncate_sentences(sentences, limit):
    """Cuts token lists to :obj:`limit` tokens.

    Returns:
      ``(sentences, long)``: the cut token lists and the indices of the lines that were
      longer (no limit, ``None``: unchanged, none).
    """
    if limit is None:
        return sentences, []
    long = [i for i, tokens in enumerate(sentences) if len(tokens) > limit]
    return [tokens[:limit] for tokens in sentences], long


def long_lines_warning(count, total, limit, limit_source, first, first_length):
    """The warning line about the input lines longer than the source length limit.

    Args:
      count: The number of long lines.
      total: The number of input lines.
      limit: The limit, in tokens.
      limit_source: Where the limit comes from (``--max_source_length``...).
      first: The first long line, as ``FILE:LINE``.
      first_length: Its number of tokens.
    """
    return WARNING + (
        "%d of %d input lines have more than %d tokens (%s), the first at %s (%d tokens): "
        "only their first %d tokens are translated"
        % (count, total, limit, limit_source, first, first_length, limit)
    )


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

    An ``ldr-export ctranslate2`` directory (with its ``manifest.json``) is translated by
    :mod:`ldr_opennmt.serving.ct2_client`, a SavedModel here.

    Raises:
      UserError: on bad input, before any output.
    """
    if ct2_export.is_export(args.export):
        from ldr_opennmt.serving import ct2_client  # pylint: disable=import-outside-toplevel

        return ct2_client.run(args)
    _check_export(args.export)
    _check_decoding_options(args)
    _check_output(args.output)
    info = read_inference_info(args.export)
    limit = source_length_limit(args.export, info, args.max_source_length)
    input_name = args.input or STDIN
    lines = _read_text_lines(args.input)
    _, domains = assets_lib.read_domains(args.export)
    ignored, ensemble_refusal = label_policy(
        args.export, domains, info, "domain" in serving_inputs(args.export)
    )
    label_source = "--domain" if args.domain is not None else args.domain_file
    labels = _read_labels(args, input_name, len(lines), domains, ensemble_refusal)
    _check_empty_lines(lines, input_name, args.keep_empty)
    source_tokenizer, target_tokenizer = _load_tokenizers(args.export, args.tokenized)
    sentences = [_tokenize(source_tokenizer, line) for line in lines]
    _warn_ignored_labels(ignored, labels, label_source)
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
    translator = Translator(args.export, maximum_source_length=limit)
    with tqdm(
        total=sum(1 for s in sentences if s),
        desc="translating",
        unit="sent",
        file=sys.stderr,
        disable=None if args.input else True,
    ) as progress:
        try:
            outputs = translate(translator, source_tokens, labels, args.batch_size, progress)
        except tf.errors.InvalidArgumentError as e:
            # Labels are checked up front against domains.txt; a label file that the
            # model still refuses (a domains.txt edited by hand) is reported the same way.
            raise _unknown_label_error(e, labels, label_source) from e
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
