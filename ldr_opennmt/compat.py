"""Every coupling to OpenNMT-tf beyond its public API, in one module.

ldr-opennmt is pinned to OpenNMT-tf :data:`PINNED_OPENNMT`. Where the public API
offers no hook, the package relies on the upstream names listed in
:data:`UPSTREAM_NAMES`; all of those uses are in this module and nowhere else,
so whoever upgrades OpenNMT-tf reads one file. ``tests/test_compat.py`` checks the
version and every listed name, and fails naming what broke.

On import, a different OpenNMT-tf version logs one warning with the names that
are missing (see :func:`check_upstream`); the package still imports, because a
missing name only breaks the feature that uses it.

What is here, and why no public equivalent exists:

* :class:`RunnerAdapter` (base of :class:`ldr_opennmt.training.runner.Runner`):
  the run configuration (``Runner._config``), its finalized form
  (``_finalize_config``) and model construction (``_init_model``), which
  ``opennmt.Runner`` keeps private; and the evaluator class, which
  ``Runner.train``/``evaluate`` take from the module global
  ``opennmt.runner.evaluation`` with no argument to change it (swapped for the
  duration of the call only, see :func:`evaluator_class`).
* :class:`EvaluatorAdapter` (base of the per-domain evaluator): the evaluation
  function, dataset, metric names, prediction directory, scorers, early stopping and
  result recording of ``opennmt.evaluation.Evaluator``, and a copy of its evaluation
  loop (``evaluate_dataset``), which ``Evaluator.__call__`` does not factor out.
* :class:`DecodingScopeMixin`: ``SequenceToSequence._dynamic_decode``, the only
  place where beam search starts (the domain ids must be tiled there).
* :class:`ConditionalUpdateMixin` and :func:`add_optimizer_mixin`: Keras legacy
  optimizers apply each variable's update in ``_resource_apply_dense`` /
  ``_resource_apply_sparse``; the optimizer object is built by OpenNMT-tf's
  ``make_optimizer`` from the configuration, so the mixin is added to the class
  of that object (a new object would lose the configured learning-rate schedule).
* :func:`add_mixin`, for the stock Transformer layers too: domain mixing
  (:mod:`ldr_opennmt.layers.mixing`) runs the stock ``SelfAttentionEncoderLayer.call``
  / ``SelfAttentionDecoderLayer.call`` inside a scope that gives the layer's domain
  proportions to its projections, without copying those layers.
* :func:`run_onmt_main`: ``onmt-main``'s ``main()`` builds ``opennmt.bin.main.Runner``
  from ``sys.argv``; ``ldr-main`` runs it with its own Runner class.
* :func:`initialize_logging`: ``onmt-main``'s log format (``_initialize_logging``).
* :func:`training_steps`: ``Trainer._steps``, the training step without the
  checkpointing and summary loop (``run/benchmarks.py`` times it), with the
  ``TrainingStats`` that ``Trainer.__call__`` would create.
* :func:`decode_target`: the teacher-forced decoder pass of
  ``SequenceToSequence.call`` (``_decode_target``), for analyses of the decoder layers.
* :func:`install_error_hook`: stock ``onmt-main`` has no error handling to extend,
  so a ``sys.excepthook`` prints :class:`~ldr_opennmt.errors.UserError` as one line.
"""

import contextlib
import logging
import sys
import types

import opennmt
import tensorflow as tf
from opennmt import evaluation
from opennmt import runner as runner_module
from opennmt import training as training_module
from opennmt.bin import main as onmt_main
from opennmt.utils import misc

from ldr_opennmt import errors

PINNED_OPENNMT = "2.32.0"

