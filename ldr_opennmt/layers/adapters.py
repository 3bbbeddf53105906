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
``SelfAttentionEncoder``/``SelfAttentionDecoder`` (an ``adapter`` sublayer, and a mixin
whose ``call`` applies it to the stock layer's output): the stock variables keep their
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

**Efficiency.** Both projections go through
:func:`~ldr_opennmt.layers.factorized.domain_matmul` (the positions partitioned by domain
in training, one kernel for a one-domain batch in inference, every copy under XLA), with
an all-zero "general copy" for ``generic``. Only the layer norm's scale and offset are
gathered per sentence (vectors, not matrices).

A residual adapter is not linear: it cannot be folded into a plain Transformer, so the
CTranslate2 export refuses it (:meth:`ResidualAdapter.fold`); the SavedModel serves it.
"""

import opennmt
import tensorflow as tf

from ldr_opennmt import compat
from ldr_opennmt.errors import UserError
from ldr_opennmt.layers.context import DomainSpecificLayer, current_domain
from ldr_opennmt.layers.factorized import domain_matmul

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


class ResidualAdapter(tf.keras.layers.Layer, DomainSpecificLayer):
    """One residual adapter per domain region, applied to each sentence's own.

    Args:
      inner_dim: The bottleneck size.
      num_regions: The number of domain regions, or ``None`` to set it later with
        :meth:`set_num_regions` (before build).
      **kwargs: Keras layer arguments.
    """

    def __init__(self, inner_dim, num_regions=None, **kwargs):
        super().__init__(**kwargs)
        self.inner_dim = validate_inner_dim(inner_dim)
        self.num_regions = num_regions
        #: Set for XLA: see :func:`~ldr_opennmt.layers.factorized.domain_matmul`.
        self.branch_free = False

    def set_num_regions(self, num_regions):
        """Sets the number of domain regions (before the layer is built).

        Raises:
          UserError: if the layer is built with another count.
        """
        if self.built and num_regions != self.num_regions:
            raise UserError(
                "%s is built with %d domain regions: cannot set %d"
                % (self.name, self.num_regions, num_regions)
            )
        self.num_regions = num_regions

    def build(self, input_shape):
        if self.num_regions is None:
            raise UserError(
                "%s: the number of domain regions is not set: initialize the model (or call "
                "set_num_regions) before building it" % self.name
            )
        depth = input_shape[-1]
        zeros, ones = tf.keras.initializers.Zeros(), tf.keras.initializers.Ones()
        # Untracked: add_domain_weight tracks the variables (one checkpoint path each).
        object.__setattr__(self, "_weights_by_name", {})
        specs = (
            ("gamma", [depth], ones),
            ("beta", [depth], zeros),
            ("down_kernel", [depth, self.inner_dim], "glorot_uniform"),
            ("down_bias", [self.inner_dim], zeros),
            ("up_kernel", [self.inner_dim, depth], zeros),
            ("up_bias", [depth], zeros),
        )
        for name, shape, initializer in specs:
            self._weights_by_name[name] = [
                self.add_domain_weight(
                    region, name, shape, initializer=tf.keras.initializers.get(initializer)
                )
                for region in range(self.num_regions)
            ]
        super().build(input_shape)

    def _copies(self, name, generic_value):
        """The general (generic) copy, then every region's, in the compute dtype."""
        regions = [tf.cast(v, self.compute_dtype) for v in self._weights_by_name[name]]
        return [tf.fill(tf.shape(regions[0]), tf.constant(generic_value, self.compute_dtype))] + (
            regions
        )

    def _per_sentence(self, name, generic_value, domain, rank):
        """``[batch, 1, ..., depth]``: each sentence's copy of a vector weight."""
        value = tf.gather(tf.stack(self._copies(name, generic_value)), domain + 1)
        for _ in range(rank - 2):
            value = tf.expand_dims(value, 1)
        return value

    def call(self, inputs, training=None):
        """Applies each sentence's adapter (``generic``: none) to ``[batch, ..., depth]``."""
        domain = current_domain()
        rank = inputs.shape.rank
        mean, variance = tf.nn.moments(inputs, axes=[-1], keepdims=True)
        normalized = (inputs - mean) * tf.math.rsqrt(variance + LAYER_NORM_EPSILON)
        normalized = normalized * self._per_sentence("gamma", 1, domain, rank)
        normalized += self._per_sentence("beta", 0, domain, rank)
        options = dict(branch_free=self.branch_free, training=bool(training))
        hidden = domain_matmul(
            normalized,
            self._copies("down_kernel", 0),
            self._copies("down_bias", 0),
            domain,
            **options,
        )
        hidden = tf.nn.relu(hidden)
        delta = domain_matmul(
            hidden, self._copies("up_kernel", 0), self._copies("up_bias", 0), domain, **options
        )
        return inputs + delta

    def fold(self, domain_id):
        raise UserError(
            "residual adapters are not linear (a layer norm and a ReLU inside a residual "
            "block): they cannot be folded into a plain Transformer for CTranslate2 (export a "
            "SavedModel instead)"
        )


class _AdaptedEncoderLayer:
    """Mixin of a stock encoder layer: its output goes through its ``adapter``."""

    def call(self, x, mask=None, training=None):
        outputs = super().call(x, mask=mask, training=training)
        return self.adapter(outputs, training=training)


class _AdaptedDecoderLayer:
    """Mixin of a stock decoder layer: its output goes through its ``adapter``."""

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
        layer_class, mixin = opennmt.layers.SelfAttentionEncoderLayer, _AdaptedEncoderLayer
    elif isinstance(layer_stack, opennmt.decoders.SelfAttentionDecoder):
        layer_class, mixin = opennmt.layers.SelfAttentionDecoderLayer, _AdaptedDecoderLayer
    else:
        raise UserError(
            "residual adapters install into a SelfAttentionEncoder or SelfAttentionDecoder, "
            "not %s" % type(layer_stack).__name__
        )
    if layer_stack.built:
        raise UserError("install residual adapters before the %s is built" % layer_stack.name)
    adapters = []
    for layer in layer_stack.layers:
        if type(layer) is not layer_class:
            raise UserError(
                "%s is a %s, not a stock %s: residual adapters install once, into stock layers"
                % (layer.name, type(layer).__name__, layer_class.__name__)
            )
        layer.adapter = ResidualAdapter(inner_dim, num_regions=num_regions, name="adapter")
        compat.add_mixin(layer, mixin)
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
