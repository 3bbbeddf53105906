"""The one mechanism that carries the domain id to every domain-aware layer.

OpenNMT-tf layers have fixed call signatures: the target embedder only sees
``{"ids": ids}`` during beam search, encoder and decoder layers only see hidden
states. Rather than re-implementing those layers to thread an extra argument,
the multi-domain model opens a *domain scope* around each forward pass:

.. code-block:: python

    with domain_scope(features["domain"]):
        ...  # every layer called here may use current_domain()

and re-opens it with the beam-tiled ids around beam search. Domain-aware layers
(:mod:`ldr_opennmt.layers.ldr`, :mod:`ldr_opennmt.layers.domain_control`, and
future per-domain attention or mixing layers) read :func:`current_domain`.

The scope is a tensor bound while the graph is traced, kept per thread (replicas
of a ``MirroredStrategy`` are traced in parallel threads), and always restored on
exit. Calling a domain-aware layer outside a scope is an error, never a silent
fallback.

**One stack for every piece of domain context.** The domain ids are one kind of
*frame* on a per-thread stack; the same stack carries the other values that a
forward pass binds for the layers it calls: the domain proportions of the mixed
layer being called (:func:`ldr_opennmt.layers.mixing.mixing_scope`) and the open
collections of every :class:`Recorder`. :func:`push_frame` opens a frame (a context
manager: always removed on exit, exceptions included), :func:`innermost_frame` reads
the innermost frame of a kind. A new method that needs its own context uses a key of
its own:

.. code-block:: python

    _TEMPERATURE = "my_method.temperature"

    with push_frame(_TEMPERATURE, temperature):
        ...  # a layer called here reads innermost_frame(_TEMPERATURE)
"""

import contextlib
import threading

import tensorflow as tf

from ldr_opennmt import domains as domains_lib
from ldr_opennmt.errors import UserError

#: The frame kind of :func:`domain_scope`.
DOMAIN = "domain"

#: The per-thread stack of frames (see :func:`push_frame`).
_STATE = threading.local()

_MISSING = object()


class _Frame:
    """One entry of the stack: a kind (any hashable key) and its value."""

    __slots__ = ("key", "value")

    def __init__(self, key, value):
        self.key = key
        self.value = value


def _frames():
    frames = getattr(_STATE, "frames", None)
    if frames is None:
        frames = _STATE.frames = []
    return frames


@contextlib.contextmanager
def push_frame(key, value):
    """Binds :obj:`value` under :obj:`key` on this thread's stack while the context is open.

    The frame is removed on exit, exceptions included (itself, even if an inner frame
    of another kind was left open by a scope exited out of order).

    Args:
      key: The kind of the frame (a string, or an object such as a :class:`Recorder`).
      value: The value that :func:`innermost_frame` returns for :obj:`key`.

    Yields:
      :obj:`value`.
    """
    frames = _frames()
    frame = _Frame(key, value)
    frames.append(frame)
    try:
        yield value
    finally:
        for index in range(len(frames) - 1, -1, -1):
            if frames[index] is frame:
                del frames[index]
                break


def innermost_frame(key, default=_MISSING):
    """The value of the innermost open frame of kind :obj:`key` on this thread.

    Args:
      key: The kind of frame.
      default: Returned when no such frame is open.

    Raises:
      LookupError: if no such frame is open and no :obj:`default` is given.
    """
    for frame in reversed(_frames()):
        if frame.key == key:
            return frame.value
    if default is _MISSING:
        raise LookupError("no %r frame is open" % (key,))
    return default


def open_frames():
    """``(key, value)`` of every frame open on this thread, outermost first (for tests
    and debugging)."""
    return [(frame.key, frame.value) for frame in _frames()]


@contextlib.contextmanager
def domain_scope(domain):
    """Binds the domain ids of the current batch.

    Args:
      domain: An int32 tensor of shape ``[batch]``: one domain id per sentence
        (``-1`` for generic), in the same batch order as the layer inputs.
    """
    with push_frame(DOMAIN, tf.convert_to_tensor(domain, dtype=tf.int32)) as domain:
        yield domain


class Recorder:
    """Collects values that stock layers compute during a forward pass, per thread.

    A family that needs a value from inside OpenNMT-tf's stock layers (the domain
    proportions of each mixed layer, the encoder output of the multitask classifier)
    records it there while a collection is open, and reads the records after the pass:

    .. code-block:: python

        with recorder.collect() as records:
            ...  # forward pass; a layer calls recorder.record(value)
        # records: every recorded value, in call order

    Inside ``tf.function`` the records hold the traced tensors: use them in the same
    function. Collections nest (the innermost one records); :meth:`pause` records
    nothing (e.g. inside beam search's loop).
    """

    # The recorder itself is the key of its frames on the stack of push_frame.

    def collect(self):
        """A context manager yielding the list of the values recorded while it is open."""
        return push_frame(self, [])

    def pause(self):
        """A context manager while which nothing is recorded."""
        return push_frame(self, None)

    def record(self, value):
        """Appends :obj:`value` to the innermost open collection, if any."""
        records = innermost_frame(self, None)
        if records is not None:
            records.append(value)


def current_domain():
    """Returns the domain ids bound by the innermost :func:`domain_scope`.

    Raises:
      RuntimeError: if no scope is active.
    """
    domain = innermost_frame(DOMAIN, None)
    if domain is None:
        raise RuntimeError(
            "A domain-aware layer was called outside a domain scope: call it through a "
            "multi-domain model or inside ldr_opennmt.layers.domain_scope(domain_ids)"
        )
    return domain