#: (object, attribute, what uses it). Instance attributes are checked on instances
#: by the tests (``tests/test_compat.py``).
UPSTREAM_NAMES = (
    (opennmt.Runner, "_finalize_config", "RunnerAdapter.finalized_config"),
    (opennmt.Runner, "_init_model", "RunnerAdapter.new_model"),
    (runner_module, "evaluation", "evaluator_class (per-domain evaluation)"),
    (evaluation.Evaluator, "_record_results", "EvaluatorAdapter.record"),
    (evaluation.Evaluator, "_maybe_export", "EvaluatorAdapter.record"),
    (evaluation.Evaluator, "_maybe_garbage_collect_exports", "EvaluatorAdapter.record"),
    (evaluation.Evaluator, "_is_higher_better_for_metric", "EvaluatorAdapter.metric_base_name"),
    (opennmt.models.SequenceToSequence, "_dynamic_decode", "DecodingScopeMixin"),
    (opennmt.models.SequenceToSequence, "_decode_target", "decode_target"),
    (tf.keras.optimizers.legacy.Optimizer, "_resource_apply_dense", "ConditionalUpdateMixin"),
    (tf.keras.optimizers.legacy.Optimizer, "_resource_apply_sparse", "ConditionalUpdateMixin"),
    (onmt_main, "Runner", "run_onmt_main"),
    (onmt_main, "main", "run_onmt_main"),
    (onmt_main, "_initialize_logging", "initialize_logging"),
    (training_module.Trainer, "_steps", "training_steps"),
    (training_module, "TrainingStats", "training_steps"),
)

#: Attributes that OpenNMT-tf sets on instances (checked on built objects by the tests).
RUNNER_INSTANCE_NAMES = ("_config",)
TRAINER_INSTANCE_NAMES = ("_model", "_optimizer", "_training_stats")
EVALUATOR_INSTANCE_NAMES = (
    "_model",
    "_dataset",
    "_eval_fn",
    "_metrics_name",
    "_save_predictions",
    "_eval_dir",
    "_scorers",
    "_early_stopping",
)


def missing_upstream_names():
    """The listed upstream names that the installed OpenNMT-tf lacks, with their users."""
    return [
        "%s.%s (used by %s)" % (getattr(owner, "__name__", owner), name, user)
        for owner, name, user in UPSTREAM_NAMES
        if not hasattr(owner, name)
    ]


def check_upstream():
    """Warns once if OpenNMT-tf is not the pinned version, naming what breaks."""
    version = opennmt.__version__
    if version == PINNED_OPENNMT:
        return
    missing = missing_upstream_names()
    tf.get_logger().warning(
        "ldr-opennmt is pinned to OpenNMT-tf %s, found %s: %s",
        PINNED_OPENNMT,
        version,
        (
            "missing " + "; ".join(missing)
            if missing
            else "the names it relies on exist (see ldr_opennmt/compat.py)"
        ),
    )


def _instance_attribute(obj, name):
    try:
        return getattr(obj, name)
    except AttributeError as e:
        raise RuntimeError(
            "OpenNMT-tf %s: %s has no attribute %s (ldr-opennmt is pinned to %s; see "
            "ldr_opennmt/compat.py)"
            % (opennmt.__version__, type(obj).__name__, name, PINNED_OPENNMT)
        ) from e


class RunnerAdapter(opennmt.Runner):
    """``opennmt.Runner`` with public names for what the multi-domain Runner needs."""

    @property
    def config(self):
        """The run configuration (user files merged, paths resolved; not auto-config)."""
        return _instance_attribute(self, "_config")

    def finalized_config(self, training=False):
        """The configuration a run uses: auto-config, defaults and :meth:`finalize_config`."""
        return self._finalize_config(training=training)

    def new_model(self, config):
        """A fresh model initialized with :obj:`config` (not built)."""
        return self._init_model(config)

    def _finalize_config(self, training=False, num_replicas=1, num_devices=1):
        config = super()._finalize_config(
            training=training, num_replicas=num_replicas, num_devices=num_devices
        )
        return self.finalize_config(config)

    def finalize_config(self, config):
        """Hook: adjusts the finalized configuration of every run (default: unchanged)."""
        return config


@contextlib.contextmanager
def evaluator_class(cls):
    """Makes ``opennmt.Runner.train``/``evaluate`` build their evaluator with :obj:`cls`.

    They call ``evaluation.Evaluator.from_config`` through the module global
    ``opennmt.runner.evaluation``; it is swapped for the duration of the call only.
    """
    original = runner_module.evaluation
    runner_module.evaluation = types.SimpleNamespace(Evaluator=cls)
    try:
        yield
    finally:
        runner_module.evaluation = original


