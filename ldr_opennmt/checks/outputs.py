"""What the family check (:mod:`ldr_opennmt.checks.family`) reads off a model's outputs: the
logits of training and of each beam-search step, the predictions OpenNMT-tf's translation and
SavedModel read, the word embeddings' rows, and the dropout rates that make two runs differ."""

import contextlib

import opennmt
import tensorflow as tf

#: What OpenNMT-tf's translation, scoring and SavedModel read from the predictions: name,
#: rank (``[batch, hypotheses, time]`` or ``[batch, hypotheses]``) and dtype kind.
PREDICTIONS = (("tokens", 3, "string"), ("length", 2, "integer"), ("log_probs", 2, "floating"))


@contextlib.contextmanager
def step_logits(model, widths):
    """Appends to :obj:`widths` the width of the logits of each decoding step of
    ``model.decoder`` (OpenNMT-tf's decoders take one position as ``[batch, depth]`` inputs
    and return ``(logits, state, attention)``), for the duration of the block."""
    decoder = getattr(model, "decoder", None)
    call = getattr(decoder, "call", None)
    if call is None:
        yield
        return

    def _call(inputs, *args, **kwargs):
        result = call(inputs, *args, **kwargs)
        if isinstance(inputs, tf.Tensor) and inputs.shape.rank == 2:
            widths.append(result[0].shape[-1])
        return result

    decoder.call = _call
    try:
        yield
    finally:
        del decoder.call  # The class's method again.


def logits_problems(what, logits, size, batch, length):
    """What is wrong with :obj:`logits`, which should be floats ``[batch, length, size]``."""
    if not isinstance(logits, tf.Tensor):
        return ["%s are a %s, not a tensor" % (what, type(logits).__name__)]
    problems = []
    if not logits.dtype.is_floating:
        problems.append("%s are %s, not floats" % (what, logits.dtype.name))
    shape = logits.shape.as_list() if logits.shape.rank is not None else None
    if shape is None or len(shape) != 3:
        problems.append(
            "%s have the shape %s, not [batch, target length, target vocabulary]" % (what, shape)
        )
        return problems
    if shape[-1] != size:
        problems.append(
            "%s have %s entries where the target vocabulary has %d (OpenNMT-tf's size: its "
            "file's tokens, the special tokens included, and <unk>)" % (what, shape[-1], size)
        )
    if shape[1] != length:
        problems.append(
            "%s cover %s target positions where the target has %d (its tokens and </s>)"
            % (what, shape[1], length)
        )
    if shape[0] != batch:
        problems.append("%s have %s sentences where the batch has %d" % (what, shape[0], batch))
    return problems


def predictions_problems(predictions, batch):
    """What is wrong with the predictions of a beam search of :obj:`batch` sentences."""
    if not isinstance(predictions, dict):
        return ["its predictions are a %s, not a dict" % type(predictions).__name__]
    missing = [key for key, _, _ in PREDICTIONS if key not in predictions]
    if missing:
        return [
            "its predictions have no %s (translation and the SavedModel read %s)"
            % (", ".join(missing), ", ".join(key for key, _, _ in PREDICTIONS))
        ]
    problems = []
    for key, rank, kind in PREDICTIONS:
        value = predictions[key]
        dtype = tf.as_dtype(value.dtype)
        right_kind = dtype == tf.string if kind == "string" else getattr(dtype, "is_" + kind)
        shape = value.shape.as_list() if value.shape.rank is not None else None
        if not right_kind or shape is None or len(shape) != rank or shape[0] != batch:
            problems.append(
                "the prediction %s is %s of the shape %s, not %s of rank %d (%d sentences first)"
                % (key, dtype.name, shape, kind, rank, batch)
            )
    return problems


def embedding_problems(model):
    """Word embeddings (OpenNMT-tf's ``WordEmbedder``) without one row per entry of their
    vocabulary (``<unk>`` included): an unknown word would read outside the table."""
    problems = []
    for embedder in model.submodules:
        if not isinstance(embedder, opennmt.inputters.WordEmbedder):
            continue  # (The source inputter's embedding is a property that may refuse.)
        table = getattr(embedder, "embedding", None)
        if table is None:
            continue
        if table.shape[0] != embedder.vocabulary_size:
            problems.append(
                "the embedding %s has %s rows where its vocabulary has %d entries"
                % (table.name, table.shape[0], embedder.vocabulary_size)
            )
    return problems


def dropout_rates(model):
    """``"dropout 0.1 in A, B"``: the non-zero dropout rates of the model's layers (the
    attributes that OpenNMT-tf and Keras name ``*dropout``, and Keras' ``Dropout.rate``)."""
    rates = {}
    for layer in model.submodules:
        names = [name for name in vars(layer) if name.endswith("dropout")]
        if isinstance(layer, tf.keras.layers.Dropout):
            names.append("rate")
        for name in names:
            value = getattr(layer, name, None)
            if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
                rates.setdefault(value, set()).add(type(layer).__name__)
    return "; ".join(
        "%s %s in %s" % ("dropout", rate, ", ".join(sorted(classes)[:3]))
        for rate, classes in sorted(rates.items())
    )