def domain_one_hot(depth, dtype, rank=2):
    """Returns the current domains as one-hot rows ready to broadcast.

    Args:
      depth: The number of domain regions.
      dtype: The compute dtype (masks follow it, e.g. float16 under mixed precision).
      rank: The rank of the inputs the mask multiplies: the result has shape
        ``[batch, 1, ..., 1, depth]`` with ``rank - 1`` leading axes before the last.

    Returns:
      A tensor of shape ``[batch] + [1] * (rank - 2) + [depth]``; generic rows are all zero.
    """
    one_hot = tf.one_hot(current_domain(), depth, dtype=dtype)
    for _ in range(rank - 2):
        one_hot = tf.expand_dims(one_hot, 1)
    return one_hot


def configured_regions(data_config, num_reserved_regions, owner):
    """The declared domains and the number of domain regions a layer must create.

    Args:
      data_config: The data configuration: ``domains`` and, for a trained
        checkpoint, ``domain_regions`` (set by the multi-domain Runner, or by hand
        under stock ``onmt-main``).
      num_reserved_regions: Regions kept free for domains added later.
      owner: The layer or model class name, for error messages.

    Returns:
      ``(domains, num_regions)``.

    Raises:
      UserError: if no domain is declared, or more than the checkpoint has regions.
    """
    domains = domains_lib.validate_domain_names(
        data_config.get("domains"), source="the data configuration (required by %s)" % owner
    )
    regions = data_config.get("domain_regions")
    if regions is None:
        return domains, len(domains) + num_reserved_regions
    # A trained checkpoint's count: domains added to the configuration take its
    # reserved regions.
    if len(domains) > regions:
        raise UserError(
            "%d domains declared (%s) but the model has %d domain regions"
            % (len(domains), ", ".join(domains), regions)
        )
    return domains, regions


class DomainSpecificLayer:
    """Mixin for layers that own domain-specific variables: the protocol.

    Every model family reaches its per-domain parameters through this protocol,
    so the model, Procedure 1, the optimizer, the Runner and the exports need no
    knowledge of the layer. A domain-aware layer:

    1. **Reads the domain** of each sentence with :func:`current_domain` (or
       :func:`domain_one_hot`) inside its ``call``; it never takes the domain as
       an argument. The multi-domain model binds the scope (training, evaluation,
       beam search with beam-tiled ids, SavedModel serving).
    2. **Declares its regions**: it sets ``self.num_regions`` in ``initialize``
       (before the model is built) from ``data: domains`` plus its reserved
       regions, or from ``data: domain_regions`` when a trained checkpoint fixes
       the count (the multi-domain Runner sets it in the finalized configuration).
       Region ``k`` belongs to the domain whose id is ``k``;
       ``MultiDomainModel.domain_regions`` is the largest count of its layers.
    3. **Creates each per-domain variable** with :meth:`add_domain_weight`, which
       files it under its region in :meth:`domain_weights`. That is what Procedure 1
       routes (shared gradients from the generic pass, domain gradients from the
       true-label pass), what the optimizer skips for domains absent from a step,
       what regularization leaves out, and how the Runner finds which regions a
       checkpoint holds. Variables created with plain ``add_weight`` are shared.
       (The names ``domain_<k>_<name>`` are for people reading checkpoints; no code
       parses them.)
    4. **Defines generic**: the reserved id ``GENERIC_ID`` (-1) is an all-zero row
       of :func:`domain_one_hot`. For LDR and DC it means "no domain parameter".
       A family whose generic label must select a *general copy* (the Factorized
       Transformer) maps ``GENERIC_ID`` to that copy itself, keeps the copy shared
       (plain ``add_weight``) and initializes reserved regions from it, so that a
       new domain starts equal to generic, as reserved LDR regions do (zero fusion
       blocks, zero DC vectors; see ``DomainAwareWordEmbedder.is_reserved``).
    5. **Folds for a fixed domain** (optional): :meth:`fold` returns the weights of
       the plain layer it equals for that domain (embedders: ``{"embedding":
       table}``, see ``DomainAwareWordEmbedder.fused_table``). Exports to plain
       models (CTranslate2) use it; a layer without a fold is refused there in one
       line, and the SavedModel, which keeps the domain input, serves it.

    Parameter sets that a training stage freezes and ensembles of domain views
    work on the same two lists: :meth:`domain_weights` (per region) and everything
    else (shared).
    """

    def add_domain_weight(self, region, name, shape, **kwargs):
        """Creates a variable owned by domain region ``region``."""
        variable = self.add_weight("domain_%d_%s" % (region, name), shape, **kwargs)
        if "_domain_weights" not in self.__dict__:
            # Plain dict, not tracked by Keras: the variables are already tracked by
            # add_weight and must not appear twice in checkpoints.
            object.__setattr__(self, "_domain_weights", {})
        self._domain_weights.setdefault(region, []).append(variable)
        return variable

    def domain_weights(self):
        """Returns a dict mapping each domain region to its list of variables."""
        return dict(self.__dict__.get("_domain_weights", {}))

    def fold(self, domain_id):
        """The weights of the plain layer this layer equals for one domain.

        Args:
          domain_id: A domain id, or ``GENERIC_ID``.

        Returns:
          A dict mapping the plain layer's weight names to tensors.

        Raises:
          UserError: if no fold is defined (the default).
        """
        raise UserError(
            "no fold is defined for %s: it cannot be exported to CTranslate2 (define its "
            "fold(domain_id), the plain layer's weights for one domain, or serve the SavedModel: "
            "onmt-main export)" % type(self).__name__
        )
