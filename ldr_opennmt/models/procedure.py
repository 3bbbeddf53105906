"""Multi-domain training modes: Procedure 1 (Pham et al., 2019) and joint training.

``procedure1``: each batch is run twice. The first pass uses the ``generic``
label for every sentence (no domain region active) and its gradients update the
shared parameters only; the second pass uses the true labels and its gradients
update the domain-specific parameters only. ``joint``: one pass with the true
labels updates every parameter (the ablation).

The two stages of the Factorized Transformer's curriculum (Deng et al., 2020,
section 3.1) are the two halves of Procedure 1 on their own: ``general`` (stage 1)
runs every batch with the ``generic`` label, so it trains the shared parameters
and the general copies while domain variables get no gradient; ``domains``
(stage 2) runs the true labels and computes gradients for the domain variables
only, the shared ones being **frozen**: the model's optimizer skips their update
altogether (see :mod:`ldr_opennmt.models.optimizer`), so that a restored Adam
state, weight decay or regularization cannot move them.

All run inside ``Model.compute_gradients``, the hook OpenNMT-tf's trainer calls
for every (sub-)batch, so they work under stock ``onmt-main`` with gradient
accumulation, mixed precision (loss scaling), XLA and distribution strategies.
"""

import tensorflow as tf

from ldr_opennmt import domains as domains_lib

PROCEDURE1 = "procedure1"
JOINT = "joint"
GENERAL = "general"
DOMAINS = "domains"
MODES = (PROCEDURE1, JOINT, GENERAL, DOMAINS)


def _gradients(model, features, labels, optimizer, select, loss_scale, normalize_loss):
    """One forward/backward pass; gradients for the variables ``select()`` returns.

    ``select`` is called after the forward pass: on the first call the forward
    pass is what creates the model variables.
    """
    with tf.GradientTape() as tape:
        loss, sample_size = model.compute_training_loss(features, labels, step=optimizer.iterations)
        if normalize_loss and sample_size is not None:
            loss /= sample_size
        if loss_scale is not None:
            loss /= loss_scale
        if isinstance(optimizer, tf.keras.mixed_precision.LossScaleOptimizer):
            scaled_loss = optimizer.get_scaled_loss(loss)
        else:
            scaled_loss = loss
    variables = select()
    gradients = tape.gradient(scaled_loss, variables)
    if isinstance(optimizer, tf.keras.mixed_precision.LossScaleOptimizer):
        gradients = optimizer.get_unscaled_gradients(gradients)
    # The gradient accumulator does not accept None: an unused variable gets zeros.
    gradients = [
        tf.zeros_like(variable) if gradient is None else gradient
        for gradient, variable in zip(gradients, variables)
    ]
    return loss, gradients, variables, sample_size


def _split_variables(model, mode):
    """Returns (shared, domain-specific) trainable variables."""
    specific_refs = {variable.ref() for variable in model.domain_variables()}
    if not specific_refs:
        raise ValueError(
            "domain_training: %s needs domain-specific parameters, but this model has "
            "none (use joint)" % mode
        )
    trainable = model.trainable_weights
    shared = [v for v in trainable if v.ref() not in specific_refs]
    specific = [v for v in trainable if v.ref() in specific_refs]
    return shared, specific


def compute_gradients(
    model, features, labels, optimizer, mode, loss_scale=None, normalize_loss=True
):
    """Computes the gradients of a batch for a multi-domain model.

    Args:
      model: The multi-domain model (its ``domain_variables()`` lists the
        domain-specific variables).
      features: The source features, with a ``domain`` id per sentence.
      labels: The target features.
      optimizer: The optimizer (a ``LossScaleOptimizer`` is supported).
      mode: One of :data:`MODES`.
      loss_scale: An optional loss scaling factor.
      normalize_loss: Normalize the loss by the sample size.

    Returns:
      Like ``opennmt.models.Model.compute_gradients``: the loss of the pass with
      the true domain labels, the gradients aligned with
      ``model.trainable_weights`` and, if :obj:`normalize_loss` is ``False``, the
      sample size.
    """
    if mode not in MODES:
        raise ValueError("domain_training must be one of %s, got %r" % (", ".join(MODES), mode))
    generic_features = dict(features)
    generic_features["domain"] = tf.fill(
        tf.shape(features["domain"]), tf.constant(domains_lib.GENERIC_ID, tf.int32)
    )
    everything = lambda: model.trainable_weights  # noqa: E731
    shared = lambda: _split_variables(model, mode)[0]  # noqa: E731
    specific = lambda: _split_variables(model, mode)[1]  # noqa: E731
    # Each mode is a list of passes: (labels, variables whose gradients the pass gives).
    # The reported loss is the last pass's, that of the true labels where there is one.
    passes = {
        JOINT: [(features, everything)],
        GENERAL: [(generic_features, everything)],
        # The shared variables are frozen (the optimizer skips their update): zeros.
        DOMAINS: [(features, specific)],
        PROCEDURE1: [(generic_features, shared), (features, specific)],
    }[mode]
    by_ref = {}
    sample_size = None
    for pass_features, select in passes:
        loss, pass_gradients, variables, pass_size = _gradients(
            model, pass_features, labels, optimizer, select, loss_scale, normalize_loss
        )
        sample_size = pass_size if sample_size is None else sample_size
        by_ref.update(zip((v.ref() for v in variables), pass_gradients))
    gradients = [by_ref.get(v.ref(), tf.zeros_like(v)) for v in model.trainable_weights]
    if normalize_loss:
        return loss, gradients
    return loss, gradients, sample_size
