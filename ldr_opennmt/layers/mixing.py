"""Word-level adaptive layer-wise domain mixing (Jiang et al., ACL 2020, section 3).

Every mixed projection has one weight copy per domain and combines them per word
with the word's *domain proportions*:

* **Domain proportions** (section 3.1): ``D(x) = (1 - eps) softmax(R x) + eps / k``
  with ``R`` ``[k, d]`` (stored transposed, ``kernel`` ``[d, k]``), ``k`` domains and
  the smoothing ``eps`` (0.05 in the paper) keeping ``D`` away from 0 and 1
  (:class:`DomainProportions`).
* **Mixed projections** (section 3.2, the projections of eq. (2) and the FFN):
  ``y = sum_j D_j(x) (x W_j + b_j)`` (:class:`MixedDense`). One matmul computes every
  domain's projection, either ``[n, k*m]`` then a weighted sum over ``k``, or, when
  the output is wider than the input (the FFN's first linear), the equivalent
  ``[D_1 x, ..., D_k x] [W_1; ...; W_k]`` whose intermediate is ``[N, k*n]``; both
  are free reshapes of the stored kernel ``[n, k, m]`` (domain ``j`` is
  ``kernel[:, j, :]``), and no per-word kernel is ever gathered. The activation (the
  FFN's ReLU) is applied after mixing.
* **Layer-wise mixing** (section 3.3, Figures 4 and 7-9): **one** proportion layer
  ``D_l`` (one ``R_l``) per Transformer layer ``l``. Section 3.2 writes a proportion
  layer per projection ("``D_Q`` ... the domain proportion layer related to Q"),
  but section 3.3 and the figures give each word one proportion per layer; here
  ``D_l`` is computed once per word on the input of the layer's self-attention
  (the layer input after the wrapper's layer norm, i.e. the tensor the Q/K/V
  projections of eq. (2) read), and that proportion mixes every projection of the
  layer at that word's position: self-attention Q, K, V and output projection (W^O,
  mixed "in the same way" in section 3.2), the decoder's cross-attention queries and
  output projection, and both FFN linears. The cross-attention keys and
  values are computed on the encoder output, so they are mixed with
  ``D_l(encoder output)`` (the same ``R_l`` applied to the memory): they depend on
  the source alone, and the keys/values that incremental decoding caches stay
  exact. The embeddings and the layer norms are shared.
* **Gradient cut** (section 4.2, Figure 5), on by default: ``D`` reads
  ``stop_gradient(x)`` (the translator gets no gradient from ``L_mix``) and the
  projections are weighted by ``stop_gradient(D)`` (``R`` gets no gradient from
  ``L_gen``). ``cut=False`` removes both (ablation).

:func:`install` puts the mixed layers into a stock OpenNMT-tf
``SelfAttentionEncoder`` or ``SelfAttentionDecoder`` after construction and before
build: it replaces the ``linear_queries``/``linear_keys``/``linear_values``/
``linear_output`` of every ``MultiHeadAttention`` and the ``inner``/``outer`` of every
``FeedForwardNetwork`` by :class:`MixedDense`, gives every encoder/decoder layer a
``domain_proportions`` sublayer, and installs a behaviour
(:class:`MixingEncoderLayer`, :class:`MixingDecoderLayer`, see
:mod:`ldr_opennmt.layers.behaviours`) whose ``call`` computes the layer's
proportions and opens a :func:`mixing_scope` around the stock ``call``. The stock
attention, FFN and decoding cache code is kept.

**How the proportions reach the projections and the loss.** Two kinds of frames on
the domain context's per-thread stack (:func:`ldr_opennmt.layers.context.push_frame`;
the replicas of a ``MirroredStrategy`` are traced in parallel threads), used while
the graph is traced, so ``tf.function`` and XLA see plain tensors:

* the *mixing scope* (:func:`mixing_scope`, :func:`current_mixing`), opened by each
  mixed layer around its stock ``call``, holds that layer's proportions for its
  :class:`MixedDense` projections (and computes the memory's proportions for the
  cross-attention keys and values);
* the *collector* (:func:`collect_proportions`, a
  :class:`~ldr_opennmt.layers.context.Recorder`): while one is open, every
  :class:`DomainProportions` call appends a :class:`ProportionRecord` (the layer's
  label, the side its positions belong to, :data:`SOURCE` or :data:`TARGET`, the
  logits ``R x`` and the proportions). The model opens one around its teacher-forced
  forward pass and turns the records into ``L_mix`` with :func:`mixing_loss`,
  masking padding with the source or target lengths; :func:`pause_collection`
  stops recording inside beam search.

**Not Procedure 1 parameters.** With ``eps > 0`` every domain's weights get a
gradient from every word, so mixed weights are trained jointly: they are not in
:meth:`~ldr_opennmt.layers.DomainSpecificLayer.domain_weights` (which is empty
here), the optimizer's absent-domain skipping never touches them, and
regularization covers them. :class:`MixedDense` is a ``DomainSpecificLayer`` only to
declare its regions (one per domain, which the multi-domain Runner records so that
the domain order of a trained model is checked) and to refuse a fold: the
proportions depend on the input, so no plain Transformer equals the model for a
domain (CTranslate2 exports are refused; the SavedModel serves it).

**Per-domain storage.** :class:`MixedDense` does not keep its copies as
:class:`~ldr_opennmt.layers.per_domain.DomainCopies` (one variable per region, a
general copy for ``generic``): every word weighs all copies, so there is no general
copy to select, the copies are not Procedure 1 regions, and one ``kernel``
``[n, k, m]`` lets one matmul compute every domain's projection
(:func:`~ldr_opennmt.layers.per_domain.mixed_matmul`, the proportion-weighted variant
of :func:`~ldr_opennmt.layers.per_domain.domain_matmul`); the checkpoint names
``kernel``/``bias`` of trained models stay those.
"""

