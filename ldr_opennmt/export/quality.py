"""What an export learns from its corpus for the server: the wrong-domain guard and the
calibrated confidence (``ldr-export ctranslate2 --domain_guard --confidence --corpus DIR``).

Both are fitted with scikit-learn in the training environment, on the raw text of a corpus
built by ``ldr-data`` (``DIR/raw/{train,dev}.DOMAIN.LANG``: what a server receives), and stored
as plain parameters in the export's ``quality.json`` (its sha256 in the manifest), which the
serving runtime applies with numpy (:mod:`ldr_opennmt.serving.domain_guard`,
:mod:`ldr_opennmt.serving.confidence`):

* :func:`fit_guard`: a logistic regression over sublinear tf-idf character n-grams of the
  training source text (at most :data:`GUARD_SENTENCES` sentences per domain, balanced
  classes); the threshold below which a sentence goes to ``generic`` is the posterior under
  which :data:`DEV_FALLBACK_RATE` of the dev sentences fall (each domain weighing the same):
  in-domain text keeps its domain at least 95% of the time, and what the guard is unsure of,
  text of a domain it never saw above all, is translated by the generic model.
* :func:`fit_confidence`: per exported domain, the dev set translated by that domain's folded
  model (greedy, as ``ldr-serve`` decodes by default), each sentence scored with sacrebleu's
  chrF, and a logistic regression of "chrF at least the dev median" on
  :data:`ldr_opennmt.serving.confidence.FEATURES` (standardized); ``low_confidence`` is set
  below the threshold that maximizes Youden's J (true minus false positive rate of the flag
  for the sentences below the median) on the same dev set. ``generic`` is fitted on every
  domain's dev set, each sentence against its own domain's median.
"""

import json
import os
import random

import numpy as np

from ldr_opennmt.errors import UserError
from ldr_opennmt.serving import confidence as confidence_lib
from ldr_opennmt.serving import domain_guard

#: The file in the export, beside ``manifest.json``.
QUALITY_FILE = "quality.json"
#: Training sentences per domain the guard reads at most (sampled with a fixed seed).
GUARD_SENTENCES = 20000
#: The guard's vocabulary: the most frequent character n-grams kept.
GUARD_FEATURES = 50000
#: Its n-gram lengths.
NGRAM_RANGE = (1, 4)
#: The share of in-domain dev sentences the guard may send to ``generic``.
DEV_FALLBACK_RATE = 0.05
#: Dev sentences per domain the confidence is fitted on at most.
CONFIDENCE_SENTENCES = 2000
#: The decoding the confidence is calibrated for (``ldr-serve``'s default).
BEAM_SIZE = 1


def raw_lines(corpus_dir, split, domain, language):
    """The raw lines of ``DIR/raw/SPLIT.DOMAIN.LANG`` (what ``ldr-data`` keeps before BPE).

    Raises:
      UserError: naming the file, if it is not there.
    """
    path = os.path.join(corpus_dir, "raw", "%s.%s.%s" % (split, domain, language))
    try:
        with open(path, encoding="utf-8") as f:
            return [line.rstrip("\n") for line in f]
    except FileNotFoundError:
        raise UserError(
            "%s: not found: --corpus must be a corpus built by ldr-data (its raw/ text) with"
            " the export's domain %r" % (path, domain)
        ) from None
    except (OSError, UnicodeDecodeError) as e:
        raise UserError("%s: cannot read it (%s)" % (path, e)) from None


def _sample(lines, size, seed):
    """At most :obj:`size` of :obj:`lines` (in their order), drawn with :obj:`seed`."""
    if len(lines) <= size:
        return lines
    return random.Random(seed).sample(lines, size)


