"""The multi-domain Runner: what stock ``onmt-main`` training cannot express.

:class:`Runner` is an ``opennmt.Runner`` (same methods, same configuration,
same checkpoints: a model trained by one is continued, evaluated and exported
by the other) that adds:

* per-domain corpora (``data: train_corpora`` / ``eval_corpora``, see
  :mod:`ldr_opennmt.training.corpora`) without label files;
* Procedure 1's domain sampling: each batch comes from one domain, drawn with
  probability ``|C_i|^alpha / sum_j |C_j|^alpha`` (``train:
  domain_sampling_alpha``, default 1; ``domain_batches: false`` mixes domains
  inside batches with the same proportions);
* evaluation per domain (:class:`~ldr_opennmt.training.evaluator.MultiDomainEvaluator`);
* fine-tuning baselines (``finetune: {base, domain, steps}``): continue a trained
  model on one domain's corpus (or, without ``domain``, on all corpora) in a new
  model directory, the base model untouched;
* new domains on a trained model (:mod:`ldr_opennmt.domain_record`): the
  declared domains are checked against those the checkpoint was trained with, and
  domains appended to the list take the checkpoint's reserved regions;
* configuration checks before anything is written (:meth:`Runner.validate`): the
  vocabularies and tokenizers, the model's ``params``, the training and evaluation
  files and their domain labels, each error one line naming the key and the file;
* Horovod (``--horovod``, :mod:`ldr_opennmt.training.horovod`): worker 0 alone writes
  what the Runner writes, the workers check that they build the same model, and their
  variables are equal before the first step;
* inference (``infer``, hence ``ldr-main infer`` and ``ldr-eval``) that writes its
  predictions under a temporary name renamed when complete, and warns about the
  translations that stopped at ``maximum_decoding_length``; exports built under a
  temporary name too (:func:`ldr_opennmt.assets.export_directory`).
"""

import json
import os

import tensorflow as tf
from opennmt import config as config_util
from opennmt import inference
from opennmt.utils import checkpoint as checkpoint_util

from ldr_opennmt import assets as assets_lib
from ldr_opennmt import checkpoints, config_keys, domain_record
from ldr_opennmt import domains as domains_lib
from ldr_opennmt import ensembles, locks
from ldr_opennmt.errors import UserError
from ldr_opennmt.models.sequence_to_sequence import MultiDomainModel
from ldr_opennmt.training import corpora as corpora_lib
from ldr_opennmt.training import data_files, eta, horovod, inference_checks, recipe_checks
from ldr_opennmt.training.evaluator import MultiDomainEvaluator, evaluation_sets
from ldr_opennmt.upstream import ledger, onmt_main, patches
from ldr_opennmt.utils import atomic_output, same_file, write_lines_atomic

FINETUNE_STATE = "finetune.json"
# Only PA keeps a plain Transformer's attention shapes (SF and DF: multi-query attention).
_PLAIN_BASE_HINT = " (a plain Transformer fits PA only: SF and DF use multi-query attention)"
_ADAPTER_BASE_HINT = (
    " (residual adapters go on a Mixed model of the same size and embedding sharing)"
)
MODEL_DESCRIPTION = "model_description.py"
#: OpenNMT-tf's default ``params: maximum_decoding_length`` (in
#: ``SequenceToSequence._dynamic_decode``).
DEFAULT_MAXIMUM_DECODING_LENGTH = 250