import collections
import contextlib
import math

import opennmt
import tensorflow as tf

from ldr_opennmt.errors import UserError
from ldr_opennmt.layers.behaviours import Behaviour, check_installable, install_behaviour
from ldr_opennmt.layers.context import DomainSpecificLayer, Recorder, innermost_frame, push_frame
from ldr_opennmt.layers.per_domain import fresh_initializer, mixed_matmul
from ldr_opennmt.layers.replace import replace_dense

#: The side of a proportion record: source positions (encoder layers, and the decoder's
#: proportions of the encoder output) or target positions (decoder layers).
SOURCE = "source"
TARGET = "target"

#: :class:`MixedDense` roles: mixed with the current layer's proportions, or with the
#: proportions of its own input (the encoder output, for cross-attention K and V).
LAYER = "layer"
MEMORY = "memory"

#: The paper's smoothing of the domain proportions.
DEFAULT_EPSILON = 0.05

#: What one :class:`DomainProportions` call records for ``L_mix`` and analyses.
#:
#: * ``label``: the proportion layer's label (``encoder/layer_0``, ``decoder/layer_1``,
#:   ``decoder/layer_1/memory`` for the decoder's proportions of the encoder output);
#: * ``side``: :data:`SOURCE` or :data:`TARGET`, the positions the time axis indexes;
#: * ``logits``: ``R x``, float32 ``[batch, time, k]``;
#: * ``proportions``: ``D(x)``, float32 ``[batch, time, k]`` (not cut);
#: * ``epsilon``: the smoothing.
ProportionRecord = collections.namedtuple(
    "ProportionRecord", ["label", "side", "logits", "proportions", "epsilon"]
)

#: The frame kind of :func:`mixing_scope` on the domain context's stack.
MIXING = "mixing"

#: The proportions computed during a forward pass (see :func:`collect_proportions`).
_PROPORTIONS = Recorder()


