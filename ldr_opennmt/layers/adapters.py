"""Residual adapters (Bapna and Firat, 2019): a per-domain bottleneck after every layer.

The baseline the Factorized Transformer paper compares with (its strongest, Table 2):
after every encoder and decoder layer of a trained Transformer, a small block of the
sentence's domain,

    a_d(x) = x + W_d^up ReLU(W_d^down LN_d(x) + b_d^down) + b_d^up

(``LN_d``: a layer normalization with the domain's own scale and offset; inner size
configurable, 2048 in the Factorized paper's comparison). The ``generic`` label means no
adapter: the layer's output is passed on unchanged, so generic translates exactly like
the base model.

:func:`install` puts a :class:`ResidualAdapter` in every layer of a stock OpenNMT-tf
``SelfAttentionEncoder``/``SelfAttentionDecoder`` (an ``adapter`` sublayer, and a behaviour,
:class:`AdaptedEncoderLayer` or :class:`AdaptedDecoderLayer`, whose ``call`` applies it to
the stock layer's output; see :mod:`ldr_opennmt.layers.behaviours`): the stock variables keep their
checkpoint paths, so a trained Transformer (the Mixed baseline) restores into the model
and its adapters are the only new variables.

**Initialization.** The up-projection (kernel and bias) starts at zero, so every adapter
starts as the identity and adapter training starts from the base model's translations
(the original publication leaves the initialization open; a zero up-projection is the
near-identity start of the adapter literature). The down-projection is Glorot-uniform,
the layer norm 1/0.

**Training.** Every adapter weight is a domain weight
(:meth:`~ldr_opennmt.layers.context.DomainSpecificLayer.add_domain_weight`): with the
model's ``domains`` training mode the shared (base) parameters are frozen and each
domain's adapters learn from that domain's sentences only (an adapter of a domain absent
from a step gets an exact zero gradient, and the optimizer skips its update).

**Per-domain storage and efficiency.** The adapter is a
:class:`~ldr_opennmt.layers.per_domain.DomainCopies` layer whose general copies are
constants (``generic_value``: 0 for the projections, 1 and 0 for the layer norm's scale
and offset), so ``generic`` is exactly the identity and no variable is added beside the
regions. Both projections go through
:meth:`~ldr_opennmt.layers.per_domain.DomainCopies.project` (the positions partitioned
by domain in training, one kernel for a one-domain batch in inference, every copy under
XLA: :func:`~ldr_opennmt.layers.per_domain.domain_matmul`). Only the layer norm's scale
and offset are gathered per sentence
(:meth:`~ldr_opennmt.layers.per_domain.DomainCopies.per_sentence`: vectors, not
matrices).

A residual adapter is not linear: it cannot be folded into a plain Transformer, so the
CTranslate2 export refuses it (:meth:`ResidualAdapter.fold`); the SavedModel serves it.
"""

import opennmt
import tensorflow as tf

from ldr_opennmt.errors import UserError
from ldr_opennmt.layers.behaviours import Behaviour, check_installable, install_behaviour
from ldr_opennmt.layers.per_domain import DomainCopies

#: The epsilon of OpenNMT-tf's ``LayerNorm`` (Keras' ``LayerNormalization`` default).
LAYER_NORM_EPSILON = 1e-3


def validate_inner_dim(inner_dim):
    """Returns :obj:`inner_dim` if it is a positive integer.

    Raises:
      UserError: otherwise.
    """
    if isinstance(inner_dim, bool) or not isinstance(inner_dim, int) or inner_dim <= 0:
        raise UserError("the residual adapters' inner size must be > 0, got %r" % (inner_dim,))
    return inner_dim


