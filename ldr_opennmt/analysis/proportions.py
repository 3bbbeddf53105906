"""Word-level domain proportions of a domain-mixing model (Jiang et al., ACL 2020, section 5).

The domain proportions ``D_l(x)`` of every mixed layer ``l`` and every word ``x``
(:meth:`~ldr_opennmt.models.mixing.MixingTransformer.compute_proportions`) of a test
set, and three views of them:

* :func:`plot_sentence`: the proportions of one sentence's words at every layer, the
  paper's Figure 7 (one heatmap per side and per domain: x the words, y the layers,
  bottom to top);
* :func:`plot_histograms`: the distribution over all words of each domain's proportion
  at each layer, the paper's Figure 9 (with labels, also of the proportion given to the
  word's sentence domain);
* :func:`markdown_report`: per layer, the mean proportion of each domain and, with
  labels, how often the largest proportion is the sentence's domain.

The files are read and tokenized by the model's own inputters, as ``onmt-main``
reads them (the configured ``source_tokenization``/``target_tokenization``; tokenized
files with the default space tokenizer). The time axis of a record indexes the
model's positions: the source tokens for encoder layers (and ``decoder/layer_i/memory``,
the decoder's proportions of the encoder output), and for decoder layers the decoder
inputs, ``<s>`` followed by the target tokens (the positions ``L_mix`` covers).
Padding positions are never counted.
"""

import collections
import os
import re

import numpy as np
import tensorflow as tf
from opennmt import constants

from ldr_opennmt import domains as domains_lib
from ldr_opennmt.errors import UserError
from ldr_opennmt.inputters import constant_label, constant_label_name
from ldr_opennmt.layers.mixing import SOURCE, TARGET
from ldr_opennmt.models.mixing import MixingTransformer
from ldr_opennmt.reports import markdown_table, pyplot
from ldr_opennmt.training.runner import Runner
from ldr_opennmt.utils import save_figure, write_lines_atomic

#: The proportions of one mixed layer: its record ``label`` and ``side``, and
#: ``sentences``, one float32 array ``[positions, k]`` per sentence (no padding).
Layer = collections.namedtuple("Layer", ["label", "side", "sentences"])

#: The proportions of a test set.
#:
#: * ``domains``: the model's domain names (the proportions' last axis);
#: * ``epsilon``: the smoothing of the proportions;
#: * ``layers``: a :class:`Layer` per record, in the model's order (encoder first);
#: * ``tokens``: a dict mapping :data:`SOURCE` (and :data:`TARGET` with a target file)
#:   to the positions of each sentence (lists of strings);
#: * ``domain_ids``: the sentence domain ids (int ``[sentences]``, ``-1`` for generic
#:   or unlabelled sentences);
#: * ``labelled``: whether domain labels were given.
Proportions = collections.namedtuple(
    "Proportions", ["domains", "epsilon", "layers", "tokens", "domain_ids", "labelled"]
)

#: Per-layer summary: the number of positions, the mean proportion of each domain
#: (``[k]``), and the argmax hits and count over the words of labelled sentences.
LayerStatistics = collections.namedtuple(
    "LayerStatistics", ["label", "side", "words", "mean", "correct", "labelled"]
)

SENTENCE_PLOT = "sentence_%d.png"
HISTOGRAM_PLOT = "histograms.png"
REPORT = "proportions.md"

_LABEL = re.compile(r"^(?P<stack>\w+)/layer_(?P<index>\d+)(?P<memory>/memory)?$")


def check_model(model, where=None):
    """Checks that :obj:`model` is a :class:`~ldr_opennmt.models.mixing.MixingTransformer`.

    Args:
      model: The model.
      where: The model directory, for the message.

    Raises:
      UserError: otherwise.
    """
    if not isinstance(model, MixingTransformer):
        raise UserError(
            "ldr-analyze proportions needs a domain-mixing model (models.mixing_transformer, "
            "a MixingTransformer), got a %s%s"
            % (type(model).__name__, " in %s" % where if where else "")
        )


def load_model(config_paths, checkpoint_path=None, model_dir=None):
    """A trained mixing model with its checkpoint's weights.

    Args:
      config_paths: The run configuration files.
      checkpoint_path: A checkpoint or a directory (default: the latest of ``model_dir``).
      model_dir: Overrides the configuration's ``model_dir``.

    Returns:
      (the runner, the model, the checkpoint path).

    Raises:
      UserError: on a configuration or checkpoint error, or a model that does not mix
        domains (refused before its checkpoint is read).
    """
    runner = Runner.from_files(config_paths, model_dir=model_dir, auto_config=True)
    check_model(runner.model, runner.model_dir)
    model, path = runner.restore(checkpoint_path)
    return runner, model, path