class EvaluatorAdapter(evaluation.Evaluator):
    """``opennmt.evaluation.Evaluator`` with public names for its internals."""

    @property
    def model(self):
        return _instance_attribute(self, "_model")

    @property
    def dataset(self):
        """The evaluation dataset built by the parent constructor."""
        return _instance_attribute(self, "_dataset")

    @property
    def scorers(self):
        return _instance_attribute(self, "_scorers")

    @property
    def saves_predictions(self):
        return _instance_attribute(self, "_save_predictions")

    @property
    def eval_dir(self):
        return _instance_attribute(self, "_eval_dir")

    def eval_step(self, features, labels):
        """The compiled evaluation function: (loss, predictions) of one batch."""
        return _instance_attribute(self, "_eval_fn")(features, labels)

    def add_metric_names(self, names):
        """Declares more metric names (valid for early stopping and export_on_best)."""
        _instance_attribute(self, "_metrics_name").update(names)

    def metric_names(self):
        return set(_instance_attribute(self, "_metrics_name"))

    def set_early_stopping(self, early_stopping):
        """Sets the early-stopping condition after construction, checked as the parent
        checks it (its metric must be one of :meth:`metric_names`)."""
        if early_stopping is not None:
            if early_stopping.metric not in self.metric_names():
                raise ValueError(
                    "Invalid early stopping metric '%s', expected one in %s"
                    % (early_stopping.metric, sorted(self.metric_names()))
                )
            if early_stopping.steps <= 0:
                raise ValueError("Early stopping steps should greater than 0")
        self._early_stopping = early_stopping

    def record(self, step, results):
        """Logs, summarizes, exports on best and garbage-collects, as the parent does."""
        self._record_results(step, results)
        self._maybe_export(step, results)
        self._maybe_garbage_collect_exports()

    def evaluate_dataset(self, dataset, output_path=None):
        """(loss numerator, loss denominator, model metrics) of one evaluation dataset,
        predictions written to :obj:`output_path` if set.

        A copy of the loop inside ``Evaluator.__call__`` (OpenNMT-tf 2.32), which
        does not factor it out: the per-domain evaluator runs it once per dev set.
        """
        output_file = None
        if output_path is not None:
            output_file = tf.io.gfile.GFile(output_path, "w")
            params = {"n_best": 1}
            writer = misc.OrderRestorer(
                lambda prediction: prediction.get("index"),
                lambda prediction: self.model.print_prediction(
                    prediction, params=params, stream=output_file
                ),
            )
        loss_num = 0
        loss_den = 0
        metrics = self.model.get_metrics()
        for batch in dataset:
            features, labels = self.model.split_features_labels(batch)
            loss, predictions = self.eval_step(features, labels)
            if isinstance(loss, tuple):
                loss_num += loss[0]
                loss_den += loss[1]
            else:
                loss_num += loss
                loss_den += 1
            if metrics:
                self.model.update_metrics(metrics, predictions, labels)
            if output_file is not None:
                predictions = {k: v.numpy() for k, v in predictions.items()}
                for prediction in misc.extract_batches(predictions):
                    writer.push(prediction)
        if output_file is not None:
            output_file.close()
        if loss_den == 0:
            raise RuntimeError("No examples were evaluated")
        values = {name: metric.result() for name, metric in (metrics or {}).items()}
        return loss_num, loss_den, values

    def metric_base_name(self, metric):
        """Hook: the metric whose direction (higher or lower is better) applies."""
        return metric

    def _is_higher_better_for_metric(self, metric):
        return super()._is_higher_better_for_metric(self.metric_base_name(metric))


class DecodingScopeMixin:
    """Runs beam search (``SequenceToSequence._dynamic_decode``) inside a context, and
    scores without decoding.

    ``SequenceGenerator.score`` (``onmt-main score``, forced decoding) calls the model in
    inference mode, which also runs beam search on every batch and drops its
    predictions: scoring cost a translation. :meth:`score` traces the model with
    decoding switched off (the scores are the same: they come from the teacher-forced
    logits alone).
    """

    _skip_decoding = False

    def decoding_scope(self, features):
        """Hook: a context manager entered around decoding (default: none)."""
        return contextlib.nullcontext()

    def score(self, features, labels):
        self._skip_decoding = True  # Read while tracing: the traced graph has no decoding.
        try:
            return super().score(features, labels)
        finally:
            self._skip_decoding = False

    def _dynamic_decode(self, features, encoder_outputs, encoder_state, encoder_sequence_length):
        if self._skip_decoding:
            return None
        with self.decoding_scope(features):
            return super()._dynamic_decode(
                features, encoder_outputs, encoder_state, encoder_sequence_length
            )


