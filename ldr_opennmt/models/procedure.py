"""Multi-domain training modes: Procedure 1 (Pham et al., 2019) and joint training.

``procedure1``: each batch is run twice. The first pass uses the ``generic``
label for every sentence (no domain region active) and its gradients update the
shared parameters only; the second pass uses the true labels and its gradients
update the domain-specific parameters only. ``joint``: one pass with the true
labels updates every parameter (the ablation). ``summed``: the batch is run with
the ``generic`` label and with the true labels, and one loss
``(1 - w) L_domain + w L_generic`` updates every parameter, ``w`` being
``params: summed_generic_weight`` (default 0.5); with ``corpus_share`` the loss is
``L_domain + p(d) L_generic``, ``p(d)`` the share of each sentence's domain in the
training data. These are the ``generic+domain_training`` modes of the LDR authors'
TF1 code (0.5/0.5 in its released configuration, ``domain_weighted_loss`` for the
corpus shares); their TF2 code sums the gradients of a domain batch and a generic
batch over all variables, which ``summed`` with the default weight equals up to a
factor of 2 when the two batches are the same sentences.

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
from ldr_opennmt.errors import UserError

PROCEDURE1 = "procedure1"
JOINT = "joint"
SUMMED = "summed"
GENERAL = "general"
DOMAINS = "domains"
MODES = (PROCEDURE1, JOINT, SUMMED, GENERAL, DOMAINS)

#: ``params`` key of the ``summed`` mode: the weight of the generic pass's loss.
SUMMED_WEIGHT_KEY = "summed_generic_weight"
#: Its value for ``L_domain + p(d) L_generic`` (the domain's share of the training data).
CORPUS_SHARE = "corpus_share"
DEFAULT_SUMMED_WEIGHT = 0.5


def summed_weights(params, domains, shares=None):
    """The loss weights of the ``summed`` mode from ``params: summed_generic_weight``.

    Args:
      params: The model parameters.
      domains: The declared domain names.
      shares: A callable returning the training data's domain shares (see
        ``MultiDomainExamplesInputter.domain_shares``), called for ``corpus_share`` only.

    Returns:
      ``(domain_weight, generic_weights)``: the weight of the true-label loss and a list
      of ``len(domains) + 1`` weights of the generic loss, indexed by domain id + 1
      (index 0: sentences labelled ``generic``).

    Raises:
      UserError: on a value that is not a number in [0, 1], ``corpus_share`` or a
        mapping of every declared domain to a number in [0, 1].
    """
    value = (params or {}).get(SUMMED_WEIGHT_KEY, DEFAULT_SUMMED_WEIGHT)
    where = "params: %s" % SUMMED_WEIGHT_KEY
    if value == CORPUS_SHARE:
        return 1.0, [float(p) for p in shares()]
    if isinstance(value, dict):
        unknown = sorted(str(k) for k in value if k not in domains)
        missing = [d for d in domains if d not in value]
        if unknown or missing:
            raise UserError(
                "%s: %s (a mapping gives every declared domain its weight p(d): %s)"
                % (
                    where,
                    (
                        "unknown domain %s" % ", ".join(map(repr, unknown))
                        if unknown
                        else "no weight for %s" % ", ".join(map(repr, missing))
                    ),
                    ", ".join(domains),
                )
            )
        weights = [_unit(value[d], "%s: %s" % (where, d)) for d in domains]
        return 1.0, [0.0] + weights
    weight = _unit(value, where)
    return 1.0 - weight, [weight] * (len(domains) + 1)


def _unit(value, where):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise UserError(
            "%s must be a number in [0, 1], %s or a mapping domain: weight, got %r"
            % (where, CORPUS_SHARE, value)
        )
    return float(value)


def _gradients(model, terms, labels, optimizer, select, loss_scale, normalize_loss):
    """One forward/backward pass over a weighted sum of losses; gradients for the
    variables ``select()`` returns.

    Args:
      terms: ``(features, weight)`` pairs: ``weight`` is ``None`` (1), a float, or a
        float vector with one weight per sentence (the loss is then OpenNMT-tf's
        ``sequence_weight``-weighted numerator). The reported loss and the sample size
        are the first term's, unweighted.

    ``select`` is called after the forward pass: on the first call the forward
    pass is what creates the model variables.
    """
    with tf.GradientTape() as tape:
        total = None
        for index, (features, weight) in enumerate(terms):
            term_labels = labels
            if weight is not None and weight.shape.rank == 1:
                term_labels = dict(labels, weight=weight * labels.get("weight", 1.0))
            term_loss, term_size = model.compute_training_loss(
                features, term_labels, step=optimizer.iterations
            )
            if index == 0:
                loss, sample_size = term_loss, term_size
            if weight is not None and weight.shape.rank == 0:
                term_loss *= tf.cast(weight, term_loss.dtype)
            total = term_loss if total is None else total + term_loss
        if normalize_loss and sample_size is not None:
            loss /= sample_size
            total /= sample_size
        if loss_scale is not None:
            loss /= loss_scale
            total /= loss_scale
        if isinstance(optimizer, tf.keras.mixed_precision.LossScaleOptimizer):
            scaled_loss = optimizer.get_scaled_loss(total)
        else:
            scaled_loss = total
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


def _summed_terms(model):
    """The ``summed`` mode's weights for :obj:`model` (Python values: read when the
    training step is traced)."""
    domains = list(model.domains or [])
    inputter = model.examples_inputter
    domain_weight, generic_weights = summed_weights(
        model.params, domains, shares=getattr(inputter, "domain_shares", None)
    )
    tf.get_logger().info(
        "domain_training: summed: %s x L_domain + w(d) x L_generic, w: %s",
        domain_weight,
        ", ".join(
            "%s %.4f" % (name, weight)
            for name, weight in zip([domains_lib.GENERIC] + domains, generic_weights)
        ),
    )
    return domain_weight, generic_weights


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
    both = lambda: sum(_split_variables(model, mode), [])  # noqa: E731
    # Each mode is a list of passes: (weighted losses summed in one pass, variables whose
    # gradients the pass gives). The reported loss is the last pass's first loss, that
    # of the true labels where there is one.
    if mode == SUMMED:
        summed = [(features, None), (generic_features, None)]
        domain_weight, generic_weights = _summed_terms(model)
        if domain_weight != 1.0:
            summed[0] = (features, tf.constant(domain_weight))
        if len(set(generic_weights)) == 1:
            summed[1] = (generic_features, tf.constant(generic_weights[0]))
        else:  # One weight per sentence, p(d): OpenNMT-tf's sequence weights.
            summed[1] = (
                generic_features,
                tf.gather(tf.constant(generic_weights), features["domain"] + 1),
            )
        passes = [(summed, both)]
    else:
        passes = {
            JOINT: [([(features, None)], everything)],
            GENERAL: [([(generic_features, None)], everything)],
            # The shared variables are frozen (the optimizer skips their update): zeros.
            DOMAINS: [([(features, None)], specific)],
            PROCEDURE1: [([(generic_features, None)], shared), ([(features, None)], specific)],
        }[mode]
    by_ref = {}
    sample_size = None
    for terms, select in passes:
        loss, pass_gradients, variables, pass_size = _gradients(
            model, terms, labels, optimizer, select, loss_scale, normalize_loss
        )
        sample_size = pass_size if sample_size is None else sample_size
        by_ref.update(zip((v.ref() for v in variables), pass_gradients))
    gradients = [by_ref.get(v.ref(), tf.zeros_like(v)) for v in model.trainable_weights]
    if normalize_loss:
        return loss, gradients
    return loss, gradients, sample_size
