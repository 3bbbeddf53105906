"""Sentence-level domain classification on the encoder output (Britz et al., 2017).

The layers of the multitask (ML) and adversarial (AdvL) baselines
(:mod:`ldr_opennmt.models.multitask`):

* :func:`gradient_reversal` / :class:`GradientReversal`: the identity in the forward
  pass; in the backward pass the gradient is multiplied by ``-lambda``. ``lambda`` is
  constant (``scale``, 1 by default), or follows the schedule of Ganin and Lempitsky
  (:func:`reversal_weight`): ``lambda_p = scale (2 / (1 + exp(-10 p)) - 1)``, ``p`` the
  training progress ``step / ramp_steps`` (capped at 1), so that it rises from 0 at the
  first step to ``scale`` (``0.9999 scale`` at ``p = 1``, ``0.987 scale`` at ``p = 0.5``).
* :func:`masked_mean`: the mean of the encoder output over the real source
  positions of each sentence (padding masked).
* :class:`DomainClassifierHead`: pooled encoder output, optionally behind a
  gradient reversal, then one hidden ReLU layer and a dense layer to the logits of
  the declared domains.
* :func:`classification_loss`: the cross-entropy summed over the sentences that have
  a domain label, and their count (``generic`` sentences are left out).
"""

import math

import tensorflow as tf

from ldr_opennmt import domains as domains_lib
from ldr_opennmt.errors import UserError
from ldr_opennmt.layers.context import DomainSpecificLayer


def validate_non_negative(value, name):
    """Returns :obj:`value` as a float, checked to be a finite number ``>= 0``.

    Args:
      value: The value to check.
      name: How the user sets it, for the error message.

    Raises:
      UserError: if it is not a finite number ``>= 0``.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise UserError("%s must be a number >= 0, got %r" % (name, value))
    if not math.isfinite(value) or value < 0:
        raise UserError("%s must be a finite number >= 0, got %s" % (name, value))
    return float(value)


#: The ``gamma`` of Ganin and Lempitsky's schedule ``lambda_p = 2 / (1 + exp(-gamma p)) - 1``.
RAMP_GAMMA = 10.0


def validate_ramp_steps(value, name):
    """Returns :obj:`value`, checked to be an integer ``>= 0``.

    Args:
      value: The value to check.
      name: How the user sets it, for the error message.

    Raises:
      UserError: if it is not an integer ``>= 0``.
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise UserError("%s must be an integer >= 0, got %r" % (name, value))
    return value


def ramp(progress):
    """Ganin and Lempitsky's schedule: ``2 / (1 + exp(-10 p)) - 1`` (``tanh(5 p)``).

    Args:
      progress: The training progress ``p`` (a float or a float tensor), in ``[0, 1]``.

    Returns:
      The schedule's value, 0 at ``p = 0`` and 0.99991 at ``p = 1``.
    """
    return 2.0 / (1.0 + tf.exp(-RAMP_GAMMA * progress)) - 1.0


def reversal_weight(step, ramp_steps, scale=1.0):
    """``lambda`` at a training step.

    Args:
      step: The training step (an integer or an integer scalar tensor, e.g. the
        optimizer's ``iterations``), or ``None`` outside training.
      ramp_steps: The number of steps of the ramp; 0 for a constant ``lambda``.
      scale: The final ``lambda``, a number ``>= 0``.

    Returns:
      :obj:`scale` itself when :obj:`ramp_steps` is 0 or :obj:`step` is ``None`` (a
      forward pass without a step gets no schedule: the reversal only acts on
      gradients), otherwise the float32 scalar ``scale * ramp(min(step / ramp_steps, 1))``.
    """
    if not ramp_steps or step is None:
        return scale
    progress = tf.cast(step, tf.float32) / float(ramp_steps)
    progress = tf.clip_by_value(progress, 0.0, 1.0)
    return float(scale) * ramp(progress)


def gradient_reversal(inputs, scale=1.0):
    """The identity, whose gradient is multiplied by ``-scale``.

    Args:
      inputs: A float tensor.
      scale: ``lambda``, a Python number ``>= 0`` or a float scalar tensor (e.g.
        :func:`reversal_weight` at the current step).

    Returns:
      A tensor equal to :obj:`inputs`.
    """

    @tf.custom_gradient
    def _reverse(x):
        def _grad(dy):
            return dy * tf.cast(-scale, dy.dtype)

        return tf.identity(x), _grad

    return _reverse(inputs)


class GradientReversal(tf.keras.layers.Layer):
    """Identity forward, gradient multiplied by ``-lambda`` backward (no weights).

    ``lambda`` is :obj:`scale`, constant (``ramp_steps`` 0, the default), or ramping
    from 0 to :obj:`scale` over ``ramp_steps`` training steps (:func:`reversal_weight`).
    """

    def __init__(self, scale=1.0, ramp_steps=0, **kwargs):
        """Initializes the layer.

        Args:
          scale: ``lambda`` (the final one with a ramp), a number ``>= 0`` (1 by default).
          ramp_steps: The number of training steps of Ganin and Lempitsky's ramp, an
            integer ``>= 0``; 0 (the default) keeps ``lambda`` constant.
          **kwargs: Additional layer keyword arguments.

        Raises:
          UserError: if :obj:`scale` is negative or not a number, or :obj:`ramp_steps`
            not an integer ``>= 0``.
        """
        super().__init__(**kwargs)
        self.scale = validate_non_negative(scale, "the gradient reversal scale (lambda)")
        self.ramp_steps = validate_ramp_steps(ramp_steps, "the gradient reversal ramp steps")

    def set_ramp_steps(self, ramp_steps):
        """Sets the number of steps of the ramp (0: constant ``lambda``).

        Raises:
          UserError: if it is not an integer ``>= 0``.
        """
        self.ramp_steps = validate_ramp_steps(ramp_steps, "the gradient reversal ramp steps")

    def weight(self, step=None):
        """``lambda`` at :obj:`step` (see :func:`reversal_weight`)."""
        return reversal_weight(step, self.ramp_steps, self.scale)

    def call(self, inputs, step=None):
        return gradient_reversal(inputs, self.weight(step))

    def get_config(self):
        config = super().get_config()
        config["scale"] = self.scale
        config["ramp_steps"] = self.ramp_steps
        return config


