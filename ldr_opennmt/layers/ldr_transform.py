"""The LDR transform after every layer, as the authors' released code builds LDR.

The LDR paper (Pham et al., IWSLT 2019, eq. 2) fuses the generic and the domain region of
a word once, at the source embedding (:class:`~ldr_opennmt.layers.LDREmbedder`). The
authors' released TF1 code (minhquangpham/LDR, ``cell/self_attention_encoder_LDR.py`` and
``cell/self_attention_decoder_LDR.py``, function ``transform``) does more: the encoder and
the decoder take ``[e_g(v); regions(v)]`` (the output of a
:class:`~ldr_opennmt.layers.ldr.LayerwiseLDREmbedder`), run the stock Transformer on the
generic part, and add

    h <- h + R_l [0 .. e_k(v) .. 0]

(``R_l``: a bias-free dense layer of the model's size, one per place) after the input
(scaled, position-encoded and dropped out: ``ldr_layer_0``) and after every layer
(``layer_l/ldr_layer_l``), ``v`` being the word at that position (the source word in the
encoder, the target input word in the decoder). Only the sentence's own region is
non-zero, so the rows of ``R_l`` that read the other regions get exactly zero gradient:
each :class:`LDRTransform` keeps them as one ``domain_<k>_kernel`` per region (a domain
weight), and the ``generic`` label adds nothing.

:func:`install` puts the transforms into a stock OpenNMT-tf ``SelfAttentionEncoder`` or
``SelfAttentionDecoder`` with behaviours (:mod:`ldr_opennmt.layers.behaviours`): the stack
splits the regions off its inputs and binds them in a frame (``push_frame``) around its
stock code; each layer reads them there and applies its transforms. The regions travel
with the embedded inputs, so beam search (one word per step, its domain from the domain
scope), ensembles of views and the SavedModel need nothing more; the stock layers keep
their variables and caches.

A word-dependent vector added after every layer is not part of a plain Transformer: a
model with these transforms does not fold into CTranslate2 (its SavedModel serves it).
"""

import math

import opennmt
import tensorflow as tf

from ldr_opennmt.errors import UserError
from ldr_opennmt.layers.behaviours import Behaviour, check_installable, install_behaviour
from ldr_opennmt.layers.context import DomainSpecificLayer, innermost_frame, push_frame
from ldr_opennmt.layers.ldr import LAYERWISE_FOLD_REFUSAL

#: The frame kind of the masked domain regions of the words a stack is running on.
REGIONS = "ldr.regions"


class LDRTransform(tf.keras.layers.Layer, DomainSpecificLayer):
    """``h + R [0 .. e_k(v) .. 0]``: one bias-free dense layer over the masked regions.

    Weights: ``domain_<k>_kernel`` ``[domain_region_size, units]`` per region ``k``. They
    start as the released code's one dense kernel ``[regions x cells, units]`` does
    (Glorot uniform over that whole kernel), except that a reserved region's kernel starts
    at zero when its embedding does not (so that its output is the generic one until a
    domain trains it).

    Args:
      domain_region_size: The cells of each domain region.
      zero_domain_regions: Whether the embedder's regions start at zero (then reserved
        regions' kernels must not).
      **kwargs: Keras layer arguments.
    """

    def __init__(self, domain_region_size, zero_domain_regions=False, **kwargs):
        super().__init__(**kwargs)
        self.domain_region_size = domain_region_size
        self.zero_domain_regions = bool(zero_domain_regions)
        self.num_regions = None
        self.num_domains = None
        self.domain_kernels = []

    def set_num_regions(self, num_regions, num_domains=None):
        """Sets the number of regions (before build): the embedder's.

        Args:
          num_regions: The declared domains plus the reserved regions.
          num_domains: The declared domains (the regions after them are reserved);
            default every region.

        Raises:
          UserError: if the layer is built with another count.
        """
        if self.built and num_regions != self.num_regions:
            raise UserError(
                "%s is built with %d domain regions: cannot set %d"
                % (self.name, self.num_regions, num_regions)
            )
        self.num_regions = num_regions
        self.num_domains = num_regions if num_domains is None else num_domains

    def build(self, input_shape):
        units, cells = int(input_shape[-1]), self.domain_region_size
        limit = math.sqrt(6.0 / (self.num_regions * cells + units))
        self.domain_kernels = []
        for k in range(self.num_regions):
            zero = k >= self.num_domains and not self.zero_domain_regions
            initializer = (
                tf.keras.initializers.Zeros()
                if zero
                else tf.keras.initializers.RandomUniform(-limit, limit)
            )
            self.domain_kernels.append(
                self.add_domain_weight(k, "kernel", [cells, units], initializer=initializer)
            )
        super().build(input_shape)

    def call(self, inputs, regions):
        """Adds the transform of the masked regions ``[..., regions x cells]`` to
        ``inputs`` ``[..., units]``."""
        kernel = tf.concat(self.domain_kernels, axis=0)
        return inputs + tf.tensordot(regions, kernel, axes=1)

    def fold(self, domain_id):
        raise UserError(LAYERWISE_FOLD_REFUSAL)


