"""Skip the optimizer update of domains that are absent from a training step.

Adam keeps moving a variable whose gradient is zero (its first moment decays but
is not zero), so a domain that is absent from a batch would still drift. The
multi-domain model therefore wraps its optimizer: the update of a
domain-specific variable (see :class:`ldr_opennmt.layers.DomainSpecificLayer`)
runs only when its gradient is not identically zero, which is exactly when the
step's batches (all accumulated sub-batches, all replicas) contained its
domain: masked regions receive exact zeros, and a region of a domain present in
the batch receives a non-zero gradient through the words of its sentences.

The decision is taken on the aggregated gradient inside ``apply_gradients``, so
it needs no extra state and stays consistent with gradient accumulation,
``MirroredStrategy`` (the gradient is all-reduced before the update), Horovod and
loss scaling (``LossScaleOptimizer`` wraps this optimizer and skips whole steps on
overflow). It is what LazyAdam does for embedding rows, applied per domain.

The same mechanism freezes variables: the update of a frozen variable (slots
included) never runs, whatever its gradient, the optimizer's restored state or
its weight decay.
"""

import tensorflow as tf

from ldr_opennmt.upstream import ledger


def _variable_refs(variables):
    """References of the variables and of their per-device components.

    Under a distribution strategy the update function receives the component
    variable of each device, not the distributed variable the model lists; under
    mixed precision the model lists ``AutoCastVariable`` wrappers.
    """
    refs = set()
    pending = list(variables)
    while pending:
        variable = pending.pop()
        if variable.ref() in refs:
            continue
        refs.add(variable.ref())
        inner = getattr(variable, "_variable", None)  # AutoCastVariable
        if inner is not None:
            pending.append(inner)
        pending.extend(getattr(variable, "values", ()))  # DistributedVariable
    return refs


class DomainUpdateSkipping(ledger.ConditionalUpdateMixin):
    """Optimizer mixin: no update for domain variables with an all-zero gradient."""

    def _is_domain_variable(self, var):
        refs = getattr(self, "_domain_variable_refs", None)
        if refs is None:
            refs = _variable_refs(self._domain_variables_fn())
            self._domain_variable_refs = refs
        return var.ref() in refs

    def _is_frozen(self, var):
        refs = getattr(self, "_frozen_variable_refs", None)
        if refs is None:
            refs = _variable_refs(self._frozen_variables_fn())
            self._frozen_variable_refs = refs
        return var.ref() in refs

    def should_apply(self, grad, var):
        if self._is_frozen(var):
            return False
        if not self._is_domain_variable(var):
            return None
        return tf.reduce_any(tf.not_equal(grad, 0))


def skip_absent_domains(optimizer, domain_variables_fn, frozen_variables_fn=None):
    """Makes :obj:`optimizer` skip updates of absent domains, in place.

    The instance keeps its configuration, slots and checkpoint layout; only its
    class gains :class:`DomainUpdateSkipping`
    (see :func:`ldr_opennmt.upstream.ledger.add_optimizer_mixin`).

    Args:
      optimizer: A ``tf.keras.optimizers.legacy.Optimizer``.
      domain_variables_fn: A callable returning the domain-specific variables
        (called lazily, once the model is built).
      frozen_variables_fn: A callable returning the variables that are never
        updated (e.g. the shared ones in the Factorized curriculum's stage 2).

    Returns:
      The same optimizer.
    """
    ledger.add_optimizer_mixin(optimizer, DomainUpdateSkipping)
    # A plain function attribute: not tracked, so checkpoints are unchanged.
    optimizer._domain_variables_fn = domain_variables_fn
    optimizer._frozen_variables_fn = frozen_variables_fn or list
    return optimizer
