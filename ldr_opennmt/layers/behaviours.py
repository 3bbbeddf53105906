"""Behaviours: the one way to change what a stock OpenNMT-tf layer does.

OpenNMT-tf builds its encoders, decoders, their layers and the inputters itself, by
hard-coded class, with no factory hook. A method that needs such a layer to do one more
thing (open a scope around its ``call``, apply a sublayer to its output, record a value,
mask logits) declares a *behaviour*: a :class:`Behaviour` subclass, next to the layer
module that needs it, whose methods run before the stock ones and reach them with
``super()``. :func:`install_behaviour` puts it on one layer object, after construction
and before build:

.. code-block:: python

    import opennmt
    from ldr_opennmt.layers.behaviours import Behaviour, install_behaviour

    class ScaledOutput(Behaviour):  # An encoder layer's output times its output_scale.
        applies_to = (opennmt.layers.SelfAttentionEncoderLayer,)

        def call(self, x, mask=None, training=None):
            return self.output_scale * super().call(x, mask=mask, training=training)

    for layer in encoder.layers:  # an unbuilt opennmt.encoders.SelfAttentionEncoder
        layer.output_scale = 0.5
        install_behaviour(layer, ScaledOutput)

The layer keeps its variables, sublayers, names and checkpoint paths (a trained stock
model restores into it), and the stock code that surrounds it (caches, beam search,
SavedModel signatures) is unchanged. Keras traces a layer's ``call`` through its class,
so the behaviour is added to the object's class: the object gets a class made of the
behaviour and its stock class (one such class per pair). That class surgery happens
here, with three checks: the behaviour is a declared :class:`Behaviour`, the layer is
exactly one of its :attr:`Behaviour.applies_to` stock classes (so no other behaviour is
installed on it: compose two behaviours by declaring a class that inherits both), and it
is not built. Installing a behaviour that the layer already has returns it unchanged.

The package does it in one other place, for an object that is not a layer:
:func:`ldr_opennmt.upstream.ledger.add_optimizer_mixin` gives the optimizer that OpenNMT-tf's
``make_optimizer`` built (``get_optimizer``) its update-skipping mixin
(:class:`ldr_opennmt.models.optimizer.DomainUpdateSkipping`). That optimizer is of
whichever class the configuration names (any in ``tf.keras.optimizers.legacy`` or
``tfa.optimizers``, possibly extended with decoupled weight decay), so no list of exact
stock classes can declare it in :attr:`Behaviour.applies_to`, and it has no build for
the mixin to precede: the mixin goes on any optimizer, once.

The package's behaviours: domain mixing (:class:`ldr_opennmt.layers.mixing.MixingEncoderLayer`,
:class:`~ldr_opennmt.layers.mixing.MixingDecoderLayer`), residual adapters
(:class:`ldr_opennmt.layers.adapters.AdaptedEncoderLayer`,
:class:`~ldr_opennmt.layers.adapters.AdaptedDecoderLayer`), the LDR transform after every
layer (:mod:`ldr_opennmt.layers.ldr_transform`, on the stacks and their layers), Target
Token Mixing's first-token forcing (:class:`ldr_opennmt.layers.ttm.FirstTokenForcing`) and
unlabelled sources (``ldr_opennmt.models.ttm``), and the multitask model's encoder recording
(``ldr_opennmt.models.multitask``).
"""

from ldr_opennmt.errors import UserError


class Behaviour:
    """Base of a behaviour: a mixin that a stock layer object gets with
    :func:`install_behaviour`.

    A subclass sets :attr:`applies_to` and overrides methods of the stock class
    (typically ``call``), calling ``super()`` to run the stock code. It has no
    ``__init__`` (the layer is already constructed): whatever it needs is set as
    attributes of the layer by the code that installs it.
    """

    #: The stock classes whose instances may get the behaviour (their exact classes:
    #: a subclass, or a layer with another behaviour, is refused).
    applies_to = ()


#: One class per (stock class, behaviour).
_CLASSES = {}


def _names(classes):
    return " or ".join(cls.__name__ for cls in classes)


def stock_class(layer):
    """The class of :obj:`layer` without its behaviour (its own class if it has none)."""
    return type(layer).__dict__.get("_stock_class", type(layer))


def has_behaviour(layer, behaviour):
    """Whether :obj:`layer` has :obj:`behaviour` installed."""
    return isinstance(layer, behaviour)


def check_installable(layer, behaviour):
    """Raises unless :func:`install_behaviour` can add :obj:`behaviour` to :obj:`layer`.

    Functions that install a behaviour together with sublayers or replaced attributes
    call it on every layer first, so that they change nothing when one layer is refused
    (a second installation included: the layer is then no longer stock).

    Raises:
      TypeError: if :obj:`behaviour` is not a :class:`Behaviour` with ``applies_to``.
      UserError: if :obj:`layer` is not exactly of one of the classes the behaviour
        applies to (it has a behaviour already, or is of another class), or is built.
    """
    if not (isinstance(behaviour, type) and issubclass(behaviour, Behaviour)):
        raise TypeError("%r is not a Behaviour subclass" % (behaviour,))
    if not behaviour.applies_to:
        raise TypeError("%s declares no applies_to classes" % behaviour.__name__)
    if type(layer) not in behaviour.applies_to:
        raise UserError(
            "%s is a %s, not a stock %s: %s installs once, into stock layers"
            % (
                getattr(layer, "name", layer),
                type(layer).__name__,
                _names(behaviour.applies_to),
                behaviour.__name__.lstrip("_"),
            )
        )
    if getattr(layer, "built", False):
        raise UserError(
            "%s is built: install %s before the layer is built"
            % (layer.name, behaviour.__name__.lstrip("_"))
        )


def install_behaviour(layer, behaviour):
    """Adds :obj:`behaviour` to an unbuilt stock layer, in place.

    Args:
      layer: An unbuilt Keras layer (or inputter) whose class is one of
        ``behaviour.applies_to``.
      behaviour: A :class:`Behaviour` subclass.

    Returns:
      The same :obj:`layer`, whose methods now run :obj:`behaviour`'s first. A layer
      that already has :obj:`behaviour` is returned unchanged.

    Raises:
      TypeError: if :obj:`behaviour` is not a declared :class:`Behaviour`.
      UserError: if :obj:`layer` is built, or not exactly of a class the behaviour
        applies to (see :func:`check_installable`).
    """
    if isinstance(behaviour, type) and issubclass(behaviour, Behaviour):
        if has_behaviour(layer, behaviour):
            return layer
    check_installable(layer, behaviour)
    key = (type(layer), behaviour)
    if key not in _CLASSES:
        name = "%s%s" % (behaviour.__name__.lstrip("_"), key[0].__name__)
        _CLASSES[key] = type(
            name, (behaviour, key[0]), {"_stock_class": key[0], "__module__": behaviour.__module__}
        )
    layer.__class__ = _CLASSES[key]
    return layer