def validate_epsilon(epsilon):
    """Returns :obj:`epsilon` as a float, checked in ``[0, 1]``.

    Raises:
      UserError: if it is not a number in ``[0, 1]``.
    """
    if isinstance(epsilon, bool) or not isinstance(epsilon, (int, float)):
        raise UserError("epsilon must be a number in [0, 1], got %r" % (epsilon,))
    if not 0 <= epsilon <= 1:
        raise UserError("epsilon must be in [0, 1], got %s" % epsilon)
    return float(epsilon)


def validate_num_domains(num_domains):
    """Returns :obj:`num_domains`, checked positive.

    Raises:
      UserError: if it is not a positive integer.
    """
    if isinstance(num_domains, bool) or not isinstance(num_domains, int) or num_domains < 1:
        raise UserError("domain mixing needs at least one domain, got %r" % (num_domains,))
    return num_domains


def log_proportions(logits, epsilon):
    """``log D`` from the logits ``R x``, computed stably (no ``log(0)`` when ``eps = 0``).

    Args:
      logits: A float tensor ``[..., k]``.
      epsilon: The smoothing, a Python number in ``[0, 1]``.

    Returns:
      ``log((1 - eps) softmax(logits) + eps / k)``, same shape and dtype.
    """
    num_domains = logits.shape[-1]
    log_softmax = tf.nn.log_softmax(logits)
    if epsilon == 0:
        return log_softmax
    uniform = math.log(epsilon / num_domains)
    if epsilon == 1:
        return tf.zeros_like(logits) + uniform
    a = log_softmax + math.log(1 - epsilon)
    # logaddexp(a, uniform)
    return tf.maximum(a, uniform) + tf.math.log1p(tf.exp(-tf.abs(a - uniform)))


def collect_proportions():
    """Records the proportions computed while it is open.

    .. code-block:: python

        with collect_proportions() as records:
            ...  # forward pass
        # records: the ProportionRecord of every DomainProportions call, in order

    Inside ``tf.function`` the records hold the traced tensors: use them in the same
    function.
    """
    return _PROPORTIONS.collect()


def pause_collection():
    """Nothing is recorded while it is open (e.g. inside beam search's loop)."""
    return _PROPORTIONS.pause()


def _record(record):
    _PROPORTIONS.record(record)


class _LayerMixing:
    """The proportions of the mixed layer being called."""

    def __init__(self, proportions, proportion_layer):
        self.proportions = proportions
        self._proportion_layer = proportion_layer
        self._memory = []

    def memory_proportions(self, memory):
        """The layer's proportions of :obj:`memory` (computed once per layer call)."""
        for tensor, proportions in self._memory:
            if tensor is memory:
                return proportions
        if self._proportion_layer is None:
            raise RuntimeError("this mixing scope has no proportion layer for the memory")
        proportions = self._proportion_layer(memory, side=SOURCE, memory=True)
        self._memory.append((memory, proportions))
        return proportions


@contextlib.contextmanager
def mixing_scope(proportions, proportion_layer=None):
    """Binds the proportions that the :class:`MixedDense` layers called inside use.

    Args:
      proportions: The mixing weights ``[..., k]`` of the inputs of
        :data:`LAYER`-role projections (as :class:`DomainProportions` returns them).
      proportion_layer: The :class:`DomainProportions` that :data:`MEMORY`-role
        projections apply to their own input (cross-attention keys and values).
    """
    with push_frame(MIXING, _LayerMixing(proportions, proportion_layer)):
        yield


def current_mixing():
    """The innermost mixing scope.

    Raises:
      RuntimeError: if no scope is active.
    """
    scope = innermost_frame(MIXING, None)
    if scope is None:
        raise RuntimeError(
            "A mixed layer was called outside a mixing scope: call it through a layer "
            "prepared by ldr_opennmt.layers.mixing.install, or inside mixing_scope(proportions)"
        )
    return scope


