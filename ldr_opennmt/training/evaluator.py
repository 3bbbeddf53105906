"""Evaluation per domain during training (``--with_eval``) and by ``ldr-main eval``.

With ``data: eval_corpora`` (one dev set per domain), :class:`MultiDomainEvaluator`
evaluates every domain separately and reports, for each, ``<domain>/loss``,
``<domain>/perplexity`` and the configured scorers (``<domain>/bleu``, ...), plus
the pooled values: ``loss`` and ``perplexity`` over all tokens, and each score
averaged over the domains (the "avg" column of the papers' tables). Every value
goes to the log and to TensorBoard (``metrics/<domain>/bleu``); any of them can
drive ``early_stopping`` or ``export_on_best`` (e.g. ``metric: software/bleu``).
Before each domain, one log line says what the evaluation does (its sentences, and
whether they are translated for the scorers, the long part), and after it how long it took.
"""

import os
import time

import tensorflow as tf

from ldr_opennmt.errors import UserError
from ldr_opennmt.inputters import constant_label_name
from ldr_opennmt.upstream import ledger


def evaluation_sets(features_file, labels_file):
    """Splits evaluation files into named sets: ``[(name, features, labels)]``.

    Several sets are given as parallel lists (what ``data: eval_corpora`` expands to):
    ``features_file: [[src_1, src_2], [labels_1, labels_2]]``, ``labels_file:
    [tgt_1, tgt_2]`` for a translation model, ``features_file: [src_1, src_2]``,
    ``labels_file: [labels_1, labels_2]`` for the domain classifier. A set is named
    by its domain (``domain:NAME`` labels) or by its source file. One set (plain
    files) gives a single unnamed set.
    """
    if not isinstance(labels_file, (list, tuple)) or len(labels_file) < 2:
        return [(None, features_file, labels_file)]
    if len(features_file) == 2 and isinstance(features_file[0], (list, tuple)):
        sources, domains = features_file
        if not len(sources) == len(domains) == len(labels_file):
            raise UserError(
                "data: eval_features_file: %d source files, %d label files and %d target files"
                % (len(sources), len(domains), len(labels_file))
            )
        triples = [([s, d], t, d) for s, d, t in zip(sources, domains, labels_file)]
    else:
        if len(features_file) != len(labels_file):
            raise UserError(
                "data: %d eval features files but %d eval labels files"
                % (len(features_file), len(labels_file))
            )
        triples = [(f, lab, lab) for f, lab in zip(features_file, labels_file)]
    sets = []
    for features, labels, domain_labels in triples:
        source = features[0] if isinstance(features, list) else features
        name = constant_label_name(domain_labels) or os.path.basename(source)
        sets.append((name, features, labels))
    return sets


def _what_is_done(labels_file, scorers):
    """What evaluating a dev set does, for the log: ``500 dev sentences, translated with
    beam search for bleu`` (``the loss only`` without scorers)."""
    try:
        with open(labels_file, "rb") as f:
            count = "%d dev sentences" % sum(1 for _ in f)
    except (OSError, TypeError):
        count = "the dev set"
    if not scorers:
        return "%s, the loss only (no scorers: nothing translated)" % count
    return "%s, translated with beam search for %s" % (count, ", ".join(scorers))


class MultiDomainEvaluator(ledger.EvaluatorAdapter):
    """An OpenNMT-tf evaluator that scores each domain's dev set separately.

    With one evaluation set it is OpenNMT-tf's evaluator unchanged.
    """

    def __init__(self, model, features_file, labels_file, batch_size, **kwargs):
        sets = evaluation_sets(features_file, labels_file)
        early_stopping = kwargs.pop("early_stopping", None)
        first_domain, first_features, first_labels = sets[0]
        # The parent builds the first set's dataset (and the evaluation function).
        super().__init__(model, first_features, first_labels, batch_size, **kwargs)
        self._domain_sets = [(first_domain, first_labels, self.dataset)]
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
        if self.per_domain:
            base_names = self.metric_names()
            for domain in self.domains:
                self.add_metric_names("%s/%s" % (domain, name) for name in base_names)
        # Validated once the per-domain names exist (e.g. metric: software/bleu).
        self.set_early_stopping(early_stopping)

    @property
    def per_domain(self):
        """Whether several dev sets are evaluated separately."""
        return len(self._domain_sets) > 1

    @property
    def domains(self):
        """The evaluated domains, in order."""
        return [domain for domain, _, _ in self._domain_sets]

    def metric_base_name(self, metric):
        return metric.split("/")[-1]

    def __call__(self, step):
        if not self.per_domain:
            return super().__call__(step)
        tf.get_logger().info("Running evaluation for step %d (per domain)", step)
        results = {}
        total_num = 0
        total_den = 0
        pooled_scores = {}
        for domain, labels_file, dataset in self._domain_sets:
            output_path = None
            if self.saves_predictions:
                output_path = os.path.join(self.eval_dir, "predictions.%s.txt.%d" % (domain, step))
            tf.get_logger().info(
                "Evaluating domain %s at step %d: %s",
                domain,
                step,
                _what_is_done(labels_file, [scorer.name for scorer in self.scorers]),
            )
            start = time.monotonic()
            loss_num, loss_den, values = self.evaluate_dataset(dataset, output_path)
            total_num += loss_num
            total_den += loss_den
            loss = loss_num / loss_den
            domain_results = dict(loss=loss, perplexity=tf.math.exp(loss))
            domain_results.update(values)
            if output_path is not None:
                for scorer in self.scorers:
                    score = scorer(labels_file, output_path)
                    if isinstance(score, dict):
                        domain_results.update(score)
                    else:
                        domain_results[scorer.name] = score
            domain_results = {k: float(v) for k, v in domain_results.items()}
            tf.get_logger().info(
                "Evaluation of domain %s at step %d took %.1f s",
                domain,
                step,
                time.monotonic() - start,
            )
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
        self.record(step, pooled)
        return pooled