def check_inputs(
    model, features_file, labels_file=None, target_file=None, sentence=0, max_sentences=None
):
    """Checks the files and indices of an analysis before anything is computed.

    Args:
      model: The initialized mixing model.
      features_file: The source file.
      labels_file: A domain label file aligned with it (or ``domain:NAME``), or ``None``.
      target_file: A target file aligned with it, or ``None``.
      sentence: The index of the sentence to plot (0-based line number).
      max_sentences: Analyze the first sentences only (``None``: all).

    Returns:
      The number of sentences the analysis reads.

    Raises:
      UserError: on a missing file, a label file that is not aligned with the source
        or names an undeclared domain, a target file of another length, an empty
        source, or a :obj:`sentence` out of range or empty.
    """
    check_model(model)
    if not tf.io.gfile.exists(features_file):
        raise UserError("%s: no such source file" % features_file)
    if target_file is not None and not tf.io.gfile.exists(target_file):
        raise UserError("%s: no such target file" % target_file)
    if max_sentences is not None and max_sentences < 1:
        raise UserError("--max_sentences must be >= 1, got %d" % max_sentences)
    lines = 0
    chosen = None
    with tf.io.gfile.GFile(features_file, "r") as f:
        for lines, line in enumerate(f, start=1):
            if lines - 1 == sentence:
                chosen = line
    if lines == 0:
        raise UserError("%s is empty" % features_file)
    if labels_file is not None:
        # Exists, aligned with the source, declared domains (the inputters' own check).
        model.features_inputter.domain_inputter.validate_file(
            labels_file, source_file=features_file
        )
    if target_file is not None:
        target_lines = domains_lib.count_lines(target_file)
        if target_lines != lines:
            raise UserError(
                "%s has %d lines, but %s has %d" % (target_file, target_lines, features_file, lines)
            )
    count = lines if max_sentences is None else min(lines, max_sentences)
    if not 0 <= sentence < count:
        raise UserError(
            "--sentence %d is out of range: the analysis reads %d sentence(s) of %s (0 to %d)"
            % (sentence, count, features_file, count - 1)
        )
    if not chosen.strip():
        raise UserError("%s:%d: sentence %d is empty" % (features_file, sentence + 1, sentence))
    return count


def unpad(proportions, lengths):
    """The proportions of each sentence without its padding positions.

    Args:
      proportions: ``[batch, time, k]``.
      lengths: The number of positions of each sentence, ``[batch]``.

    Returns:
      A list of ``[length_i, k]`` float32 arrays.
    """
    proportions = np.asarray(proportions, dtype=np.float32)
    return [proportions[i, : int(length)] for i, length in enumerate(lengths)]


def argmax_accuracy(sentences, domain_ids):
    """How often a word's largest proportion is its sentence's domain.

    Args:
      sentences: One ``[positions, k]`` array per sentence (no padding, see :func:`unpad`).
      domain_ids: The domain id of each sentence; generic or unlabelled sentences
        (negative ids) are left out.

    Returns:
      ``(correct, count)``: the words whose argmax is their sentence's domain, and the
      words of labelled sentences.
    """
    correct = count = 0
    for proportions, domain in zip(sentences, domain_ids):
        if domain < 0 or len(proportions) == 0:
            continue
        correct += int(np.sum(np.argmax(proportions, axis=-1) == domain))
        count += len(proportions)
    return correct, count


def statistics(result):
    """A :class:`LayerStatistics` per layer of a :class:`Proportions`."""
    summary = []
    k = len(result.domains)
    for layer in result.layers:
        words = _words(layer, k)
        mean = words.mean(axis=0) if len(words) else np.full([k], np.nan)
        correct, count = argmax_accuracy(layer.sentences, result.domain_ids)
        summary.append(LayerStatistics(layer.label, layer.side, len(words), mean, correct, count))
    return summary


def layer_table(summary, domains, with_accuracy):
    """The per-layer table: positions, mean proportion per domain, argmax accuracy.

    Args:
      summary: :class:`LayerStatistics` per layer.
      domains: The domain names (the order of ``mean``).
      with_accuracy: Add the accuracy columns (domain labels were given).
    """
    header = ["layer", "side", "positions"] + ["mean D(%s)" % d for d in domains]
    if with_accuracy:
        header += ["argmax = domain", "labelled positions"]
    rows = []
    for layer in summary:
        cells = [layer.label, layer.side, "%d" % layer.words]
        cells += ["n/a" if np.isnan(m) else "%.3f" % m for m in layer.mean]
        if with_accuracy:
            accuracy = "%.3f" % (layer.correct / layer.labelled) if layer.labelled else "n/a"
            cells += [accuracy, "%d" % layer.labelled]
        rows.append(cells)
    return markdown_table(header, rows, align="ll" + "r" * (len(header) - 2))