def mixing_loss(records, domain, lengths):
    """The cross-entropy of every word's proportions against its sentence's domain.

    Padding positions and generic sentences (``domain`` -1) are left out.

    Args:
      records: :class:`ProportionRecord` s (rank 3: ``[batch, time, k]``).
      domain: The domain id of each sentence, int32 ``[batch]``.
      lengths: A dict mapping :data:`SOURCE` and :data:`TARGET` to the lengths
        ``[batch]`` of the sequences the records of that side index.

    Returns:
      ``(total, count)``: the summed cross-entropy ``-log D_J(x)`` over every
      (word, record) pair of a labelled sentence, and the number of pairs (float32
      scalars). ``L_mix = total / count`` (0 without any pair).
    """
    total = tf.constant(0, tf.float32)
    count = tf.constant(0, tf.float32)
    domain = tf.convert_to_tensor(domain, tf.int32)
    labelled = tf.cast(domain >= 0, tf.float32)
    for record in records:
        logits = tf.cast(record.logits, tf.float32)
        log_p = log_proportions(logits, record.epsilon)
        target = tf.one_hot(tf.maximum(domain, 0), log_p.shape[-1], dtype=tf.float32)
        cross_entropy = -tf.reduce_sum(log_p * target[:, tf.newaxis, :], axis=-1)
        mask = tf.sequence_mask(lengths[record.side], maxlen=tf.shape(log_p)[1], dtype=tf.float32)
        mask *= labelled[:, tf.newaxis]
        total += tf.reduce_sum(cross_entropy * mask)
        count += tf.reduce_sum(mask)
    return total, count


#: ``sum_j proportions_j (inputs W_j + b_j)``: see
#: :func:`ldr_opennmt.layers.per_domain.mixed_matmul`.
mix = mixed_matmul


def _per_domain_initializer(initializer, axis):
    """Initializes each domain's slice (along :obj:`axis`) as a separate weight."""

    def _initializer(shape, dtype=None, **kwargs):
        shape = list(shape)
        sub_shape = shape[:axis] + shape[axis + 1 :]
        return tf.stack(
            [fresh_initializer(initializer)(sub_shape, dtype=dtype) for _ in range(shape[axis])],
            axis=axis,
        )

    return _initializer


class DomainProportions(tf.keras.layers.Layer):
    """``D(x) = (1 - eps) softmax(R x) + eps / k`` (section 3.1), one per mixed layer.

    The only variable is ``kernel`` ``[d, k]`` (``R`` transposed). The logits are
    computed in the compute dtype and the softmax in float32. A call returns the
    mixing weights in the compute dtype (``stop_gradient(D)`` with the cut) and,
    while a :func:`collect_proportions` is open, records the logits and ``D``.
    """

    def __init__(self, epsilon=DEFAULT_EPSILON, cut=True, num_domains=None, label=None, **kwargs):
        """Initializes the layer.

        Args:
          epsilon: The smoothing ``eps`` in ``[0, 1]``.
          cut: Apply the gradient cut (``stop_gradient`` on the input ``x`` and on
            the returned weights).
          num_domains: ``k`` (or :meth:`set_num_domains` before build).
          label: The name of the records (default: the layer name).
          **kwargs: Additional layer keyword arguments.

        Raises:
          UserError: if :obj:`epsilon` is not in ``[0, 1]``.
        """
        super().__init__(**kwargs)
        self.epsilon = validate_epsilon(epsilon)
        self.cut = bool(cut)
        self.num_domains = None
        self.label = label
        if num_domains is not None:
            self.set_num_domains(num_domains)

    def set_num_domains(self, num_domains):
        """Sets ``k``; before the layer is built."""
        num_domains = validate_num_domains(num_domains)
        if self.built and num_domains != self.num_domains:
            raise ValueError("%s is built with %d domains" % (self.name, self.num_domains))
        self.num_domains = num_domains

    def build(self, input_shape):
        if self.num_domains is None:
            raise ValueError("%s: set the number of domains before build" % self.name)
        self.kernel = self.add_weight("kernel", [input_shape[-1], self.num_domains])
        super().build(input_shape)

    def call(self, inputs, side=SOURCE, memory=False):
        """Computes the mixing weights of :obj:`inputs`.

        Args:
          inputs: ``[..., d]``.
          side: The side of the positions (:data:`SOURCE` or :data:`TARGET`), recorded.
          memory: Whether :obj:`inputs` is the encoder output seen from a decoder layer
            (recorded as ``<label>/memory``).

        Returns:
          The weights ``[..., k]`` in the compute dtype.
        """
        x = tf.stop_gradient(inputs) if self.cut else inputs
        logits = tf.tensordot(x, tf.cast(self.kernel, x.dtype), axes=1)
        logits = tf.cast(logits, tf.float32)
        proportions = (1 - self.epsilon) * tf.nn.softmax(logits) + self.epsilon / self.num_domains
        label = self.label or self.name
        _record(
            ProportionRecord(
                label + "/memory" if memory else label, side, logits, proportions, self.epsilon
            )
        )
        weights = tf.stop_gradient(proportions) if self.cut else proportions
        return tf.cast(weights, self.compute_dtype)


