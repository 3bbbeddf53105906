"""Beam search over an ensemble of domain views (Deng et al., 2020, section 5).

Each sentence comes with weights over the model's views (its domains, then generic;
see :mod:`ldr_opennmt.ensembles`). The source is encoded once per view, each pass
inside :func:`~ldr_opennmt.layers.context.domain_scope` of its view, so every
domain-aware layer (LDR or DC embedders, Factorized blocks, adapters) reads its view's
domain through the one mechanism the model uses everywhere. At each decoding step the
stock decoder runs once on all views of all hypotheses (one batch of
``batch x beam x views`` rows), and the step returns the mixture of the views' word
distributions, ``log sum_k w_k softmax(logits_k)``: a mixture of probabilities, not of
logits. OpenNMT-tf's beam search (:func:`opennmt.utils.dynamic_decode`) sees an ordinary
model whose state has a views axis after the hypothesis axis, so its reordering of
hypotheses carries each view's state along.

With a one-hot weight row the mixture is that view's distribution exactly (``log 0`` is
``-inf``), so the translation equals the view's own.
"""

import opennmt
import tensorflow as tf
import tensorflow_addons as tfa
from opennmt import constants

from ldr_opennmt import ensembles
from ldr_opennmt.layers.context import domain_scope
from ldr_opennmt.upstream import ledger


def _split_views(tensor, num_views):
    """``[rows x views, ...]`` -> ``[rows, views, ...]``."""
    shape = tf.shape(tensor)
    return tf.reshape(tensor, tf.concat([[-1, num_views], shape[1:]], 0))


def _merge_views(tensor):
    """``[rows, views, ...]`` -> ``[rows x views, ...]``."""
    shape = tf.shape(tensor)
    return tf.reshape(tensor, tf.concat([[-1], shape[2:]], 0))


def _tile_beam(tensor, num_views, beam_size):
    """Rows ordered (sentence, view) -> (sentence, hypothesis, view)."""
    if tensor is None:
        return None
    per_view = _split_views(tensor, num_views)  # [batch, views, ...]
    return _merge_views(tfa.seq2seq.tile_batch(per_view, beam_size))


def ensemble_decode(model, features, weights):
    """Translates a batch with the views of :obj:`model` mixed by :obj:`weights`.

    Args:
      model: A :class:`~ldr_opennmt.models.sequence_to_sequence.MultiDomainModel`.
      features: The source features.
      weights: The view weights, ``[batch, views]`` (rows sum to one).

    Returns:
      The predictions dict of ``SequenceToSequence`` (``tokens``, ``length``,
      ``log_probs``, ``alignment`` when the decoder has one, or ``text``), for
      ``num_hypotheses`` hypotheses per sentence.
    """
    params = model.params
    num_views = weights.shape[-1]
    views = tf.constant(ensembles.view_ids(model.domains), tf.int32)
    batch_size = tf.shape(weights)[0]
    beam_size = params.get("beam_width", 1)

    # One encoder pass per view: rows (sentence, view).
    source = {
        name: tf.repeat(value, num_views, axis=0)
        for name, value in features.items()
        if name not in ("domain", ensembles.WEIGHTS_FEATURE)
    }
    with domain_scope(tf.tile(views, [batch_size])):
        length = model.features_inputter.get_length(source)
        inputs = model.features_inputter(source, training=False)
        memory, encoder_state, memory_length = model.encoder(
            inputs, sequence_length=length, training=False
        )
    memory = tf.nest.map_structure(lambda t: _tile_beam(t, num_views, beam_size), memory)
    memory_length = tf.nest.map_structure(
        lambda t: _tile_beam(t, num_views, beam_size), memory_length
    )
    encoder_state = tf.nest.map_structure(
        lambda t: _tile_beam(t, num_views, beam_size), encoder_state
    )

    hypotheses = batch_size * beam_size
    # Decoder rows (sentence, hypothesis, view); its state is kept as [hypotheses, views,
    # ...] so that beam search reorders hypotheses with all their views.
    decoder_domains = tf.tile(views, [hypotheses])
    log_weights = tf.math.log(tfa.seq2seq.tile_batch(tf.cast(weights, tf.float32), beam_size))
    attention_weights = tf.exp(log_weights)[:, :, None]

    def _step(ids, step, state):
        inputs = model.labels_inputter({"ids": tf.repeat(ids, num_views)}, training=False)
        state = tf.nest.map_structure(_merge_views, state)
        logits, state, attention = model.decoder(inputs, step, state=state, training=False)
        log_probs = tf.nn.log_softmax(tf.cast(logits, tf.float32))
        log_probs = _split_views(log_probs, num_views) + log_weights[:, :, None]
        mixed = tf.reduce_logsumexp(log_probs, axis=1)
        if attention is not None:
            attention = tf.cast(_split_views(attention, num_views), tf.float32)
            attention = tf.reduce_sum(attention * attention_weights, axis=1)
        state = tf.nest.map_structure(lambda t: _split_views(t, num_views), state)
        return mixed, state, attention

    with domain_scope(decoder_domains):
        initial_state = model.decoder.initial_state(
            memory=memory, memory_sequence_length=memory_length, initial_state=encoder_state
        )
        initial_state = tf.nest.map_structure(lambda t: _split_views(t, num_views), initial_state)
        strategy = opennmt.utils.DecodingStrategy.from_params(params)
        ledger.set_state_reorder_flags(strategy, model.decoder)
        decoder = model.decoder
        result = opennmt.utils.dynamic_decode(
            _step,
            tf.fill([batch_size], constants.START_OF_SENTENCE_ID),
            initial_state=initial_state,
            decoding_strategy=strategy,
            sampler=opennmt.utils.Sampler.from_params(params),
            maximum_iterations=params.get("maximum_decoding_length", 250),
            minimum_iterations=params.get("minimum_decoding_length", 0),
            attention_history=decoder.support_alignment_history,
            attention_size=(
                tf.shape(decoder.memory)[1] if decoder.support_alignment_history else None
            ),
        )
    return ledger.decoding_predictions(model, result, batch_size)