def markdown_report(result, title, sentence, files=None):
    """The lines of ``proportions.md``.

    Args:
      result: A :class:`Proportions`.
      title: The checkpoint or model the proportions come from.
      sentence: The index of the plotted sentence.
      files: Optional description of the files read (a line).
    """
    summary = statistics(result)
    count = len(result.domain_ids)
    lines = [
        "# Domain proportions of %s" % title,
        "",
        "%d sentence(s)%s; domains: %s; eps = %g. Each proportion layer D_l gives every "
        "position a proportion per domain (word-level adaptive layer-wise domain mixing, "
        "Jiang et al., 2020); the positions are the source tokens for encoder layers and "
        "`decoder/layer_i/memory` (the decoder's proportions of the encoder output), `<s>` "
        "and the target tokens for decoder layers; padding is never counted."
        % (count, " of " + files if files else "", ", ".join(result.domains), result.epsilon),
        "",
    ]
    if result.labelled:
        labelled = int(np.sum(result.domain_ids >= 0))
        lines += [
            "`argmax = domain`: the share of the positions of the %d labelled sentence(s) "
            "whose largest proportion is their sentence's domain (generic sentences left "
            "out; 1/%d is chance)." % (labelled, len(result.domains)),
            "",
        ]
    lines += layer_table(summary, result.domains, result.labelled).splitlines()
    lines += [
        "",
        "Sentence %d (Figure 7): ![sentence %d](%s)"
        % (sentence, sentence, SENTENCE_PLOT % sentence),
        "",
        "Histograms (Figure 9): ![histograms](%s)" % HISTOGRAM_PLOT,
    ]
    return lines


def compute(
    model,
    features_file,
    labels_file=None,
    target_file=None,
    batch_size=32,
    max_sentences=None,
    progress=True,
):
    """The domain proportions of every mixed layer for the sentences of a file.

    The files are read, tokenized and batched by the model's inputters (in file
    order); decoder layers need a target file (teacher forcing).

    Args:
      model: An initialized, built mixing model (:func:`load_model`).
      features_file: The source file.
      labels_file: The domain label file aligned with it (or ``domain:NAME``): needed
        for accuracies, checked against the declared domains. ``None``: every sentence
        is unlabelled.
      target_file: The target file aligned with it, or ``None`` (encoder layers only).
      batch_size: Sentences per batch.
      max_sentences: Read the first sentences only (``None``: all).
      progress: Show a progress bar (on a terminal).

    Returns:
      A :class:`Proportions`.
    """
    from tqdm import tqdm

    check_model(model)
    if batch_size < 1:
        raise UserError("--batch_size must be >= 1, got %d" % batch_size)
    source = [features_file, labels_file or constant_label(domains_lib.GENERIC)]
    if target_file is None:
        dataset = model.features_inputter.make_inference_dataset(source, batch_size)
    else:
        dataset = model.examples_inputter.make_evaluation_dataset(source, target_file, batch_size)
    total = domains_lib.count_lines(features_file)
    if max_sentences is not None:
        total = min(total, max_sentences)
    meta = []

    @tf.function(reduce_retracing=True)
    def _proportions(features, labels):
        records = model.compute_proportions(features, labels=labels)
        meta[:] = [(record.label, record.side, record.epsilon) for record in records]
        return [tf.cast(record.proportions, tf.float32) for record in records]

    layers = None
    tokens = {SOURCE: []} if target_file is None else {SOURCE: [], TARGET: []}
    domain_ids = []
    done = 0
    with tqdm(
        total=total, desc="proportions", unit=" sentences", disable=None if progress else True
    ) as bar:
        for batch in dataset:
            features, labels = batch if target_file is not None else (batch, None)
            values = _proportions(features, labels)
            take = min(int(features["length"].shape[0]), total - done)
            lengths = {SOURCE: model.features_inputter.get_length(features).numpy()[:take]}
            _append_tokens(tokens[SOURCE], features, lengths[SOURCE], model.features_inputter)
            if labels is not None:
                lengths[TARGET] = model.labels_inputter.get_length(labels).numpy()[:take]
                _append_tokens(tokens[TARGET], labels, lengths[TARGET], model.labels_inputter)
            if layers is None:
                layers = [Layer(label, side, []) for label, side, _ in meta]
            for layer, value in zip(layers, values):
                layer.sentences.extend(unpad(value.numpy()[:take], lengths[layer.side]))
            domain_ids.extend(features["domain"].numpy()[:take].tolist())
            done += take
            bar.update(take)
            if done >= total:
                break
    epsilon = meta[0][2] if meta else model.epsilon
    return Proportions(
        list(model.domains),
        epsilon,
        layers or [],
        tokens,
        np.asarray(domain_ids, dtype=np.int64),
        labels_file is not None and constant_label_name(labels_file) != domains_lib.GENERIC,
    )


