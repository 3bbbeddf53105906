"""Target Token Mixing (Britz et al., 2017), decoder side: the first target token forced.

A TTM model's targets start with a domain token. At inference, a sentence with a real
domain label must start with that domain's token: :class:`FirstTokenForcing`, a behaviour
of a stock OpenNMT-tf decoder (:func:`ldr_opennmt.layers.behaviours.install_behaviour`), masks
the logits of the first decoding step so that every other token has probability 0.
Beam search and sampling then cannot choose anything else, and the forced token's
log-probability is 0: a hypothesis' score is ``log P(y | x, domain)``. Sentences
labelled ``generic`` are not forced: the model predicts their domain token.

The domain of each sentence is read from the domain scope
(:func:`~ldr_opennmt.layers.context.current_domain`), which the multi-domain model
opens around beam search with the ids tiled to the beam.
"""

import opennmt
import tensorflow as tf

from ldr_opennmt.layers.behaviours import Behaviour
from ldr_opennmt.layers.context import current_domain


def force_first_token(logits, step, domain, token_ids):
    """Masks the logits of step 0 so that a labelled row can only emit its token.

    Args:
      logits: The logits of one decoding step, ``[batch, vocab]``.
      step: The decoding step (a scalar).
      domain: The domain id of each row, ``[batch]`` (``-1``: generic, not forced).
      token_ids: The token id forced for domain ``k``, at index ``k``.

    Returns:
      The logits, ``-inf`` except at the forced token for labelled rows at step 0.
    """
    domain = tf.convert_to_tensor(domain, tf.int32)
    forced = tf.gather(tf.constant(token_ids, tf.int32), tf.maximum(domain, 0))
    vocab = tf.range(tf.shape(logits)[-1], dtype=tf.int32)
    is_forced = tf.equal(vocab[tf.newaxis, :], forced[:, tf.newaxis])
    applies = tf.logical_and(tf.greater_equal(domain, 0), tf.equal(step, 0))
    keep = tf.logical_or(is_forced, tf.logical_not(applies)[:, tf.newaxis])
    return tf.where(keep, logits, tf.constant(-float("inf"), logits.dtype))


class FirstTokenForcing(Behaviour):
    """Decoder behaviour: at decoding step 0, labelled sentences emit their domain token.

    Set :attr:`first_token_ids` (once the target vocabulary is known) before decoding.
    Only step-by-step decoding (2-D inputs) is changed: teacher forcing (training,
    evaluation loss, scoring) reads the full target, its token included.
    """

    applies_to = (opennmt.decoders.SelfAttentionDecoder,)

    #: The target id forced for domain id ``k`` at index ``k`` (``None``: no forcing).
    first_token_ids = None

    def call(
        self,
        inputs,
        length_or_step=None,
        state=None,
        input_fn=None,
        sampling_probability=None,
        training=None,
    ):
        logits, state, attention = super().call(
            inputs,
            length_or_step=length_or_step,
            state=state,
            input_fn=input_fn,
            sampling_probability=sampling_probability,
            training=training,
        )
        if inputs.shape.ndims == 2 and self.first_token_ids:
            logits = force_first_token(
                logits, length_or_step, current_domain(), self.first_token_ids
            )
        return logits, state, attention
