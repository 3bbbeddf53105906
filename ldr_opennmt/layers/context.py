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


class DomainSpecificLayer:
    """Mixin for layers that own domain-specific variables.

    Subclasses create one set of variables per domain region through
    :meth:`add_domain_weight`; :meth:`domain_weights` lists them so that
    Procedure 1 routes gradients and the optimizer skips the update of domains
    absent from a step.
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