def _append_tokens(output, features, lengths, inputter):
    """Appends the tokens of each position (with ``<s>``/``</s>`` where the inputter
    adds them) of each sentence of a batch."""
    start = [constants.START_OF_SENTENCE_TOKEN] if inputter.mark_start else []
    end = [constants.END_OF_SENTENCE_TOKEN] if inputter.mark_end else []
    for row, length in zip(features["tokens"].numpy(), lengths):
        words = [t.decode("utf-8") for t in row if t]  # Padding is the empty string.
        positions = (start + words + end)[: int(length)]
        output.append(positions + ["?"] * (int(length) - len(positions)))


def _words(layer, k):
    """All positions of a layer, ``[words, k]``."""
    if not layer.sentences:
        return np.zeros([0, k], np.float32)
    return np.concatenate(layer.sentences, axis=0)


def _group(label):
    """(stack, layer index) of a record label: ``decoder/layer_2/memory`` ->
    ("decoder memory", 2)."""
    match = _LABEL.match(label)
    if match is None:
        return label, 0
    stack = match.group("stack") + (" memory" if match.group("memory") else "")
    return stack, int(match.group("index"))


def plot_sentence(result, index, path):
    """Figure 7: the proportions of one sentence's positions at every layer.

    One heatmap per side (source, then target) and per domain, stacked vertically:
    x the sentence's positions, y the layers of that side (bottom to top: encoder
    layers, then the decoder's proportions of the encoder output, after a white
    line), the colour ``D_j`` on a shared ``[0, 1]`` scale (values written in the
    cells of sentences of up to 30 positions). With two domains, the first one's
    heatmap alone (the other is its complement, as in the paper's figure).

    Args:
      result: A :class:`Proportions`.
      index: The sentence.
      path: The PNG file to write.

    Raises:
      UserError: if :obj:`index` is out of range or the sentence has no position.
    """
    count = len(result.domain_ids)
    if not 0 <= index < count:
        raise UserError(
            "--sentence %d is out of range: %d sentence(s) were analyzed" % (index, count)
        )
    plt = pyplot()
    k = len(result.domains)
    shown = [0] if k == 2 else list(range(k))
    panels = []
    for side in (SOURCE, TARGET):
        rows = [layer for layer in result.layers if layer.side == side]
        if not rows or not len(rows[0].sentences[index]):
            continue
        matrix = np.stack([layer.sentences[index] for layer in rows])  # [rows, words, k]
        for j in shown:
            panels.append((side, j, [layer.label for layer in rows], matrix[..., j]))
    if not panels:
        raise UserError("sentence %d has no position to plot" % index)
    widest = max(panel[3].shape[1] for panel in panels)
    annotate = widest <= 30
    heights = [len(panel[2]) * 0.35 + 1.3 for panel in panels]
    figure, axes = plt.subplots(
        len(panels),
        1,
        figsize=(max(6.0, 0.45 * widest + 3.5), sum(heights) + 0.8),
        gridspec_kw={"height_ratios": heights},
        squeeze=False,
        constrained_layout=True,
    )
    image = None
    for axis, (side, j, labels, values) in zip(axes[:, 0], panels):
        image = axis.imshow(values, vmin=0, vmax=1, cmap="viridis", aspect="auto", origin="lower")
        words = result.tokens[side][index]
        axis.set_xticks(range(len(words)))
        axis.set_xticklabels(words, rotation=60, ha="right", fontsize=8)
        axis.set_yticks(range(len(labels)))
        axis.set_yticklabels(labels, fontsize=8)
        title = "%s positions: D(%s)" % (side, result.domains[j])
        if k == 2:
            title += " (D(%s) = 1 - D(%s))" % (result.domains[1], result.domains[0])
        axis.set_title(title, fontsize=9)
        stacks = [_group(label)[0] for label in labels]
        for row in range(1, len(stacks)):
            if stacks[row] != stacks[row - 1]:
                axis.axhline(row - 0.5, color="white", linewidth=2)
        if annotate:
            for (row, column), value in np.ndenumerate(values):
                axis.text(
                    column,
                    row,
                    "%.2f" % value,
                    ha="center",
                    va="center",
                    fontsize=6,
                    color="black" if value > 0.6 else "white",
                )
    domain = result.domain_ids[index]
    figure.suptitle(
        "Domain proportions of sentence %d (%s)"
        % (index, result.domains[domain] if domain >= 0 else "no domain label"),
        fontsize=10,
    )
    figure.colorbar(image, ax=list(axes[:, 0]), shrink=0.8, label="domain proportion")
    save_figure(figure, path, dpi=110)
    plt.close(figure)