def masked_mean(inputs, sequence_length):
    """The mean over time of each sequence's first ``sequence_length`` positions.

    Args:
      inputs: A float tensor ``[batch, time, depth]``.
      sequence_length: An int tensor ``[batch]``.

    Returns:
      A tensor ``[batch, depth]`` (zeros for a sequence of length 0).
    """
    mask = tf.sequence_mask(sequence_length, maxlen=tf.shape(inputs)[1], dtype=inputs.dtype)
    total = tf.reduce_sum(inputs * tf.expand_dims(mask, -1), axis=1)
    count = tf.reduce_sum(mask, axis=1, keepdims=True)
    return tf.math.divide_no_nan(total, count)


class DomainClassifierHead(tf.keras.layers.Layer, DomainSpecificLayer):
    """Predicts the domain of a sentence from its encoder output.

    ``masked_mean(encoder output)`` -> (gradient reversal) -> ``Dense(hidden_units,
    relu)`` -> ``Dense(num_domains)``. Its weights are shared (every sentence trains
    every class), so :meth:`domain_weights` is empty; it is a
    :class:`~ldr_opennmt.layers.DomainSpecificLayer` to declare its regions (one per
    class, i.e. per declared domain), which the multi-domain Runner records so that
    the domain order of a trained model is checked, and to refuse a fold.
    """

    def __init__(
        self, hidden_units, num_domains=None, reversal_scale=None, reversal_ramp_steps=0, **kwargs
    ):
        """Initializes the layer.

        Args:
          hidden_units: The size of the hidden ReLU layer.
          num_domains: The number of classes (or :meth:`set_num_domains` before build).
          reversal_scale: ``None`` for a plain classifier (multitask learning), or the
            ``lambda`` of a gradient reversal between the pooled encoder output and
            the classifier (adversarial learning; the final ``lambda`` with a ramp).
          reversal_ramp_steps: The steps of the reversal's ramp from 0 to
            :obj:`reversal_scale` (:class:`GradientReversal`); 0 for a constant one.
          **kwargs: Additional layer keyword arguments.
        """
        super().__init__(**kwargs)
        self.hidden_units = hidden_units
        self.num_domains = None
        self.num_regions = None
        self.reversal = None
        if reversal_scale is not None:
            self.reversal = GradientReversal(
                reversal_scale, ramp_steps=reversal_ramp_steps, name="gradient_reversal"
            )
        self.hidden = tf.keras.layers.Dense(hidden_units, activation="relu", name="hidden")
        self.output_layer = None
        if num_domains is not None:
            self.set_num_domains(num_domains)

    @property
    def adversarial(self):
        """Whether the encoder gets the reversed gradient."""
        return self.reversal is not None

    def set_num_domains(self, num_domains):
        """Sets the number of classes; before the layer is built."""
        if isinstance(num_domains, bool) or not isinstance(num_domains, int) or num_domains < 1:
            raise UserError("the domain classifier needs at least one domain, got %r" % num_domains)
        if self.built and num_domains != self.num_domains:
            raise ValueError("%s is built with %d domains" % (self.name, self.num_domains))
        self.num_domains = num_domains
        self.num_regions = num_domains

    def build(self, input_shape):
        if self.num_domains is None:
            raise ValueError("%s: set the number of domains before build" % self.name)
        self.output_layer = tf.keras.layers.Dense(self.num_domains, name="logits")
        super().build(input_shape)

    def call(self, inputs, sequence_length, step=None, training=None):
        """Computes the domain logits.

        Args:
          inputs: The encoder output ``[batch, time, depth]``.
          sequence_length: The source lengths ``[batch]``.
          step: The training step, for the reversal's ramp (``None``: the final
            ``lambda``).
          training: Unused (the head has no dropout).

        Returns:
          The logits ``[batch, num_domains]``, float32.
        """
        pooled = masked_mean(inputs, sequence_length)
        if self.reversal is not None:
            pooled = self.reversal(pooled, step=step)
        logits = self.output_layer(self.hidden(pooled))
        return tf.cast(logits, tf.float32)


def classification_loss(logits, domain):
    """The domain cross-entropy of the labelled sentences.

    Args:
      logits: The domain logits ``[batch, num_domains]``.
      domain: The domain ids ``[batch]`` (``GENERIC_ID`` for unlabelled sentences,
        which are left out).

    Returns:
      ``(total, count)``: the cross-entropy summed over the labelled sentences, and
      their number (both float32 scalars).
    """
    logits = tf.cast(logits, tf.float32)
    labelled = tf.not_equal(domain, domains_lib.GENERIC_ID)
    # Generic ids are replaced by a valid class; their cross-entropy is masked out.
    targets = tf.where(labelled, domain, tf.zeros_like(domain))
    cross_entropy = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=targets, logits=logits)
    weights = tf.cast(labelled, tf.float32)
    return tf.reduce_sum(cross_entropy * weights), tf.reduce_sum(weights)
