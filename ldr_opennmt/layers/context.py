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
"""

import contextlib
import threading

import tensorflow as tf

from ldr_opennmt import domains as domains_lib
from ldr_opennmt.errors import UserError

_STATE = threading.local()


def _stack():
    if not hasattr(_STATE, "stack"):
        _STATE.stack = []
    return _STATE.stack


@contextlib.contextmanager
def domain_scope(domain):
    """Binds the domain ids of the current batch.

    Args:
      domain: An int32 tensor of shape ``[batch]``: one domain id per sentence
        (``-1`` for generic), in the same batch order as the layer inputs.
    """
    domain = tf.convert_to_tensor(domain, dtype=tf.int32)
    stack = _stack()
    stack.append(domain)
    try:
        yield domain
    finally:
        stack.pop()


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

    def __init__(self):
        self._state = threading.local()

    def _stack(self):
        if not hasattr(self._state, "stack"):
            self._state.stack = []
        return self._state.stack

    @contextlib.contextmanager
    def _push(self, records):
        stack = self._stack()
        stack.append(records)
        try:
            yield records
        finally:
            stack.pop()

    def collect(self):
        """A context manager yielding the list of the values recorded while it is open."""
        return self._push([])

    def pause(self):
        """A context manager while which nothing is recorded."""
        return self._push(None)

    def record(self, value):
        """Appends :obj:`value` to the innermost open collection, if any."""
        stack = self._stack()
        if stack and stack[-1] is not None:
            stack[-1].append(value)


def current_domain():
    """Returns the domain ids bound by the innermost :func:`domain_scope`.

    Raises:
      RuntimeError: if no scope is active.
    """
    stack = _stack()
    if not stack:
        raise RuntimeError(
            "A domain-aware layer was called outside a domain scope: call it through a "
            "multi-domain model or inside ldr_opennmt.layers.domain_scope(domain_ids)"
        )
    return stack[-1]


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
            "no fold is defined for %s: it cannot be exported to CTranslate2" % type(self).__name__
        )