def plot_histograms(result, path, bins=20):
    """Figure 9: per layer, the distribution over all positions of each domain's proportion.

    One panel per layer: columns the stacks (encoder, decoder, decoder memory), rows
    the layer index. Each domain's proportions are a step histogram (the share of the
    positions in each bin); with domain labels, a dashed black one shows the
    proportion of each labelled sentence's words given to the sentence's domain.

    Args:
      result: A :class:`Proportions`.
      path: The PNG file to write.
      bins: Bins over ``[0, 1]``.
    """
    plt = pyplot()
    k = len(result.domains)
    groups = []
    placed = []
    for layer in result.layers:
        stack, index = _group(layer.label)
        if stack not in groups:
            groups.append(stack)
        placed.append((groups.index(stack), index, layer))
    rows = max([index for _, index, _ in placed], default=0) + 1
    columns = max(len(groups), 1)
    figure, axes = plt.subplots(
        rows,
        columns,
        figsize=(3.6 * columns + 0.5, 2.2 * rows + 1.2),
        squeeze=False,
        sharex=True,
        constrained_layout=True,
    )
    for axis in axes.ravel():
        axis.set_visible(False)
    edges = np.linspace(0, 1, bins + 1)
    colours = plt.get_cmap("tab10")
    for column, index, layer in placed:
        axis = axes[rows - 1 - index, column]  # Layer 0 at the bottom.
        axis.set_visible(True)
        words = _words(layer, k)
        axis.set_title("%s (%d positions)" % (layer.label, len(words)), fontsize=9)
        if not len(words):
            continue
        weights = np.full([len(words)], 1.0 / len(words))
        for j, domain in enumerate(result.domains):
            axis.hist(
                words[:, j],
                bins=edges,
                weights=weights,
                histtype="step",
                color=colours(j % 10),
                label="D(%s)" % domain,
            )
        if result.labelled:
            word_domains = np.concatenate(
                [np.full([len(s)], d) for s, d in zip(layer.sentences, result.domain_ids)]
            )
            mask = word_domains >= 0
            if mask.any():
                own = words[mask, word_domains[mask]]
                axis.hist(
                    own,
                    bins=edges,
                    weights=np.full([len(own)], 1.0 / len(own)),
                    histtype="step",
                    color="black",
                    linestyle="--",
                    label="D(sentence's domain)",
                )
        axis.set_xlim(0, 1)
        axis.tick_params(labelsize=8)
    for axis in axes[-1]:
        axis.set_xlabel("domain proportion", fontsize=8)
    for axis in axes[:, 0]:
        axis.set_ylabel("share of positions", fontsize=8)
    handles, labels = [], []
    for axis in axes.ravel():
        handles, labels = axis.get_legend_handles_labels()
        if handles:
            break
    if handles:
        figure.legend(handles, labels, loc="outside upper center", ncol=min(len(handles), 4))
    save_figure(figure, path, dpi=110)
    plt.close(figure)


def write_report(result, out_dir, sentence, title, files=None):
    """Writes ``sentence_<N>.png``, ``histograms.png`` and ``proportions.md``.

    Args:
      result: A :class:`Proportions`.
      out_dir: The output directory (created).
      sentence: The sentence of Figure 7.
      title: What the proportions come from (a checkpoint).
      files: Optional description of the files read.

    Returns:
      The lines of ``proportions.md``.
    """
    os.makedirs(out_dir, exist_ok=True)
    plot_sentence(result, sentence, os.path.join(out_dir, SENTENCE_PLOT % sentence))
    plot_histograms(result, os.path.join(out_dir, HISTOGRAM_PLOT))
    lines = markdown_report(result, title, sentence, files=files)
    write_lines_atomic(os.path.join(out_dir, REPORT), lines)
    return lines