def split_regions(inputs, units):
    """``(words, regions)``: the first :obj:`units` cells of the embedded inputs, the rest."""
    return inputs[..., :units], inputs[..., units:]


class LDREncoder(Behaviour):
    """Behaviour of a stock encoder: runs on the generic part of its inputs, the masked
    domain regions bound for its layers."""

    applies_to = (opennmt.encoders.SelfAttentionEncoder,)

    def call(self, inputs, sequence_length=None, training=None):
        inputs, regions = split_regions(inputs, self.num_units)
        with push_frame(REGIONS, regions):
            return super().call(inputs, sequence_length=sequence_length, training=training)


class LDRDecoder(Behaviour):
    """Behaviour of a stock decoder: as :class:`LDREncoder`, around the code that a
    training pass and each decoding step run (``_run``)."""

    applies_to = (opennmt.decoders.SelfAttentionDecoder,)

    def _run(self, inputs, **kwargs):
        inputs, regions = split_regions(inputs, self.num_units)
        with push_frame(REGIONS, regions):
            return super()._run(inputs, **kwargs)


def _layer_inputs(layer, inputs):
    """``(inputs, regions)``: a layer's inputs, after the input transform in the first
    layer, and the regions bound by its stack."""
    regions = innermost_frame(REGIONS)
    if layer.ldr_input_transform is not None:
        inputs = layer.ldr_input_transform(inputs, regions)
    return inputs, regions


class LDREncoderLayer(Behaviour):
    """Behaviour of a stock encoder layer: the LDR transform after its output (and, in
    the first layer, before its input)."""

    applies_to = (opennmt.layers.SelfAttentionEncoderLayer,)

    def call(self, x, mask=None, training=None):
        x, regions = _layer_inputs(self, x)
        outputs = super().call(x, mask=mask, training=training)
        return self.ldr_transform(outputs, regions)


class LDRDecoderLayer(Behaviour):
    """Behaviour of a stock decoder layer: as :class:`LDREncoderLayer`."""

    applies_to = (opennmt.layers.SelfAttentionDecoderLayer,)

    def call(self, inputs, mask=None, memory=None, memory_mask=None, cache=None, training=None):
        inputs, regions = _layer_inputs(self, inputs)
        outputs, cache, attention = super().call(
            inputs,
            mask=mask,
            memory=memory,
            memory_mask=memory_mask,
            cache=cache,
            training=training,
        )
        return self.ldr_transform(outputs, regions), cache, attention


def install(layer_stack, domain_region_size, zero_domain_regions=False):
    """Puts the LDR transforms into a stock self-attention stack.

    Args:
      layer_stack: An unbuilt ``opennmt.encoders.SelfAttentionEncoder`` or
        ``opennmt.decoders.SelfAttentionDecoder`` whose layers are stock, fed by a
        :class:`~ldr_opennmt.layers.ldr.LayerwiseLDREmbedder` of the stack's size.
      domain_region_size: The embedder's region size.
      zero_domain_regions: Whether the embedder's regions start at zero.

    Returns:
      The installed :class:`LDRTransform` layers: after the input, then after each layer.

    Raises:
      UserError: on a stack that is not a stock self-attention encoder or decoder, or
        one that is built.
    """
    if isinstance(layer_stack, opennmt.encoders.SelfAttentionEncoder):
        stack_behaviour, layer_behaviour = LDREncoder, LDREncoderLayer
    elif isinstance(layer_stack, opennmt.decoders.SelfAttentionDecoder):
        stack_behaviour, layer_behaviour = LDRDecoder, LDRDecoderLayer
    else:
        raise UserError(
            "the LDR transform after every layer installs into a SelfAttentionEncoder or "
            "SelfAttentionDecoder, not %s" % type(layer_stack).__name__
        )
    check_installable(layer_stack, stack_behaviour)
    for layer in layer_stack.layers:
        check_installable(layer, layer_behaviour)  # Stock layers (once), before any change.

    def _new(name):
        return LDRTransform(domain_region_size, zero_domain_regions, name=name)

    transforms = []
    for i, layer in enumerate(layer_stack.layers):
        layer.ldr_input_transform = _new("ldr_input") if i == 0 else None
        layer.ldr_transform = _new("ldr_layer_%d" % i)
        transforms += [t for t in (layer.ldr_input_transform, layer.ldr_transform) if t]
        install_behaviour(layer, layer_behaviour)
    install_behaviour(layer_stack, stack_behaviour)
    return transforms


def transforms(layer_stack):
    """The :class:`LDRTransform` layers of a stack prepared by :func:`install`."""
    return [m for m in layer_stack.submodules if isinstance(m, LDRTransform)]