class ResidualAdapter(tf.keras.layers.Layer, DomainCopies):
    """One residual adapter per domain region, applied to each sentence's own.

    Weights, per region ``k``: ``domain_<k>_gamma``, ``domain_<k>_beta`` (the layer
    norm), ``domain_<k>_down_kernel``, ``domain_<k>_down_bias``, ``domain_<k>_up_kernel``
    and ``domain_<k>_up_bias``; each region is initialized on its own. ``generic``
    selects constant general copies that make the adapter the identity.

    Args:
      inner_dim: The bottleneck size.
      num_regions: The number of domain regions, or ``None`` to set it later with
        :meth:`set_num_regions` (before build).
      **kwargs: Keras layer arguments.
    """

    def __init__(self, inner_dim, num_regions=None, **kwargs):
        super().__init__(**kwargs)
        self.inner_dim = validate_inner_dim(inner_dim)
        self.init_copies(num_regions)

    def build(self, input_shape):
        depth = input_shape[-1]
        zeros, ones = tf.keras.initializers.Zeros(), tf.keras.initializers.Ones()
        specs = (
            ("gamma", [depth], ones, 1),
            ("beta", [depth], zeros, 0),
            ("down_kernel", [depth, self.inner_dim], "glorot_uniform", 0),
            ("down_bias", [self.inner_dim], zeros, 0),
            ("up_kernel", [self.inner_dim, depth], zeros, 0),
            ("up_bias", [depth], zeros, 0),
        )
        for name, shape, initializer, generic_value in specs:
            self.add_copies(name, shape, initializer, generic_value=generic_value)
        super().build(input_shape)

    def call(self, inputs, training=None):
        """Applies each sentence's adapter (``generic``: none) to ``[batch, ..., depth]``."""
        rank = inputs.shape.rank
        mean, variance = tf.nn.moments(inputs, axes=[-1], keepdims=True)
        normalized = (inputs - mean) * tf.math.rsqrt(variance + LAYER_NORM_EPSILON)
        normalized = normalized * self.per_sentence("gamma", rank)
        normalized += self.per_sentence("beta", rank)
        hidden = tf.nn.relu(self.project(normalized, "down_kernel", "down_bias", training=training))
        delta = self.project(hidden, "up_kernel", "up_bias", training=training)
        return inputs + delta

    def fold(self, domain_id):
        raise UserError(
            "residual adapters are not linear (a layer norm and a ReLU inside a residual "
            "block): they cannot be folded into a plain Transformer for CTranslate2 (export a "
            "SavedModel instead)"
        )


class AdaptedEncoderLayer(Behaviour):
    """Behaviour of a stock encoder layer: its output goes through its ``adapter``."""

    applies_to = (opennmt.layers.SelfAttentionEncoderLayer,)

    def call(self, x, mask=None, training=None):
        outputs = super().call(x, mask=mask, training=training)
        return self.adapter(outputs, training=training)


class AdaptedDecoderLayer(Behaviour):
    """Behaviour of a stock decoder layer: its output goes through its ``adapter``."""

    applies_to = (opennmt.layers.SelfAttentionDecoderLayer,)

    def call(self, inputs, mask=None, memory=None, memory_mask=None, cache=None, training=None):
        outputs, cache, attention = super().call(
            inputs,
            mask=mask,
            memory=memory,
            memory_mask=memory_mask,
            cache=cache,
            training=training,
        )
        return self.adapter(outputs, training=training), cache, attention


def install(layer_stack, inner_dim, num_regions=None):
    """Puts a :class:`ResidualAdapter` after every layer of a stock self-attention stack.

    Args:
      layer_stack: An unbuilt ``opennmt.encoders.SelfAttentionEncoder`` or
        ``opennmt.decoders.SelfAttentionDecoder`` whose layers are stock.
      inner_dim: The adapters' bottleneck size.
      num_regions: The number of domain regions, or ``None`` to set it later
        (:func:`set_num_regions`).

    Returns:
      The installed adapters, in layer order.

    Raises:
      UserError: on a non-positive :obj:`inner_dim`, a stack that is not a stock
        self-attention encoder or decoder, or one that is built.
    """
    validate_inner_dim(inner_dim)
    if isinstance(layer_stack, opennmt.encoders.SelfAttentionEncoder):
        behaviour = AdaptedEncoderLayer
    elif isinstance(layer_stack, opennmt.decoders.SelfAttentionDecoder):
        behaviour = AdaptedDecoderLayer
    else:
        raise UserError(
            "residual adapters install into a SelfAttentionEncoder or SelfAttentionDecoder, "
            "not %s" % type(layer_stack).__name__
        )
    if layer_stack.built:
        raise UserError("install residual adapters before the %s is built" % layer_stack.name)
    for layer in layer_stack.layers:
        check_installable(layer, behaviour)  # Stock layers (once), before any change.
    adapters = []
    for layer in layer_stack.layers:
        layer.adapter = ResidualAdapter(inner_dim, num_regions=num_regions, name="adapter")
        install_behaviour(layer, behaviour)
        adapters.append(layer.adapter)
    return adapters


def adapter_layers(layer_stack):
    """The :class:`ResidualAdapter` layers of a stack prepared by :func:`install`."""
    return [m for m in layer_stack.submodules if isinstance(m, ResidualAdapter)]


def parameter_count(d_model=512, inner_dim=2048, layers=12, num_domains=5):
    """The kernel parameters of the adapters of a model (the Factorized paper's #P
    convention: biases and layer norms left out): two ``d_model x inner_dim``
    projections per layer and domain."""
    return 2 * d_model * inner_dim * layers * num_domains
