"""Adapters on OpenNMT-tf's classes, and the ledger of every upstream name the package uses.

ldr-opennmt is pinned to OpenNMT-tf :data:`PINNED_OPENNMT`. Where the public API
offers no hook, the package relies on the upstream names listed in
:data:`UPSTREAM_NAMES`; they are used in this module, in :mod:`ldr_opennmt.upstream.onmt_main`
(taking over ``onmt-main``) and in :mod:`ldr_opennmt.upstream.patches`, and all of them are
listed here, so whoever upgrades OpenNMT-tf reads one list. ``tests/upstream/test_ledger.py``
checks the version and every listed name, and fails naming what broke.

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
  (Behaviours added to stock layers use no private name: they are
  :func:`ldr_opennmt.layers.behaviours.install_behaviour`'s job.)
* :func:`decode_target`: the teacher-forced decoder pass of
  ``SequenceToSequence.call`` (``_decode_target``), for analyses of the decoder layers.
* :func:`set_state_reorder_flags` and :func:`decoding_predictions`: the ensembles of
  domain views (:mod:`ldr_opennmt.models.ensemble`) run their own step function through
  the public ``opennmt.utils.dynamic_decode``. Beam search must still know which parts of
  the decoder state it may leave unreordered (``Decoder.dynamic_decode`` passes the
  private ``_get_state_reorder_flags`` to the strategy's ``_set_state_reorder_flags``),
  and the predictions are built as the end of ``SequenceToSequence._dynamic_decode``
  builds them (ids to tokens, ``decoding_noise`` through ``_add_noise``, detokenization
  in graph, ``num_hypotheses``), which is not a function of its own.
* :class:`HorovodTrainerAdapter` and :func:`horovod_trainer_class`: the Horovod
  trainer's step loop (``_steps``) and variable broadcast (``_broadcast_variables``),
  for a trainer that broadcasts before the first step and by position
  (:mod:`ldr_opennmt.training.horovod`); ``Runner.train`` builds it through the module
  global ``opennmt.runner.training_util``, swapped for the duration of the call only.
* :mod:`ldr_opennmt.upstream.patches` (names of this ledger, each listed here):
  ``opennmt.Runner.train`` wrapped to take the training lock of its ``model_dir`` and write
  ``domains.json`` when OpenNMT-tf's own Runner trains (``Runner._finalize_config`` and
  ``_init_model`` read its configuration and model), and
  ``opennmt.utils.checkpoint.Checkpoint.restore`` wrapped to refuse a checkpoint of another
  model, as stock ``onmt-main`` has no hook around either.
* :mod:`ldr_opennmt.upstream.onmt_main` (taking over ``onmt-main``: ``ldr-main``'s run of its
  ``main()`` with the package's Runner, the deferred copy of the model definition and
  the log format): the names of ``opennmt.bin.main`` it uses are listed here.
"""

import contextlib
import types

import opennmt
import tensorflow as tf
from opennmt import evaluation
from opennmt import runner as runner_module
from opennmt import training as training_module
from opennmt.bin import main as onmt_main
from opennmt.models import sequence_to_sequence as s2s_module
from opennmt.utils import checkpoint as checkpoint_module
from opennmt.utils import misc

PINNED_OPENNMT = "2.32.0"

