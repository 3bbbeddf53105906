"""The one seam through which model families put per-domain projections into
OpenNMT-tf's stock attention and feed-forward layers.

:func:`replace_dense` swaps a linear layer of an unbuilt stock layer
(``MultiHeadAttention.linear_queries``/``linear_keys``/``linear_values``/
``linear_output``, ``FeedForwardNetwork.inner``/``outer``) for a domain-aware one
with the same units and options; the stock ``call``, caches and checkpoint paths of
the surrounding layers stay OpenNMT-tf's. The Factorized Transformer
(:func:`ldr_opennmt.layers.factorized.install`) and domain mixing
(:func:`ldr_opennmt.layers.mixing.install`) both go through it.
"""

from opennmt.layers import common

from ldr_opennmt.errors import UserError


def replace_dense(parent, attribute, layer_class, family, **kwargs):
    """Replaces the stock ``opennmt.layers.Dense`` at ``parent.<attribute>``.

    Args:
      parent: The unbuilt stock layer (an attention or feed-forward layer).
      attribute: The attribute holding the ``Dense`` to replace.
      layer_class: The new layer's class, called as ``layer_class(units, **options)``
        with the stock layer's ``use_bias``, ``activation``, initializers and dtype
        policy, updated by :obj:`kwargs`.
      family: The family's name, for the error messages (e.g. ``"factorized"``).
      **kwargs: More (or overriding) constructor arguments.

    Returns:
      The new layer.

    Raises:
      UserError: if the attribute is not a stock ``Dense`` (a family is already
        installed there), or is built or shares its kernel.
    """
    stock = getattr(parent, attribute)
    if not isinstance(stock, common.Dense):
        raise UserError(
            "%s.%s is a %s, not a stock Dense: %s layers are already installed"
            % (parent.name, attribute, type(stock).__name__, family)
        )
    if stock.built or stock.weight is not None:
        raise UserError(
            "%s.%s is built or shares its kernel: install %s layers before build"
            % (parent.name, attribute, family)
        )
    options = dict(
        use_bias=stock.use_bias,
        activation=stock.activation,
        kernel_initializer=stock.kernel_initializer,
        bias_initializer=stock.bias_initializer,
        dtype=stock.dtype_policy,
    )
    options.update(kwargs)
    layer = layer_class(stock.units, **options)
    # Keras untracks the replaced layer: it was never built and leaves no variable.
    setattr(parent, attribute, layer)
    return layer


#: The linear layers of a stock attention and feed-forward layer that
#: :func:`replace_dense` may replace.
ATTENTION_SLOTS = ("linear_queries", "linear_keys", "linear_values", "linear_output")
FFN_SLOTS = ("inner", "outer")


def dense_slots(layer_stack):
    """Every replaceable linear layer of a stock self-attention stack, in a fixed order.

    Two stacks of the same shape (a multi-domain model's and the plain Transformer it
    folds into) give their slots in the same order, so zipping them pairs each
    per-domain layer with the plain ``Dense`` it becomes for one domain.

    Args:
      layer_stack: An ``opennmt.encoders.SelfAttentionEncoder`` or
        ``opennmt.decoders.SelfAttentionDecoder``.

    Returns:
      A list of ``(parent, attribute)``: ``getattr(parent, attribute)`` is the layer.
    """
    slots = []
    for layer in layer_stack.layers:
        wrappers = [layer.self_attention] + list(getattr(layer, "attention", []))
        for wrapper in wrappers:
            slots += [(wrapper.layer, attribute) for attribute in ATTENTION_SLOTS]
        slots += [(layer.ffn.layer, attribute) for attribute in FFN_SLOTS]
    return slots
