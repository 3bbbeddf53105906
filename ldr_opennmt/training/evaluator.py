"""Evaluation per domain during training (``--with_eval``) and by ``ldr-main eval``.

With ``data: eval_corpora`` (one dev set per domain), :class:`MultiDomainEvaluator`
evaluates every domain separately and reports, for each, ``<domain>/loss``,
``<domain>/perplexity`` and the configured scorers (``<domain>/bleu``, ...), plus
the pooled values: ``loss`` and ``perplexity`` over all tokens, and each score
averaged over the domains (the "avg" column of the papers' tables). Every value
goes to the log and to TensorBoard (``metrics/<domain>/bleu``); any of them can
drive ``early_stopping`` or ``export_on_best`` (e.g. ``metric: software/bleu``).
"""

import os

import tensorflow as tf
from opennmt import evaluation
from opennmt.utils import misc

from ldr_opennmt.training import corpora as corpora_lib


class _DomainEvalSets(list):
    """The per-domain evaluation sets, passed where OpenNMT-tf passes files."""


class MultiDomainEvaluator(evaluation.Evaluator):
    """An OpenNMT-tf evaluator that scores each domain's dev set separately."""

    @classmethod
    def from_config(cls, model, config, features_file=None, labels_file=None):
        data_config = config["data"]
        if (
            features_file is not None
            or labels_file is not None
            or not data_config.get("eval_corpora")
        ):
            # Explicit files, or no per-domain dev sets: OpenNMT-tf's pooled evaluation.
            return evaluation.Evaluator.from_config(
                model, config, features_file=features_file, labels_file=labels_file
            )
        classifier = getattr(model, "is_domain_classifier", False)
        sets = _DomainEvalSets()
        for corpus in corpora_lib.read_corpora(data_config, "eval_corpora"):
            features, labels = corpora_lib.example_files([corpus], classifier=classifier)
            sets.append((corpus.domain, features, labels))
        config = dict(config, data=dict(data_config, eval_features_file=sets))
        return super().from_config(model, config)

    def __init__(self, model, features_file, labels_file, batch_size, **kwargs):
        if not isinstance(features_file, _DomainEvalSets):
            raise TypeError("MultiDomainEvaluator is built by from_config")
        sets = features_file
        first_domain, first_features, first_labels = sets[0]
        # The parent builds the first domain's dataset (and the evaluation function).
        super().__init__(model, first_features, first_labels, batch_size, **kwargs)
        self._domain_sets = [(first_domain, first_labels, self._dataset)]
        for domain, features, labels in sets[1:]:
            dataset = model.examples_inputter.make_evaluation_dataset(
                features,
                labels,
                batch_size,
                batch_type=kwargs.get("batch_type", "examples"),
                length_bucket_width=kwargs.get("length_bucket_width"),
                num_threads=1,
                prefetch_buffer_size=1,
            )
            self._domain_sets.append((domain, labels, dataset))
        base_names = set(self._metrics_name)
        for domain, _, _ in self._domain_sets:
            self._metrics_name.update("%s/%s" % (domain, name) for name in base_names)

    @property
    def domains(self):
        """The evaluated domains, in order."""
        return [domain for domain, _, _ in self._domain_sets]

    def _is_higher_better_for_metric(self, metric):
        return super()._is_higher_better_for_metric(metric.split("/")[-1])

    def _evaluate_set(self, dataset, output_path):
        """Returns (loss numerator, loss denominator, model metrics) of one dev set."""
        output_file = None
        if output_path is not None:
            output_file = tf.io.gfile.GFile(output_path, "w")
            params = {"n_best": 1}
            writer = misc.OrderRestorer(
                lambda prediction: prediction.get("index"),
                lambda prediction: self._model.print_prediction(
                    prediction, params=params, stream=output_file
                ),
            )
        loss_num = 0
        loss_den = 0
        metrics = self._model.get_metrics()
        for batch in dataset:
            features, labels = self._model.split_features_labels(batch)
            loss, predictions = self._eval_fn(features, labels)
            if isinstance(loss, tuple):
                loss_num += loss[0]
                loss_den += loss[1]
            else:
                loss_num += loss
                loss_den += 1
            if metrics:
                self._model.update_metrics(metrics, predictions, labels)
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

    def __call__(self, step):
        tf.get_logger().info("Running evaluation for step %d (per domain)", step)
        results = {}
        total_num = 0
        total_den = 0
        pooled_scores = {}
        for domain, labels_file, dataset in self._domain_sets:
            output_path = None
            if self._save_predictions:
                output_path = os.path.join(self._eval_dir, "predictions.%s.txt.%d" % (domain, step))
            loss_num, loss_den, values = self._evaluate_set(dataset, output_path)
            total_num += loss_num
            total_den += loss_den
            loss = loss_num / loss_den
            domain_results = dict(loss=loss, perplexity=tf.math.exp(loss))
            domain_results.update(values)
            if output_path is not None:
                for scorer in self._scorers:
                    score = scorer(labels_file, output_path)
                    if isinstance(score, dict):
                        domain_results.update(score)
                    else:
                        domain_results[scorer.name] = score
            domain_results = {k: float(v) for k, v in domain_results.items()}
            tf.get_logger().info(
                "Evaluation result for domain %s at step %d: %s",
                domain,
                step,
                " ; ".join("%s = %f" % (k, v) for k, v in domain_results.items()),
            )
            for name, value in domain_results.items():
                results["%s/%s" % (domain, name)] = value
                if name not in ("loss", "perplexity"):
                    pooled_scores.setdefault(name, []).append(value)
        loss = float(total_num / total_den)
        pooled = dict(loss=loss, perplexity=float(tf.math.exp(loss)))
        # Scores (and model metrics such as accuracy) are averaged over domains.
        pooled.update({name: sum(v) / len(v) for name, v in pooled_scores.items()})
        pooled.update(results)
        self._record_results(step, pooled)
        self._maybe_export(step, pooled)
        self._maybe_garbage_collect_exports()
        return pooled