#: (object, attribute, what uses it). Instance attributes are checked on instances
#: by the tests (``tests/upstream/test_ledger.py``).
UPSTREAM_NAMES = (
    (
        opennmt.Runner,
        "_finalize_config",
        "RunnerAdapter.finalized_config, patches.record_domains, patches.trained_already",
    ),
    (opennmt.Runner, "_init_model", "RunnerAdapter.new_model, patches.record_domains"),
    (runner_module, "evaluation", "evaluator_class (per-domain evaluation)"),
    (evaluation.Evaluator, "_record_results", "EvaluatorAdapter.record"),
    (evaluation.Evaluator, "_maybe_export", "EvaluatorAdapter.record"),
    (evaluation.Evaluator, "_maybe_garbage_collect_exports", "EvaluatorAdapter.record"),
    (evaluation.Evaluator, "_is_higher_better_for_metric", "EvaluatorAdapter.metric_base_name"),
    (opennmt.models.SequenceToSequence, "_dynamic_decode", "DecodingScopeMixin"),
    (opennmt.models.SequenceToSequence, "_decode_target", "decode_target"),
    (opennmt.decoders.Decoder, "_get_state_reorder_flags", "set_state_reorder_flags"),
    (opennmt.utils.BeamSearch, "_set_state_reorder_flags", "set_state_reorder_flags"),
    (s2s_module, "_add_noise", "decoding_predictions"),
    (tf.keras.optimizers.legacy.Optimizer, "_resource_apply_dense", "ConditionalUpdateMixin"),
    (tf.keras.optimizers.legacy.Optimizer, "_resource_apply_sparse", "ConditionalUpdateMixin"),
    (onmt_main, "Runner", "onmt_main.run_onmt_main"),
    (onmt_main, "main", "onmt_main.run_onmt_main"),
    (
        onmt_main,
        "config_util",
        "onmt_main.run_onmt_main (model description written after the checks)",
    ),
    (onmt_main, "_initialize_logging", "onmt_main.initialize_logging"),
    (training_module.Trainer, "_steps", "training_steps"),
    (runner_module, "training_util", "horovod_trainer_class"),
    (training_module.HorovodTrainer, "_broadcast_variables", "HorovodTrainerAdapter"),
    (training_module.HorovodTrainer, "_steps", "HorovodTrainerAdapter"),
    (training_module, "TrainingStats", "training_steps"),
    (opennmt.Runner, "train", "patches.guard_training"),
    (checkpoint_module.Checkpoint, "restore", "patches.install_checkpoint_check"),
    (opennmt.Runner, "model_dir", "patches.guard_training"),
)

#: Attributes that OpenNMT-tf sets on instances (checked on built objects by the tests).
RUNNER_INSTANCE_NAMES = ("_config",)
TRAINER_INSTANCE_NAMES = ("_model", "_optimizer", "_training_stats")
CHECKPOINT_INSTANCE_NAMES = ("_model", "_optimizer", "_model_dir")
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
            else "the names it relies on exist (see ldr_opennmt/upstream/ledger.py)"
        ),
    )


def instance_attribute(obj, name):
    try:
        return getattr(obj, name)
    except AttributeError as e:
        raise RuntimeError(
            "OpenNMT-tf %s: %s has no attribute %s (ldr-opennmt is pinned to %s; see "
            "ldr_opennmt/upstream/ledger.py)"
            % (opennmt.__version__, type(obj).__name__, name, PINNED_OPENNMT)
        ) from e


class RunnerAdapter(opennmt.Runner):
    """``opennmt.Runner`` with public names for what the multi-domain Runner needs."""

    @property
    def config(self):
        """The run configuration (user files merged, paths resolved; not auto-config)."""
        return instance_attribute(self, "_config")

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


class _TrainingModule:
    """``opennmt.training`` with some of its classes replaced."""

    def __init__(self, **classes):
        self.__dict__.update(classes)

    def __getattr__(self, name):
        return getattr(training_module, name)


class HorovodTrainerAdapter(training_module.HorovodTrainer):
    """``opennmt.training.HorovodTrainer`` with two hooks for subclasses.

    * :meth:`before_steps`: called before the first training step (``_steps``).
    * :meth:`broadcast`: replaces the broadcast of the model's and the optimizer's
      variables after the first step (``_broadcast_variables``).
    """

    def before_steps(self, hvd, model, optimizer):
        """Hook: runs before the first training step (default: nothing)."""

    def broadcast(self, hvd, model, optimizer):
        """Hook: gives every worker worker 0's model and optimizer variables."""
        super()._broadcast_variables()

    def _steps(self, dataset, accum_steps=1):
        self.before_steps(self._hvd, self._model, self._optimizer)
        yield from super()._steps(dataset, accum_steps=accum_steps)

    def _broadcast_variables(self):
        self.broadcast(self._hvd, self._model, self._optimizer)


@contextlib.contextmanager
def horovod_trainer_class(cls):
    """Makes ``opennmt.Runner.train`` build its Horovod trainer with :obj:`cls`.

    It calls ``training_util.HorovodTrainer`` through the module global
    ``opennmt.runner.training_util``; it is swapped for the duration of the call only.
    """
    original = runner_module.training_util
    runner_module.training_util = _TrainingModule(HorovodTrainer=cls)
    try:
        yield
    finally:
        runner_module.training_util = original