class MixedDense(tf.keras.layers.Layer, DomainSpecificLayer):
    """A linear layer with one weight copy per domain, mixed per word (section 3.2).

    ``y = activation(sum_j D_j (x W_j + b_j))`` with ``kernel`` ``[n, k, m]``
    (``kernel[:, j, :]`` is ``W_j``) and ``bias`` ``[k, m]``. ``D`` comes from the
    current :func:`mixing_scope`: the layer's proportions (:data:`LAYER` role), or
    the proportions of this layer's own input (:data:`MEMORY` role: cross-attention
    keys and values on the encoder output), unless :meth:`call` gets them.

    It exposes ``units``, ``use_bias``, ``activation`` like ``opennmt.layers.Dense``.
    Each domain's copy is initialized as a separate stock Dense would be.
    """

    def __init__(
        self,
        units,
        use_bias=True,
        activation=None,
        role=LAYER,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        num_domains=None,
        **kwargs
    ):
        """Initializes the layer.

        Args:
          units: The output size ``m``.
          use_bias: Whether every copy has a bias.
          activation: The activation applied after mixing (the FFN's ReLU).
          role: :data:`LAYER` or :data:`MEMORY`.
          kernel_initializer: The initializer of each domain's kernel ``[n, m]``.
          bias_initializer: The initializer of each domain's bias ``[m]``.
          num_domains: ``k`` (or :meth:`set_num_domains` before build).
          **kwargs: Additional layer keyword arguments.
        """
        super().__init__(**kwargs)
        if role not in (LAYER, MEMORY):
            raise ValueError("role must be %r or %r, got %r" % (LAYER, MEMORY, role))
        self.units = units
        self.use_bias = use_bias
        self.activation = tf.keras.activations.get(activation)
        self.role = role
        self.kernel_initializer = kernel_initializer
        self.bias_initializer = bias_initializer
        self.num_domains = None
        self.num_regions = None
        self.kernel = None
        self.bias = None
        if num_domains is not None:
            self.set_num_domains(num_domains)

    def set_num_domains(self, num_domains):
        """Sets ``k`` (also the layer's regions); before the layer is built."""
        num_domains = validate_num_domains(num_domains)
        if self.built and num_domains != self.num_domains:
            raise ValueError("%s is built with %d domains" % (self.name, self.num_domains))
        self.num_domains = num_domains
        self.num_regions = num_domains

    def build(self, input_shape):
        if self.num_domains is None:
            raise ValueError("%s: set the number of domains before build" % self.name)
        k = self.num_domains
        self.kernel = self.add_weight(
            "kernel",
            [input_shape[-1], k, self.units],
            initializer=_per_domain_initializer(self.kernel_initializer, axis=1),
        )
        if self.use_bias:
            self.bias = self.add_weight(
                "bias",
                [k, self.units],
                initializer=_per_domain_initializer(self.bias_initializer, axis=0),
            )
        super().build(input_shape)

    def call(self, inputs, proportions=None):
        """Mixes the domain projections of :obj:`inputs`.

        Args:
          inputs: ``[..., n]``.
          proportions: The weights ``[..., k]``; by default from the mixing scope.
        """
        if proportions is None:
            scope = current_mixing()
            if self.role == MEMORY:
                proportions = scope.memory_proportions(inputs)
            else:
                proportions = scope.proportions
        dtype = self.compute_dtype
        bias = tf.cast(self.bias, dtype) if self.use_bias else None
        outputs = mixed_matmul(inputs, tf.cast(self.kernel, dtype), bias, proportions)
        if self.activation is not None:
            outputs = self.activation(outputs)
        return outputs

    def domain_weights(self):
        """Empty: mixed weights are trained jointly, not as Procedure 1 regions."""
        return {}

    def domain_kernel(self, domain_id):
        """Domain :obj:`domain_id`'s ``(kernel [n, m], bias [m] or None)``."""
        bias = self.bias[domain_id] if self.use_bias else None
        return self.kernel[:, domain_id, :], bias

    def fold(self, domain_id):
        """Refused: the mixing weights depend on the input, no plain layer equals it."""
        raise UserError(
            "%s mixes its per-domain weights with input-dependent domain proportions: it "
            "cannot be folded for one domain (export a SavedModel instead)" % self.name
        )