def fit_guard_model(texts, labels, features=GUARD_FEATURES):
    """scikit-learn's guard: ``(TfidfVectorizer, LogisticRegression)`` fitted on :obj:`texts`
    and their class indices :obj:`labels` (balanced classes)."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression

    # scikit-learn's char_wb n-grams: what domain_guard.char_ngrams computes at serving.
    vectorizer = TfidfVectorizer(
        analyzer="char_wb",
        ngram_range=NGRAM_RANGE,
        sublinear_tf=True,
        max_features=features,
        dtype=np.float64,
    )
    matrix = vectorizer.fit_transform(texts)
    classifier = LogisticRegression(C=10.0, max_iter=2000, class_weight="balanced")
    classifier.fit(matrix, labels)
    return vectorizer, classifier


def guard_params(vectorizer, classifier, domains, threshold=0.0):
    """What :class:`ldr_opennmt.serving.domain_guard.DomainGuard` reads of a fitted
    :func:`fit_guard_model`: the n-grams in column order, their idf, the linear model."""
    vocabulary = [None] * len(vectorizer.vocabulary_)
    for gram, index in vectorizer.vocabulary_.items():
        vocabulary[index] = gram
    return {
        "domains": list(domains),
        "ngram_range": list(vectorizer.ngram_range),
        "vocabulary": vocabulary,
        "idf": vectorizer.idf_.tolist(),
        "coef": classifier.coef_.tolist(),
        "intercept": classifier.intercept_.tolist(),
        "threshold": threshold,
        "fallback": "generic",
    }


def fit_guard(train, dev, sentences=GUARD_SENTENCES, features=GUARD_FEATURES, seed=1234):
    """Fits the wrong-domain guard.

    Args:
      train: ``{domain: raw source lines}``, in the export's domain order (two or more).
      dev: ``{domain: raw source lines}`` of the same domains.
      sentences: Training sentences per domain at most.
      features: The n-grams kept.
      seed: The sampling seed.

    Returns:
      ``(stored, summary)``: what :class:`ldr_opennmt.serving.domain_guard.DomainGuard` reads,
      and the dev figures (accuracy, fallback rate, threshold).
    """
    domains = list(train)
    texts, labels = [], []
    for i, domain in enumerate(domains):
        sample = _sample([line for line in train[domain] if line.strip()], sentences, seed + i)
        if not sample:
            raise UserError("the training text of domain %r has no sentence" % domain)
        texts += sample
        labels += [i] * len(sample)
    stored = guard_params(*fit_guard_model(texts, labels, features), domains)
    guard = domain_guard.DomainGuard(stored)
    # The threshold: the DEV_FALLBACK_RATE quantile of the best posterior, each domain's dev
    # sentences weighing the same.
    best, weights, right = [], [], []
    for i, domain in enumerate(domains):
        lines = [line for line in dev[domain] if line.strip()]
        if not lines:
            raise UserError("the dev set of domain %r has no sentence" % domain)
        posteriors = guard.posteriors(lines)
        best += posteriors.max(axis=1).tolist()
        right += (posteriors.argmax(axis=1) == i).tolist()
        weights += [1.0 / len(lines)] * len(lines)
    order = np.argsort(best)
    cumulative = np.cumsum(np.asarray(weights)[order]) / len(domains)
    threshold = float(np.asarray(best)[order][np.searchsorted(cumulative, DEV_FALLBACK_RATE)])
    stored["threshold"] = round(threshold, 6)
    kept = np.asarray(best) >= stored["threshold"]
    summary = {
        "dev_accuracy": float(np.average(right, weights=weights)),
        "dev_fallback_rate": float(np.average(~kept, weights=weights)),
        "dev_accuracy_kept": float(np.average(np.asarray(right)[kept])) if kept.any() else None,
        "threshold": stored["threshold"],
        "train_sentences": {d: labels.count(i) for i, d in enumerate(domains)},
        "ngrams": len(stored["vocabulary"]),
    }
    return stored, summary


def translate(model, lines, beam_size=BEAM_SIZE, batch_size=32):
    """Translates raw lines with a :class:`ldr_opennmt.serving.ct2_models.DomainModel`.

    Returns:
      ``(hypotheses, source_lengths, outputs)``: the detokenized translations, the source
      tokens of each line and each ``(output tokens, score)``.
    """
    tokens = [model.tokenize(line) for line in lines]
    outputs = []
    for start in range(0, len(tokens), batch_size):
        for hypotheses, scores in model.translate(
            tokens[start : start + batch_size], beam_size=beam_size
        ):
            outputs.append((hypotheses[0], scores[0]))
    hypotheses = [model.detokenize(output) for output, _ in outputs]
    return hypotheses, [len(t) for t in tokens], outputs


def sentence_chrf(hypotheses, references):
    """sacrebleu's sentence-level chrF of each hypothesis."""
    import sacrebleu

    return [
        sacrebleu.sentence_chrf(hypothesis, [reference]).score
        for hypothesis, reference in zip(hypotheses, references)
    ]