class ConditionalUpdateMixin:
    """Optimizer mixin: an update runs only when :meth:`should_apply` allows it."""

    def should_apply(self, grad, var):
        """Hook: ``None`` to apply unconditionally, ``False`` never, or a scalar
        boolean tensor."""
        return None

    def _conditional(self, grad, var, apply_fn):
        condition = self.should_apply(grad, var)
        if condition is None:
            return apply_fn()
        if condition is False:
            return tf.constant(False)

        def _apply():
            with tf.control_dependencies([apply_fn()]):
                return tf.constant(True)

        return tf.cond(condition, _apply, lambda: tf.constant(False))

    def _resource_apply_dense(self, grad, var, apply_state=None):
        parent = super()._resource_apply_dense
        return self._conditional(grad, var, lambda: parent(grad, var, apply_state=apply_state))

    def _resource_apply_sparse(self, grad, var, indices, apply_state=None):
        parent = super()._resource_apply_sparse
        return self._conditional(
            grad, var, lambda: parent(grad, var, indices, apply_state=apply_state)
        )


_MIXIN_CLASSES = {}


def add_mixin(instance, mixin):
    """Adds :obj:`mixin` first to the class of an existing object, in place.

    For objects that OpenNMT-tf constructs itself (the optimizer from the
    configuration, the layers of a stock encoder or decoder): the instance keeps its
    state, sublayers, configuration and checkpoint layout; the mixin's methods run
    before the stock ones (``super()`` reaches them). One class per (class, mixin).

    Returns:
      The same object.
    """
    if isinstance(instance, mixin):
        return instance
    key = (instance.__class__, mixin)
    if key not in _MIXIN_CLASSES:
        name = "%s%s" % (mixin.__name__.lstrip("_"), key[0].__name__)
        _MIXIN_CLASSES[key] = type(name, (mixin, key[0]), {})
    instance.__class__ = _MIXIN_CLASSES[key]
    return instance


def add_optimizer_mixin(optimizer, mixin):
    """Adds :obj:`mixin` to the class of an existing optimizer, in place.

    The instance keeps its configuration, learning-rate schedule, slots and
    checkpoint layout.

    Returns:
      The same optimizer.
    """
    return add_mixin(optimizer, mixin)


def run_onmt_main(argv, runner_class):
    """Runs ``onmt-main``'s ``main()`` on :obj:`argv` with :obj:`runner_class`.

    Every flag and sub-command of ``onmt-main`` works unchanged.
    """
    saved = onmt_main.Runner, sys.argv
    onmt_main.Runner = runner_class
    sys.argv = [sys.argv[0]] + list(argv)
    try:
        return onmt_main.main()
    finally:
        onmt_main.Runner, sys.argv = saved


def initialize_logging(level_name):
    """Sets up logging as ``onmt-main`` does (level name, e.g. ``"INFO"``)."""
    onmt_main._initialize_logging(getattr(logging, level_name))


def decode_target(model, labels, memory, state, memory_length, training=None):
    """The teacher-forced decoder pass of a ``SequenceToSequence`` model
    (``_decode_target``), without the rest of ``call`` (for analyses that read the
    decoder layers, e.g. the domain proportions of a mixing model)."""
    return model._decode_target(labels, memory, state, memory_length, training=training)


def training_steps(trainer, dataset, accum_steps=1):
    """Iterates the training steps of an ``opennmt.training.Trainer`` (losses), without
    its checkpoint, summary and evaluation loop."""
    # Trainer.__call__ creates the statistics that _steps updates.
    trainer._training_stats = training_module.TrainingStats(trainer._model, trainer._optimizer)
    return trainer._steps(dataset, accum_steps=accum_steps)


def install_error_hook():
    """Prints an uncaught :class:`~ldr_opennmt.errors.UserError` as one line, exit 2.

    Other exceptions keep the default traceback. Installed when the package is
    imported, which ``onmt-main --model`` does through the model definition: stock
    ``onmt-main`` catches nothing, so this is the only way its users get the same
    one-line errors as ``ldr-main``.
    """
    previous = sys.excepthook
    if getattr(previous, "_ldr_opennmt", False):
        return

    def _hook(exc_type, exc, traceback):
        if isinstance(exc, errors.UserError):
            errors.report(errors.PACKAGE_PROG, exc)
            raise SystemExit(errors.EXIT_STATUS)
        previous(exc_type, exc, traceback)

    _hook._ldr_opennmt = True
    sys.excepthook = _hook