class MixingLayer(Behaviour):
    """Behaviour of a stock Transformer layer whose projections are mixed: its ``call``
    computes the layer's proportions and runs the stock ``call`` in a mixing scope.

    The layer has a ``domain_proportions`` sublayer and a ``mixing_side``
    (:func:`install` sets both).
    """

    def _layer_mixing(self, inputs):
        norm = self.self_attention.input_layer_norm
        # The tensor the self-attention projections read (pre-norm: the layer norm of
        # the layer input; post-norm: the input).
        x = norm(inputs) if norm is not None else inputs
        proportions = self.domain_proportions(x, side=self.mixing_side)
        return mixing_scope(proportions, self.domain_proportions)


class MixingEncoderLayer(MixingLayer):
    """:class:`MixingLayer` of an encoder layer."""

    applies_to = (opennmt.layers.SelfAttentionEncoderLayer,)

    def call(self, x, mask=None, training=None):
        with self._layer_mixing(x):
            return super().call(x, mask=mask, training=training)


class MixingDecoderLayer(MixingLayer):
    """:class:`MixingLayer` of a decoder layer."""

    applies_to = (opennmt.layers.SelfAttentionDecoderLayer,)

    def call(self, inputs, mask=None, memory=None, memory_mask=None, cache=None, training=None):
        with self._layer_mixing(inputs):
            return super().call(
                inputs,
                mask=mask,
                memory=memory,
                memory_mask=memory_mask,
                cache=cache,
                training=training,
            )


def _replace(parent, attribute, role, num_domains):
    """Replaces the stock Dense ``parent.<attribute>`` by a :class:`MixedDense`."""
    replace_dense(parent, attribute, MixedDense, "mixed", role=role, num_domains=num_domains)