class EvaluatorAdapter(evaluation.Evaluator):
    """``opennmt.evaluation.Evaluator`` with public names for its internals."""

    @property
    def model(self):
        return instance_attribute(self, "_model")

    @property
    def dataset(self):
        """The evaluation dataset built by the parent constructor."""
        return instance_attribute(self, "_dataset")

    @property
    def scorers(self):
        return instance_attribute(self, "_scorers")

    @property
    def saves_predictions(self):
        return instance_attribute(self, "_save_predictions")

    @property
    def eval_dir(self):
        return instance_attribute(self, "_eval_dir")

    def eval_step(self, features, labels):
        """The compiled evaluation function: (loss, predictions) of one batch."""
        return instance_attribute(self, "_eval_fn")(features, labels)

    def add_metric_names(self, names):
        """Declares more metric names (valid for early stopping and export_on_best)."""
        instance_attribute(self, "_metrics_name").update(names)

    def metric_names(self):
        return set(instance_attribute(self, "_metrics_name"))

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


def set_state_reorder_flags(strategy, decoder):
    """Gives :obj:`strategy` (beam search) the decoder's state reorder flags, as
    ``Decoder.dynamic_decode`` does (a state part marked ``False``, e.g. the cached
    memory projections, is the same for every hypothesis and is not gathered)."""
    if hasattr(strategy, "_set_state_reorder_flags"):
        strategy._set_state_reorder_flags(decoder._get_state_reorder_flags())


def decoding_predictions(model, result, batch_size):
    """The predictions dict of ``SequenceToSequence._dynamic_decode`` from a decoding result.

    A copy of the end of that method (OpenNMT-tf 2.32) for the cases multi-domain models
    allow (no TensorFlow Lite mode, no ``replace_unknown_target``).

    Args:
      model: The sequence-to-sequence model.
      result: The :class:`opennmt.utils.DecodingResult` (``ids`` ``[batch, beam, time]``).
      batch_size: The number of sentences.
    """
    params = model.params
    beam_size = params.get("beam_width", 1)
    sampled_length = result.lengths
    alignment = result.attention
    target_tokens = model.labels_inputter.ids_to_tokens.lookup(tf.cast(result.ids, tf.int64))
    decoding_noise = params.get("decoding_noise")
    if decoding_noise:
        target_tokens, sampled_length = s2s_module._add_noise(
            target_tokens,
            sampled_length,
            decoding_noise,
            params.get("decoding_subword_token", "￭"),
            params.get("decoding_subword_token_is_spacer"),
        )
        alignment = None
    predictions = {"log_probs": result.log_probs}
    if model.labels_inputter.tokenizer.in_graph:
        text = model.labels_inputter.tokenizer.detokenize(
            tf.reshape(target_tokens, [batch_size * beam_size, -1]),
            sequence_length=tf.reshape(sampled_length, [batch_size * beam_size]),
        )
        predictions["text"] = tf.reshape(text, [batch_size, beam_size])
    else:
        predictions["tokens"] = target_tokens
        predictions["length"] = sampled_length
        if alignment is not None:
            predictions["alignment"] = alignment
    num_hypotheses = params.get("num_hypotheses", 1)
    if num_hypotheses > 0:
        if num_hypotheses > beam_size:
            raise ValueError("n_best cannot be greater than beam_width")
        for key, value in predictions.items():
            predictions[key] = value[:, :num_hypotheses]
    return predictions


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


#: One class per (optimizer class, mixin).
_OPTIMIZER_CLASSES = {}


def add_optimizer_mixin(optimizer, mixin):
    """Adds :obj:`mixin` first to the class of an existing optimizer, in place.

    The optimizer is built by OpenNMT-tf's ``make_optimizer`` from the configuration:
    the instance keeps its configuration, learning-rate schedule, slots and checkpoint
    layout; the mixin's methods run before the stock ones (``super()`` reaches them).
    Adding a mixin the optimizer already has changes nothing.

    Returns:
      The same optimizer.
    """
    if isinstance(optimizer, mixin):
        return optimizer
    key = (optimizer.__class__, mixin)
    if key not in _OPTIMIZER_CLASSES:
        name = "%s%s" % (mixin.__name__.lstrip("_"), key[0].__name__)
        _OPTIMIZER_CLASSES[key] = type(name, (mixin, key[0]), {})
    optimizer.__class__ = _OPTIMIZER_CLASSES[key]
    return optimizer


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
