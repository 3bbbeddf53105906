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
* new domains on a trained model (:mod:`ldr_opennmt.training.domain_record`): the
  declared domains are checked against those the checkpoint was trained with, and
  domains appended to the list take the checkpoint's reserved regions.
"""

import contextlib
import json
import os
import types

import opennmt
import tensorflow as tf
from opennmt import runner as runner_module
from opennmt.utils import checkpoint as checkpoint_util

from ldr_opennmt import domains as domains_lib
from ldr_opennmt.training import corpora as corpora_lib
from ldr_opennmt.training import domain_record
from ldr_opennmt.training.evaluator import MultiDomainEvaluator
from ldr_opennmt.utils import write_lines_atomic

FINETUNE_STATE = "finetune.json"


@contextlib.contextmanager
def _per_domain_evaluation():
    # opennmt.Runner.train/evaluate build their evaluator with
    # ``evaluation.Evaluator.from_config`` and offer no hook to change its class;
    # the module reference is swapped for the duration of the call only.
    original = runner_module.evaluation
    runner_module.evaluation = types.SimpleNamespace(Evaluator=MultiDomainEvaluator)
    try:
        yield
    finally:
        runner_module.evaluation = original


def _base_checkpoint(base):
    """The checkpoint a ``finetune: base`` names: a directory's latest, or a prefix."""
    return tf.train.latest_checkpoint(base) if tf.io.gfile.isdir(base) else base


class Runner(opennmt.Runner):
    """``opennmt.Runner`` with per-domain corpora, domain sampling and fine-tuning."""

    def __init__(self, model, config, **kwargs):
        super().__init__(model, config, **kwargs)
        self._corpora = None
        self._expand_corpora()
        self._match_trained_domains()

    @property
    def is_classifier(self):
        return getattr(self._model, "is_domain_classifier", False)

    @property
    def domains(self):
        """The declared domains (from ``data: domains`` or the corpora order)."""
        return corpora_lib.domain_names(self._config["data"])

    @property
    def corpora(self):
        """The training corpora (a list of :class:`~ldr_opennmt.training.corpora.Corpus`)."""
        return self._corpora

    def _expand_corpora(self):
        data = self._config["data"]
        train = self._config.setdefault("train", {})
        finetune = self._config.get("finetune")
        if not data.get("train_corpora") and not data.get("eval_corpora"):
            if finetune:
                raise domains_lib.DomainError(
                    "finetune needs per-domain corpora (data: train_corpora)"
                )
            return
        data["domains"] = corpora_lib.domain_names(data)
        corpora = corpora_lib.read_corpora(data, "train_corpora")
        if corpora is None:
            return
        for key in ("train_features_file", "train_labels_file"):
            if data.get(key) is not None:
                raise domains_lib.DomainError(
                    "data: give either train_corpora or %s, not both" % key
                )
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
            data["domain_batches"] = bool(train.get("domain_batches", True))
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
        base = (self._config.get("finetune") or {}).get("base")
        return _base_checkpoint(base) if base else None

    def _match_trained_domains(self):
        """Checks the declared domains against the trained model's; new domains take
        reserved regions (``data: domain_regions`` is set from the checkpoint)."""
        data = self._config["data"]
        declared = data.get("domains")
        checkpoint = self._trained_checkpoint()
        if declared is None or checkpoint is None:
            return
        if not tf.io.gfile.exists(checkpoint + ".index"):
            return  # Reported by OpenNMT-tf or by the fine-tuning checks.
        declared = domains_lib.validate_domain_names(declared, source="the data configuration")
        checkpoint_dir = os.path.dirname(checkpoint)
        recorded = domain_record.read_record(checkpoint_dir)
        regions = domain_record.checkpoint_regions(checkpoint)
        if not regions:
            return  # A model without domain parameters (Mixed): labels are ignored.
        new = domain_record.check_domains(declared, recorded, regions, checkpoint_dir)
        data["domain_regions"] = regions
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

    def _finalize_config(self, *args, **kwargs):
        config = super()._finalize_config(*args, **kwargs)
        data, train = config["data"], config["train"]
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

    def _finetune_corpus(self, finetune, corpora):
        domain = finetune.get("domain")
        names = [c.domain for c in corpora]
        if domain not in self._config["data"]["domains"]:
            raise domains_lib.DomainError(
                "finetune: domain %r is not declared (declared: %s)"
                % (domain, ", ".join(self._config["data"]["domains"]))
            )
        if domain not in names:
            raise domains_lib.DomainError(
                "finetune: domain %r has no corpus in data: train_corpora" % domain
            )
        return corpora[names.index(domain)]

    def _prepare_finetune(self, finetune):
        """Sets max_step; returns the ``train`` arguments, or ``None`` if already done."""
        base = finetune.get("base")
        steps = finetune.get("steps")
        if not base:
            raise domains_lib.DomainError("finetune: base (the trained model directory) is missing")
        if not isinstance(steps, int) or steps <= 0:
            raise domains_lib.DomainError(
                "finetune: steps must be a positive integer, got %r" % (steps,)
            )
        model_dir = self.model_dir
        base_is_dir = tf.io.gfile.isdir(base)
        base_dir = base if base_is_dir else os.path.dirname(base)
        if os.path.realpath(base_dir) == os.path.realpath(model_dir):
            raise domains_lib.DomainError(
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
            checkpoint_path = _base_checkpoint(base)
            if checkpoint_path is None or not tf.io.gfile.exists(checkpoint_path + ".index"):
                raise domains_lib.DomainError("finetune: base: no checkpoint found in %s" % base)
            state = {
                "base_checkpoint": checkpoint_path,
                "base_step": checkpoint_util.get_step_from_checkpoint_prefix(checkpoint_path),
                "domain": finetune.get("domain"),
                "steps": steps,
            }
            tf.io.gfile.makedirs(model_dir)
            write_lines_atomic(state_path, [json.dumps(state, indent=2)])
            continue_training = True
        max_step = state["base_step"] + steps
        self._config["train"]["max_step"] = max_step
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

    def train(self, *args, **kwargs):
        finetune = self._config.get("finetune")
        if finetune:
            if kwargs.get("checkpoint_path"):
                raise domains_lib.DomainError(
                    "finetune: base sets the checkpoint; do not pass --checkpoint_path"
                )
            restore = self._prepare_finetune(finetune)
            if restore is None:
                return self.model_dir
            kwargs.update(restore)
        declared = self._config["data"].get("domains")
        if declared is not None:
            # What the checkpoints are trained with: later runs must keep these ids.
            domain_record.write_record(self.model_dir, declared)
        with _per_domain_evaluation():
            return super().train(*args, **kwargs)

    def evaluate(self, *args, **kwargs):
        with _per_domain_evaluation():
            return super().evaluate(*args, **kwargs)