def install(layer_stack, num_domains=None, epsilon=DEFAULT_EPSILON, cut=True, name=None):
    """Makes every layer of a stock self-attention stack a domain-mixing layer.

    After construction and before build, for each layer of :obj:`layer_stack`:

    * a :class:`DomainProportions` sublayer ``domain_proportions`` (one ``R`` per
      layer), computed on the self-attention's (normalized) input;
    * :class:`MixedDense` Q, K, V and output projections in the self-attention; in the
      decoder's cross-attention, mixed Q and output projection with the layer's
      proportions and mixed K, V with the proportions of the encoder output; both FFN
      linears mixed (the first before its ReLU) with the layer's proportions;
    * the layer gets the behaviour :class:`MixingEncoderLayer` or
      :class:`MixingDecoderLayer`, whose ``call`` opens the mixing scope around the
      stock ``call``.

    The layer norms and everything else stay stock.

    Args:
      layer_stack: An unbuilt ``opennmt.encoders.SelfAttentionEncoder`` or
        ``opennmt.decoders.SelfAttentionDecoder``.
      num_domains: ``k``, or ``None`` to set it later with :func:`set_num_domains`
        (before build).
      epsilon: The smoothing of the proportions, in ``[0, 1]``.
      cut: Apply the gradient cut.
      name: The prefix of the record labels (default ``encoder`` or ``decoder``).

    Returns:
      The installed :class:`DomainProportions` layers, in layer order.

    Raises:
      UserError: on an :obj:`epsilon` outside ``[0, 1]``, or a stack that is not a
        stock, unbuilt self-attention encoder or decoder.
    """
    epsilon = validate_epsilon(epsilon)
    if num_domains is not None:
        validate_num_domains(num_domains)
    if isinstance(layer_stack, opennmt.encoders.SelfAttentionEncoder):
        side, behaviour = SOURCE, MixingEncoderLayer
    elif isinstance(layer_stack, opennmt.decoders.SelfAttentionDecoder):
        side, behaviour = TARGET, MixingDecoderLayer
    else:
        raise UserError(
            "domain mixing installs into a SelfAttentionEncoder or SelfAttentionDecoder, not %s"
            % type(layer_stack).__name__
        )
    if layer_stack.built:
        raise UserError("install domain mixing before the %s is built" % layer_stack.name)
    if name is None:
        name = "encoder" if side == SOURCE else "decoder"
    for layer in layer_stack.layers:
        check_installable(layer, behaviour)  # Stock layers (once), before any change.
    installed = []
    for index, layer in enumerate(layer_stack.layers):
        attentions = [layer.self_attention.layer]
        # Section 3.2 of the paper mixes W^O "in the same way" as W^Q, W^K, W^V: the output
        # projection reads the attention context at the layer's own positions (the query
        # positions, in the cross-attention too), so it takes the layer's proportions.
        for attribute in ("linear_queries", "linear_keys", "linear_values", "linear_output"):
            _replace(attentions[0], attribute, LAYER, num_domains)
        for wrapper in getattr(layer, "attention", []):
            _replace(wrapper.layer, "linear_queries", LAYER, num_domains)
            _replace(wrapper.layer, "linear_keys", MEMORY, num_domains)
            _replace(wrapper.layer, "linear_values", MEMORY, num_domains)
            _replace(wrapper.layer, "linear_output", LAYER, num_domains)
        for attribute in ("inner", "outer"):
            _replace(layer.ffn.layer, attribute, LAYER, num_domains)
        layer.domain_proportions = DomainProportions(
            epsilon=epsilon,
            cut=cut,
            num_domains=num_domains,
            label="%s/layer_%d" % (name, index),
        )
        layer.mixing_side = side
        install_behaviour(layer, behaviour)
        installed.append(layer.domain_proportions)
    return installed


def proportion_layers(layer_stack):
    """The :class:`DomainProportions` layers of a stack prepared by :func:`install`."""
    return [
        layer.domain_proportions
        for layer in getattr(layer_stack, "layers", [])
        if isinstance(layer, MixingLayer)
    ]


def mixed_layers(layer):
    """The :class:`MixedDense` layers inside :obj:`layer` (any Keras layer)."""
    return [m for m in layer.submodules if isinstance(m, MixedDense)]


def set_num_domains(layer_stack, num_domains):
    """Sets ``k`` on every mixing layer of :obj:`layer_stack` (before build)."""
    for layer in proportion_layers(layer_stack) + mixed_layers(layer_stack):
        layer.set_num_domains(num_domains)