class Runner(ledger.RunnerAdapter):
    """``opennmt.Runner`` with per-domain corpora, domain sampling and fine-tuning.

    It is also the one way to load a trained model (:meth:`from_files`, then
    :meth:`restore`), used by every command of the package.
    """

    #: This Runner takes the training lock of its ``model_dir`` and writes ``domains.json``
    #: itself: the guard of stock ``opennmt.Runner.train``
    #: (:func:`ldr_opennmt.upstream.patches.guard_training`) leaves it alone.
    guards_model_dir = True

    def __init__(self, model, config, **kwargs):
        # The package's keys (type, range, section) before anything else reads them.
        config_keys.check_config(config)
        super().__init__(model, config, **kwargs)
        self._corpora = None
        self._regions = None
        self._checked_model = None
        self._validated = set()
        data_files.check_data_files(self.config["data"])
        self._expand_corpora()
        self._match_trained_domains()

    @staticmethod
    def read_config(config_paths, model_dir=None, model_file=None):
        """The configuration of a trained model, merged from :obj:`config_paths`.

        Args:
          config_paths: The run configuration files (merged in order).
          model_dir: Overrides ``model_dir`` of the configuration.
          model_file: A model definition file; without one, ``model_dir`` must hold
            the ``model_description.py`` that ``onmt-main``/``ldr-main`` copy there.

        Raises:
          UserError: on a missing configuration file, ``model_dir`` or model definition.
        """
        config = onmt_main.load_run_config(config_paths)
        if model_dir:
            config["model_dir"] = model_dir
        if not config.get("model_dir"):
            raise UserError(
                "%s: no model_dir in the configuration or on the command line"
                % " ".join(config_paths)
            )
        if not model_file and not tf.io.gfile.exists(
            os.path.join(config["model_dir"], MODEL_DESCRIPTION)
        ):
            raise UserError(
                "no trained model in %s (no %s)" % (config["model_dir"], MODEL_DESCRIPTION)
            )
        return config

    @classmethod
    def from_files(cls, config_paths, model_dir=None, model_file=None, auto_config=None, **kwargs):
        """The Runner of a model directory, as ``ldr-main`` builds it: the one way the
        package's commands load a trained model (then :meth:`restore` or :meth:`infer`).

        Args:
          config_paths: The run configuration files (merged in order).
          model_dir: Overrides ``model_dir`` of the configuration.
          model_file: A model definition file (default: the model directory's
            ``model_description.py``).
          auto_config: Whether to use the model's automatic configuration.
          **kwargs: Other ``opennmt.Runner`` arguments (``mixed_precision``, ...).

        Raises:
          UserError: see :meth:`read_config`, and any configuration error.
        """
        config = cls.read_config(config_paths, model_dir=model_dir, model_file=model_file)
        builder = config_util.load_model(
            config["model_dir"], model_file=model_file or "", serialize_model=False, as_builder=True
        )
        return cls(builder, config, auto_config=auto_config, **kwargs)

    def latest_checkpoint(self, checkpoint_path=None):
        """The checkpoint :meth:`restore` reads: :obj:`checkpoint_path` (a directory's
        latest) or the latest of ``model_dir``.

        Raises:
          UserError: if there is none.
        """
        path = checkpoints.checkpoint_of(checkpoint_path or self.model_dir)
        if path is None or not tf.io.gfile.exists(path + ".index"):
            raise UserError("%s: no checkpoint found" % (checkpoint_path or self.model_dir))
        return path

    def restore(self, checkpoint_path=None):
        """The model with a checkpoint's weights, built, for inference or analysis.

        Args:
          checkpoint_path: A checkpoint or a model directory (default: ``model_dir``).

        Returns:
          (model, checkpoint path).

        Raises:
          UserError: if no checkpoint is found.
        """
        model, path, _ = self._restored(checkpoint_path)
        return model, path

    def _restored(self, checkpoint_path=None):
        """(model with the checkpoint's weights, its path, the config).

        The checkpoint must hold every variable of the model with its shape
        (:func:`ldr_opennmt.checkpoints.check_model_checkpoint`): a checkpoint of another
        model is refused by name, never restored partly.
        """
        path = self.latest_checkpoint(checkpoint_path)
        config = self.finalized_config()
        model = self.checked_new_model(config)
        model.create_variables()
        checkpoints.check_model_checkpoint(model, path)
        # What OpenNMT-tf's weights-only restoration does, without its check a second time.
        tf.train.Checkpoint(model=model).restore(path).expect_partial()
        return model, path, config

    def checked_new_model(self, config):
        """:meth:`new_model`, with OpenNMT-tf's errors about a file of the ``data``
        configuration (a vocabulary, a tokenizer) as one line naming the key.

        Raises:
          UserError: on a configuration error.
        """
        try:
            return self.new_model(config)
        except UserError:
            raise
        except (tf.errors.OpError, OSError, ValueError) as e:
            error = data_files.data_error(config["data"], e)
            if error is None:
                # An error that names no file (an empty vocabulary, a repeated token...):
                # the files may have changed since the constructor checked them.
                data_files.check_data_files(config["data"])
                raise
            raise error from e

    def validate(self, run_type=None, with_eval=False):
        """Checks the configuration of a run before anything is written.

        The constructor checked the per-domain corpora, the domains and the vocabulary
        files; this initializes the model (``params``, tokenizers, the vocabularies'
        contents) and, for ``train``, checks the training files (and with
        :obj:`with_eval` the evaluation files): every file exists and every domain label
        is declared. ``ldr-main`` calls it before ``onmt-main`` copies the model
        definition to ``model_dir``; :meth:`train` calls it before it writes anything.

        Args:
          run_type: The ``onmt-main`` run type (``train``, ``infer``, ...), if known.
          with_eval: Whether training evaluates.

        Raises:
          UserError: on the first error, in one line.
        """
        key = (run_type, bool(with_eval))
        if key in self._validated:
            return
        if self._checked_model is None:
            self._checked_model = self.checked_new_model(self.finalized_config())
        if run_type == "train":
            data = self.config["data"]
            if not data.get("train_features_file"):
                raise UserError("data: train_features_file (or train_corpora) is missing")
            self._check_examples(
                "train", data["train_features_file"], data.get("train_labels_file"), training=True
            )
            if with_eval:
                self._check_evaluation_files()
        self._validated.add(key)

    def _check_examples(self, split, features_file, labels_file, training=False):
        """Checks that the files of one data set exist and that its domain labels are
        declared (the inputters' own checks, which OpenNMT-tf runs only once it has
        started writing summaries)."""
        model = self._checked_model
        for key, value in (("features", features_file), ("labels", labels_file)):
            for path in data_files.file_paths(value):
                if not tf.io.gfile.exists(path):
                    raise UserError("data: %s_%s_file: file not found: %s" % (split, key, path))
        if training and hasattr(model.examples_inputter, "check_training_files"):
            # UTF-8, aligned line counts and empty pairs of plain training files, before
            # anything is written (remembered: the training dataset does not read them again).
            model.examples_inputter.check_training_files(features_file, labels_file)
        model.features_inputter.make_dataset(features_file, training=training)
        if labels_file is not None:
            model.labels_inputter.make_dataset(labels_file, training=training)

    def _check_evaluation_files(self, features_file=None, labels_file=None):
        data = self.config["data"]
        if features_file is None:
            features_file = data.get("eval_features_file")
            labels_file = data.get("eval_labels_file")
        if not features_file:
            raise UserError(
                "evaluation needs data: eval_features_file and eval_labels_file (or eval_corpora)"
            )
        for _, features, labels in evaluation_sets(features_file, labels_file):
            self._check_examples("eval", features, labels)

    @property
    def is_classifier(self):
        return getattr(self.model, "is_domain_classifier", False)

    @property
    def domains(self):
        """The declared domains (from ``data: domains`` or the corpora order)."""
        return corpora_lib.domain_names(self.config["data"])

    @property
    def corpora(self):
        """The training corpora (a list of :class:`~ldr_opennmt.training.corpora.Corpus`)."""
        return self._corpora

    def _expand_corpora(self):
        data = self.config["data"]
        if (self.config.get("finetune") or {}).get("unfold"):
            # The curriculum's stage 2: domain blocks only, the rest frozen.
            params = self.config.setdefault("params", {})
            params.setdefault("domain_training", "domains")
            if params["domain_training"] == "general":
                # Training the general copies after copying them into the domains
                # would leave every domain block behind: a stage-1 setting carried over.
                raise UserError(
                    "finetune: unfold trains the domain blocks: params: domain_training: "
                    "general (stage 1's mode) cannot follow it (use domains, or remove the key)"
                )
        train = self.config.setdefault("train", {})
        finetune = self.config.get("finetune")
        if not data.get("train_corpora") and not data.get("eval_corpora"):
            if finetune:
                raise UserError("finetune needs per-domain corpora (data: train_corpora)")
            return
        data["domains"] = corpora_lib.domain_names(data)
        eval_corpora = corpora_lib.read_corpora(data, "eval_corpora")
        if eval_corpora is not None:
            for key in ("eval_features_file", "eval_labels_file"):
                if data.get(key) is not None:
                    raise UserError("data: give either eval_corpora or %s, not both" % key)
            # One dev set per domain: the evaluator scores each (see evaluator.py).
            features, labels = corpora_lib.example_files(
                eval_corpora, classifier=self.is_classifier
            )
            data["eval_features_file"], data["eval_labels_file"] = features, labels
        corpora = corpora_lib.read_corpora(data, "train_corpora")
        if corpora is None:
            return
        for key in ("train_features_file", "train_labels_file"):
            if data.get(key) is not None:
                raise UserError("data: give either train_corpora or %s, not both" % key)
        if finetune and finetune.get("domain") is not None:
            corpora = [self._finetune_corpus(finetune, corpora)]
        self._corpora = corpora
        features, labels = corpora_lib.example_files(corpora, classifier=self.is_classifier)
        data["train_features_file"] = features
        data["train_labels_file"] = labels
        alpha = train.get("domain_sampling_alpha", 1.0)
        probabilities, weights = corpora_lib.sampling(corpora, alpha)
        if len(corpora) > 1:
            data["train_files_weights"] = weights
            data.setdefault("domain_batches", True)
        tf.get_logger().info(
            "Training corpora (alpha=%s): %s",
            alpha,
            ", ".join(
                "%s %d sentences p=%.4f" % (c.domain, c.size, p)
                for c, p in zip(corpora, probabilities)
            ),
        )

    def _trained_checkpoint(self):
        """The checkpoint this run starts from: the latest of ``model_dir``, else the
        fine-tuning base's (``None`` for a new model)."""
        latest = tf.train.latest_checkpoint(self.model_dir)
        if latest is not None:
            return latest
        base = (self.config.get("finetune") or {}).get("base")
        return checkpoints.checkpoint_of(base) if base else None

    def _match_trained_domains(self):
        """Checks the declared domains against the trained model's; new domains take
        reserved regions (the finalized ``data: domain_regions`` is the checkpoint's)."""
        data = self.config["data"]
        declared = data.get("domains")
        checkpoint = self._trained_checkpoint()
        if declared is None or checkpoint is None:
            return
        if not tf.io.gfile.exists(checkpoint + ".index"):
            return  # Reported by OpenNMT-tf or by the fine-tuning checks.
        declared = domains_lib.validate_domain_names(declared, source="the data configuration")
        checkpoint_dir = os.path.dirname(checkpoint)
        recorded, regions = domain_record.read_record(checkpoint_dir)
        if regions is None:
            regions = self._checkpoint_regions(checkpoint)
        if not regions:
            return  # A model without domain parameters (Mixed): labels are ignored.
        new = domain_record.check_domains(declared, recorded, regions, checkpoint_dir)
        self._regions = regions
        if recorded is None:
            tf.get_logger().warning(
                "%s has no %s (trained by stock onmt-main?): the domain order cannot be "
                "checked; declared domains take regions 0-%d of %d",
                checkpoint_dir,
                domain_record.RECORD,
                len(declared) - 1,
                regions,
            )
        elif new:
            tf.get_logger().info(
                "New domains %s take reserved regions %s of %d (they start as generic); "
                "%s keep their ids",
                ", ".join(new),
                ", ".join(str(declared.index(name)) for name in new),
                regions,
                ", ".join(recorded),
            )

    def _checkpoint_regions(self, checkpoint):
        """The regions of a checkpoint that has no record (trained by stock onmt-main):
        a model built as configured tells which of its regions the checkpoint holds."""
        model = self.new_model(self.finalized_config())
        if not hasattr(model, "domain_weights"):
            return 0  # Not a multi-domain translation model (the domain classifier).
        model.create_variables()
        return domain_record.checkpoint_regions(model, checkpoint)

    def finalize_config(self, config):
        data, train = config["data"], config["train"]
        if self._regions:
            # The trained checkpoint's shape: appended domains take reserved regions.
            data["domain_regions"] = self._regions
        if data.get(ensembles.CONFIG_KEY) is None and data.get("domains") is not None:
            # The ens-learned weights fitted for this model (`ldr-eval fit-ensemble`).
            try:
                learned = ensembles.read_weights_file(self.model_dir, data["domains"])
            except UserError as e:  # E.g. fitted before a domain was added: refit.
                tf.get_logger().warning("ens-learned is not available: %s", e)
                learned = None
            if learned is not None:
                data[ensembles.CONFIG_KEY] = learned
        if (
            self._corpora
            and data.get("train_files_weights")
            and not data.get("domain_batches")
            and train.get("sample_buffer_size", 0) < 0
        ):
            # OpenNMT-tf refuses a negative ("whole dataset") buffer for weighted
            # datasets; the size of all corpora together is the same full shuffle.
            train["sample_buffer_size"] = sum(corpus.size for corpus in self._corpora)
        return config

    def domain_regions(self):
        """The number of domain regions of the model this Runner trains or loads."""
        if self._regions:
            return self._regions  # A trained checkpoint's.
        self.validate()
        model = self._checked_model
        return model.domain_regions() if hasattr(model, "domain_regions") else 0

    def _requires_base(self):
        """Whether the model trains only on top of a trained base (residual adapters)."""
        self.validate()
        return bool(getattr(self._checked_model, "requires_base", False))

    def _finetune_corpus(self, finetune, corpora):
        domain = finetune.get("domain")
        names = [c.domain for c in corpora]
        if domain not in self.config["data"]["domains"]:
            raise UserError(
                "finetune: domain %r is not declared (declared: %s)"
                % (domain, ", ".join(self.config["data"]["domains"]))
            )
        if domain not in names:
            raise UserError("finetune: domain %r has no corpus in data: train_corpora" % domain)
        return corpora[names.index(domain)]

    def _prepare_finetune(self, finetune):
        """Sets max_step; returns the ``train`` arguments, or ``None`` if already done."""
        base = finetune.get("base")
        steps = finetune.get("steps")
        if not base:
            raise UserError("finetune: base (the trained model directory) is missing")
        if not isinstance(steps, int) or steps <= 0:
            raise UserError("finetune: steps must be a positive integer, got %r" % (steps,))
        model_dir = self.model_dir
        base_is_dir = tf.io.gfile.isdir(base)
        base_dir = base if base_is_dir else os.path.dirname(base)
        if os.path.realpath(base_dir) == os.path.realpath(model_dir):
            raise UserError(
                "finetune: model_dir %s is the base model's directory; fine-tuning writes "
                "to a new model_dir so that the base model stays intact" % model_dir
            )
        state_path = os.path.join(model_dir, FINETUNE_STATE)
        latest = tf.train.latest_checkpoint(model_dir)
        if latest is not None and os.path.exists(state_path):
            # An interrupted fine-tuning: resume from its own last checkpoint.
            with open(state_path) as f:
                state = json.load(f)
            checkpoint_path, continue_training = None, False
        else:
            checkpoint_path = checkpoints.checkpoint_of(base)
            if checkpoint_path is None or not tf.io.gfile.exists(checkpoint_path + ".index"):
                raise UserError("finetune: base: no checkpoint found in %s" % base)
            state = {
                "base_checkpoint": checkpoint_path,
                "base_step": checkpoint_util.get_step_from_checkpoint_prefix(checkpoint_path),
                "domain": finetune.get("domain"),
                "steps": steps,
                "unfold": bool(finetune.get("unfold")),
            }
            continue_training = True
            if state["unfold"] or self._requires_base():
                # Written to model_dir as its first checkpoint: training continues from it.
                self._graft(base_dir, checkpoint_path, state["base_step"], state["unfold"])
                checkpoint_path, continue_training = None, False
            tf.io.gfile.makedirs(model_dir)
            write_lines_atomic(state_path, [json.dumps(state, indent=2)])
        max_step = state["base_step"] + steps
        self.config["train"]["max_step"] = max_step
        if (
            latest is not None
            and checkpoint_util.get_step_from_checkpoint_prefix(latest) >= max_step
        ):
            tf.get_logger().info("Fine-tuning already finished: %s", latest)
            return None
        tf.get_logger().info(
            "%s %s (step %d) on %s for %d steps (until step %d) in %s",
            "Fine-tuning" if state["domain"] else "Continuing",
            state["base_checkpoint"],
            state["base_step"],
            state["domain"] or "all corpora (%s)" % ", ".join(self.domains),
            steps,
            max_step,
            model_dir,
        )
        return {"checkpoint_path": checkpoint_path, "continue_from_checkpoint": continue_training}

    def _graft(self, base_dir, base_checkpoint, step, unfold):
        """Restores a base checkpoint (weights and optimizer state) into this model and
        saves it as ``model_dir``'s checkpoint ``step``: the start of a training stage on
        top of a trained model.

        Two uses:

        * the Factorized curriculum's stage 2 (:obj:`unfold`): the base is a stage-1
          checkpoint of the same design, or a plain Transformer of the same size
          (``mixed_transformer``, the Mixed baseline) for the PA design, whose attention
          has a plain Transformer's shapes; its weights become the general copies, then
          every domain copy is set from its general copy, so stage 2 starts from the same
          converged general model as the fine-tuning baselines. (SF and DF use
          multi-query attention, one key/value head: no plain Transformer fits them.)
        * residual adapters (a model with ``requires_base``): the base is a plain
          Transformer of the same size and embedding sharing; the adapters, the only
          variables it has no value for, keep their initial values (the identity).

        Raises:
          UserError: if the model has no general copies to unfold, the base was
            already unfolded, or it is not a checkpoint of this model nor of a plain
            Transformer that fits it.
        """
        if unfold:
            base_state = os.path.join(base_dir, FINETUNE_STATE)
            if tf.io.gfile.exists(base_state):
                with tf.io.gfile.GFile(base_state) as f:
                    previous = json.load(f)
                if previous.get("unfold"):
                    raise UserError(
                        "finetune: unfold: %s is already unfolded (from %s): unfold a stage-1 "
                        "model" % (base_dir, previous.get("base_checkpoint"))
                    )
        config = self.finalized_config()
        model = self.new_model(config)
        if unfold and not hasattr(model, "unfold"):
            raise UserError(
                "finetune: unfold needs a model with general copies (a Factorized Transformer), "
                "not %s" % type(model).__name__
            )
        hint = _PLAIN_BASE_HINT if unfold else _ADAPTER_BASE_HINT
        optimizer = model.get_optimizer()
        model.create_variables(optimizer=optimizer)
        # Variables are restored in place; a sentinel shows which ones the checkpoint has
        # no value for.
        weights = model.weights
        initial = [tf.convert_to_tensor(v) for v in weights]
        for variable in weights:
            variable.assign(tf.fill(tf.shape(variable), float("nan")))
        try:
            status = tf.train.Checkpoint(model=model, optimizer=optimizer).restore(base_checkpoint)
            status.expect_partial()
        except (AssertionError, ValueError, tf.errors.InvalidArgumentError) as e:
            raise UserError(
                "finetune: base %s is not a checkpoint of this model (same design and size) "
                "nor of a plain Transformer of its size%s: %s"
                % (base_checkpoint, hint, str(e).strip().splitlines()[0])
            ) from e
        missing = [
            (variable, value)
            for variable, value in zip(weights, initial)
            if bool(tf.reduce_all(tf.math.is_nan(tf.cast(variable, tf.float32))))
        ]
        # A plain Transformer has exactly no value for the domain variables (regions set
        # by unfold below, or the adapters) and for the constant F6 identities (set back
        # to their initial value); a checkpoint of another design has some of them:
        # refused.
        fixed = getattr(model, "fixed_general_copies", list)()
        plain = {v.ref() for v in model.domain_variables() + fixed}
        absent = {variable.ref() for variable, _ in missing}
        if absent and absent != plain:
            unexpected = [v.name for v, _ in missing if v.ref() not in plain]
            present = [v.name for v in model.domain_variables() if v.ref() not in absent]
            raise UserError(
                "finetune: base %s is not a checkpoint of this model (same design and size) "
                "nor of a plain Transformer of its size%s: %s"
                % (
                    base_checkpoint,
                    hint,
                    (
                        "no value for %s" % unexpected[0]
                        if unexpected
                        else "it has %s but not every domain block" % present[0]
                    ),
                )
            )
        stored = checkpoints.model_value_count(base_checkpoint)
        if stored > len(weights) - len(missing):
            # E.g. a Transformer with its own output layer: this model would drop it.
            raise UserError(
                "finetune: base %s has %d model weights and this model took %d: it is not a"
                " checkpoint of this model nor of a plain Transformer of its size%s (a plain"
                " base needs %s)"
                % (
                    base_checkpoint,
                    stored,
                    len(weights) - len(missing),
                    hint,
                    "share_target_embeddings" if unfold else "the same embedding sharing",
                )
            )
        for variable, value in missing:
            variable.assign(value)
        if missing:
            tf.get_logger().info(
                "%s is a plain Transformer's checkpoint: %s",
                base_checkpoint,
                (
                    "its weights are the general copies"
                    if unfold
                    else "the adapters start as identity"
                ),
            )
        if unfold:
            # The regions start as their general copies, Adam's moments included.
            model.unfold(optimizer=optimizer)
        checkpoint_util.Checkpoint.from_config(config, model, optimizer=optimizer).save(step)
        if unfold:
            tf.get_logger().info(
                "Unfolded the general copies of %s into every domain", base_checkpoint
            )

    def train(self, num_devices=1, with_eval=False, **kwargs):
        # Everything is checked before the first write (finetune.json, domains.json,
        # OpenNMT-tf's summaries and checkpoints).
        self.validate("train", with_eval=with_eval)
        finetune = self.config.get("finetune")
        if self._requires_base() and not finetune:
            name = type(self._checked_model).__name__
            if kwargs.get("checkpoint_path") and not kwargs.get("continue_from_checkpoint"):
                # Weights only: the step would restart at 0 (see the model's check).
                raise UserError(
                    "%s continues a trained base model: add --continue_from_checkpoint to "
                    "--checkpoint_path (or use finetune: {base: BASE_MODEL_DIR, steps: N})" % name
                )
            if not kwargs.get("checkpoint_path") and not tf.train.latest_checkpoint(self.model_dir):
                raise UserError(
                    "%s trains on top of a trained base model: give it with finetune: {base: "
                    "BASE_MODEL_DIR, steps: N} (model_dir %s has no checkpoint)"
                    % (name, self.model_dir)
                )
        hvd = kwargs.get("hvd")
        master = horovod.is_master(hvd)
        if not master:
            return self._train(num_devices, with_eval, kwargs)
        # One training per model_dir (ldr_opennmt.locks), before finetune.json and
        # domains.json are written; held until the training ends.
        with locks.model_dir_lock(self.model_dir, what="train or fine-tune"):
            return self._train(num_devices, with_eval, kwargs)

    def _train(self, num_devices, with_eval, kwargs):
        hvd = kwargs.get("hvd")
        master = horovod.is_master(hvd)
        finetune = self.config.get("finetune")
        declared = self.config["data"].get("domains")
        regions = self.domain_regions()
        horovod.check_same(hvd, (list(declared or []), regions), "(domains, domain regions)")
        if finetune:
            if kwargs.get("checkpoint_path"):
                raise UserError("finetune: base sets the checkpoint; do not pass --checkpoint_path")
            # Worker 0 writes finetune.json (and grafts); the others take its decision.
            restore = self._prepare_finetune(finetune) if master else None
            restore, max_step = horovod.from_master(
                hvd, (restore, self.config["train"].get("max_step")), "finetune"
            )
            self.config["train"]["max_step"] = max_step
            if restore is None:
                return self.model_dir
            kwargs.update(restore)
        given = kwargs.get("checkpoint_path")
        if not given and patches.trained_already(self):
            return self.model_dir  # Said in one line (stock onmt-main the same).
        path = None
        if master and not finetune:
            # Weights (or a whole state) from another directory, or the model directory's
            # own checkpoint when a training resumes: they must be this model's (a model
            # definition or size changed between two runs would be restored in part, then
            # fail at the first step or train on weights of another model), checked on a
            # model of its own (the training one is built later, under the distribution
            # strategy).
            path = (
                self.latest_checkpoint(given)
                if given
                else tf.train.latest_checkpoint(self.model_dir)
            )
        if path is not None:
            model = self.new_model(self.finalized_config())
            model.create_variables()
            # A model trained on top of a base (residual adapters) starts its own
            # variables from their initial values.
            absent_ok = model.domain_variables() if given and self._requires_base() else ()
            checkpoints.check_model_checkpoint(model, path, absent_ok=absent_ok)
        if declared is not None and master:
            # What the checkpoints are trained with: later runs must keep these ids.
            domain_record.write_record(self.model_dir, declared, regions)
        if master:
            self.warn_about_recipe(hvd.size() if hvd is not None else num_devices)
        max_step = self.finalized_config()["train"].get("max_step")
        with ledger.evaluator_class(MultiDomainEvaluator), ledger.horovod_trainer_class(
            horovod.HorovodTrainer
        ), eta.eta_in_step_logs(max_step):
            return super().train(num_devices=num_devices, with_eval=with_eval, **kwargs)

    def warn_about_recipe(self, num_replicas=1):
        """Logs :func:`ldr_opennmt.training.recipe_checks.warn` of the finalized configuration;
        returns the warnings."""
        return recipe_checks.warn(self.finalized_config(), num_replicas)

    def evaluate(self, features_file=None, labels_file=None, checkpoint_path=None):
        self.validate("eval")
        self._check_evaluation_files(features_file, labels_file)
        with ledger.evaluator_class(MultiDomainEvaluator):
            return super().evaluate(
                features_file=features_file,
                labels_file=labels_file,
                checkpoint_path=checkpoint_path,
            )

    def infer(
        self,
        features_file,
        predictions_file=None,
        checkpoint_path=None,
        log_time=False,
        listener=None,
    ):
        """Translates :obj:`features_file`, as ``opennmt.Runner.infer`` does, plus:

        * the predictions file is written under an exclusive temporary name and renamed
          when complete: an interrupted run leaves no file that looks complete;
        * one warning line counts the translations that stopped at
          ``maximum_decoding_length`` (possibly cut short); with :obj:`listener`, called
          as ``listener(stopped, limit)`` after each translation, in input order, the
          listener reports them instead (``ldr-eval``: progress and warnings per system,
          mode and domain);
        * a missing checkpoint is an error (OpenNMT-tf would translate with random
          weights).

        ``ldr-main infer``, ``ldr-main predict_domains`` and ``ldr-eval`` translate here.

        Raises:
          UserError: if no checkpoint is found or the predictions file's directory does
            not exist.
        """
        if predictions_file:
            directory = os.path.dirname(os.path.abspath(predictions_file))
            if not os.path.isdir(directory):
                raise UserError("%s: directory %s not found" % (predictions_file, directory))
            for path in data_files.strings(features_file):
                if same_file(path, predictions_file):
                    raise UserError(
                        "%s: the predictions file is an input of this run: it would be "
                        "overwritten" % predictions_file
                    )
        model, _, config = self._restored(checkpoint_path)
        inference_checks.warn_long_sources(model, features_file)
        infer_config = config["infer"]
        dataset = model.examples_inputter.make_inference_dataset(
            features_file,
            infer_config["batch_size"],
            batch_type=infer_config["batch_type"],
            length_bucket_width=infer_config["length_bucket_width"],
            prefetch_buffer_size=infer_config.get("prefetch_buffer_size"),
        )
        limit = config["params"].get("maximum_decoding_length", DEFAULT_MAXIMUM_DECODING_LENGTH)
        counter = inference_checks.StoppedCounter(model, limit, listener=listener)
        if predictions_file:
            with atomic_output(predictions_file) as partial:
                inference.predict_dataset(
                    counter, dataset, print_params=infer_config, predictions_file=partial,
                    log_time=log_time,
                )  # fmt: skip
        else:
            inference.predict_dataset(
                counter, dataset, print_params=infer_config, log_time=log_time
            )
        if listener is None:
            counter.report()

    def export(self, export_dir, checkpoint_path=None, exporter=None):
        """Exports the model, as ``opennmt.Runner.export`` does, built under a temporary
        name and renamed when complete (:func:`ldr_opennmt.assets.export_directory`): an
        interrupted export leaves no directory that looks like an export.

        Raises:
          UserError: if no checkpoint is found (OpenNMT-tf raises an AttributeError), or
            :obj:`export_dir` is a non-empty directory that is not an earlier export.
        """
        model, _, _ = self._restored(checkpoint_path)
        if isinstance(model, MultiDomainModel):
            model.export(export_dir, exporter=exporter)  # Built under a temporary name.
            return
        with assets_lib.export_directory(export_dir) as partial:
            model.export(partial, exporter=exporter)