def fit_domain_confidence(rows, good):
    """Fits one domain's confidence.

    Args:
      rows: :data:`ldr_opennmt.serving.confidence.FEATURES` of each dev sentence.
      good: Whether each one's chrF is at least the dev median.

    Returns:
      The entry :class:`ldr_opennmt.serving.confidence.DomainConfidence` reads, with its dev
      AUROC and the flagged share.
    """
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import roc_auc_score, roc_curve

    rows = np.asarray(rows, dtype=np.float64)
    good = np.asarray(good, dtype=bool)
    mean = rows.mean(axis=0)
    scale = rows.std(axis=0)
    scale[scale <= 0] = 1.0
    entry = {"mean": mean.tolist(), "scale": scale.tolist()}
    if good.all() or not good.any():
        # One class only (every sentence at the median): no model; a constant confidence.
        rate = float(good.mean())
        entry.update(coef=[0.0] * rows.shape[1], intercept=0.0, threshold=0.0)
        entry.update(dev_sentences=len(good), dev_auroc=None, dev_flagged=0.0, dev_good=rate)
        return entry
    classifier = LogisticRegression(max_iter=1000)
    classifier.fit((rows - mean) / scale, good)
    probability = classifier.predict_proba((rows - mean) / scale)[:, 1]
    # Youden's J of the flag "confidence below t" for the sentences below the median.
    false_positive, true_positive, thresholds = roc_curve(~good, -probability)
    best = int(np.argmax(true_positive - false_positive))
    # roc_curve flags the sentences whose score reaches its threshold (p <= t); the server
    # flags p < threshold: the threshold is set just above t.
    threshold = round(min(1.0, max(0.0, float(-thresholds[best]) + 1e-6)), 6)
    entry.update(
        coef=classifier.coef_[0].tolist(),
        intercept=float(classifier.intercept_[0]),
        threshold=threshold,
        dev_sentences=len(good),
        dev_auroc=float(roc_auc_score(good, probability)),
        dev_flagged=float((probability < threshold).mean()),
        dev_good=float(good.mean()),
    )
    return entry


def fit_confidence(models, dev, references, log=None):
    """Fits the confidence of each exported domain on the dev sets.

    Args:
      models: ``{exported domain: DomainModel}`` (``generic`` among them or not).
      dev: ``{declared domain: raw source lines}``.
      references: ``{declared domain: raw target lines}``.
      log: A callable taking a progress line, or ``None``.

    Returns:
      The ``confidence`` section of ``quality.json``.
    """
    section = {"features": list(confidence_lib.FEATURES), "beam_size": BEAM_SIZE, "domains": {}}
    for name, model in models.items():
        sets = list(dev) if name not in dev else [name]
        rows, good, medians = [], [], {}
        for domain in sets:
            pairs = [(s, r) for s, r in zip(dev[domain], references[domain]) if s.strip()]
            pairs = _sample(pairs, CONFIDENCE_SENTENCES, 7) if pairs else []
            if not pairs:
                raise UserError("the dev set of domain %r has no sentence" % domain)
            hypotheses, lengths, outputs = translate(model, [s for s, _ in pairs])
            chrf = sentence_chrf(hypotheses, [r for _, r in pairs])
            medians[domain] = float(np.median(chrf))
            rows += [
                confidence_lib.features(length, len(tokens), score)
                for length, (tokens, score) in zip(lengths, outputs)
            ]
            good += [value >= medians[domain] for value in chrf]
        entry = fit_domain_confidence(rows, good)
        entry["dev_median_chrf"] = medians
        section["domains"][name] = entry
        if log:
            log(
                "confidence of %s: dev AUROC %s, low_confidence below %.2f (%.0f%% of dev)"
                % (
                    name,
                    "n/a" if entry["dev_auroc"] is None else "%.2f" % entry["dev_auroc"],
                    entry["threshold"],
                    100 * entry["dev_flagged"],
                )
            )
    return section


def write_quality(export_dir, models, corpus_dir, languages, declared, guard, confidence, log):
    """Fits what is asked and writes ``export_dir/quality.json``.

    Args:
      export_dir: The export being written (its models are there).
      models: ``{exported domain: DomainModel}``.
      corpus_dir: The corpus built by ``ldr-data``.
      languages: ``(source, target)`` codes of the corpus's files.
      declared: The model's declared domains.
      guard: Whether to fit the guard.
      confidence: Whether to fit the confidence.
      log: A callable taking a progress line.

    Returns:
      The summary (what ``ldr-export`` prints and the manifest records).
    """
    source, target = languages
    quality, summary = {}, {}
    dev = {d: raw_lines(corpus_dir, "dev", d, source) for d in declared}
    if guard:
        if len(declared) < 2:
            raise UserError("--domain_guard: the model declares one domain: nothing to choose")
        train = {d: raw_lines(corpus_dir, "train", d, source) for d in declared}
        log("fitting the domain guard on %s" % ", ".join(declared))
        quality["domain_guard"], summary["domain_guard"] = fit_guard(train, dev)
        log(
            "domain guard: dev accuracy %.3f; generic below %.2f (%.1f%% of dev)"
            % (
                summary["domain_guard"]["dev_accuracy"],
                summary["domain_guard"]["threshold"],
                100 * summary["domain_guard"]["dev_fallback_rate"],
            )
        )
    if confidence:
        references = {d: raw_lines(corpus_dir, "dev", d, target) for d in declared}
        quality["confidence"] = fit_confidence(models, dev, references, log=log)
        summary["confidence"] = {
            name: {k: v for k, v in entry.items() if k.startswith("dev_")}
            for name, entry in quality["confidence"]["domains"].items()
        }
    quality["summary"] = summary
    with open(os.path.join(export_dir, QUALITY_FILE), "w", encoding="utf-8") as f:
        json.dump(quality, f)
        f.write("\n")
    return summary
