"""The weights of ensembles of domain views: a classifier's posterior, fitted weights.

* :func:`soft_labels`: ``ens-soft`` labels, the domain classifier's posterior over the
  known domains for each sentence (its ``infer: domain_posterior`` output);
* :func:`fit_learned_weights`: ``ens-learned``, one weight vector over the views that
  maximizes the likelihood of balanced development data of the known domains (each
  view scores the references once, by forced decoding: OpenNMT-tf's ``score`` with
  token-level scores; :func:`ldr_opennmt.ensembles.fit_weights` then runs EM), stored as
  ``ensemble.json`` in the model directory, where ``ldr-main``, ``ldr-eval`` and the
  SavedModel export read it. The file is a :mod:`ldr_opennmt.stamps` file: its stamp
  (:func:`learned_weights_stamp`: the checkpoint's files, the dev data, the views and the
  vocabularies) says whether ``ldr-eval`` reuses the weights or fits them again
  (:func:`learned_weights_decision`).
"""

import datetime
import os
import tempfile

import numpy as np
import yaml

from ldr_opennmt import ensembles, stamps
from ldr_opennmt.errors import UserError
from ldr_opennmt.evaluation.systems import System
from ldr_opennmt.models.classifier import POSTERIOR_OPTION
from ldr_opennmt.utils import read_lines, write_lines, write_lines_atomic


def system_domains(system):
    """The domains a system declares (its views but generic; for per-domain corpora,
    the Runner's list)."""
    return list(system.finalized_config().get("data", {}).get("domains") or [])


def check_classifier(classifier, system):
    """Refuses a classifier whose classes are not the system's domains (ens-soft).

    Raises:
      UserError: naming both lists.
    """
    classes = system_domains(classifier)
    if classes != system_domains(system):
        raise UserError(
            "ens-soft: the classifier %s was trained on the domains %s, but system %s has %s"
            % (classifier.name, classes, system.name, system_domains(system))
        )


def _with_options(system, options, directory):
    """The system's runner with extra configuration :obj:`options` (a temporary file)."""
    path = os.path.join(directory, "options.yml")
    with open(path, "w", encoding="utf-8") as f:
        yaml.safe_dump(options, f)
    return System(system.name, system.config_paths + [path]).runner


def soft_labels(classifier, source_file, output, work_dir):
    """Writes the ens-soft label of each sentence of :obj:`source_file` to :obj:`output`.

    Args:
      classifier: The domain classifier's :class:`~ldr_opennmt.evaluation.systems.System`.
      source_file: Tokenized source sentences.
      output: The label file to write (atomically).
      work_dir: A directory for temporary files.
    """
    with tempfile.TemporaryDirectory(prefix=".soft.", dir=work_dir) as tmp:
        runner = _with_options(classifier, {"infer": {POSTERIOR_OPTION: True}}, tmp)
        predictions = os.path.join(tmp, "posteriors")
        runner.infer(
            source_file, predictions_file=predictions, checkpoint_path=classifier.checkpoint()
        )
        labels = read_lines(predictions)
    write_lines_atomic(output, labels)
    return labels


def view_token_log_probs(system, sources, targets, work_dir, checkpoint=None):
    """Each view's log-probability of each reference token: ``[tokens, views]``.

    One ``score`` run with token-level scores: the pairs are repeated once per view,
    with the view's name as their label, with :obj:`checkpoint` (default: the system's
    latest).
    """
    domains = system_domains(system)
    views = ensembles.view_names(domains)
    with tempfile.TemporaryDirectory(prefix=".fit.", dir=work_dir) as tmp:
        paths = [os.path.join(tmp, name) for name in ("input.src", "input.labels", "input.tgt")]
        write_lines(paths[0], sources * len(views))
        write_lines(paths[1], [view for view in views for _ in sources])
        write_lines(paths[2], targets * len(views))
        scores = os.path.join(tmp, "scores")
        runner = _with_options(system, {"score": {"with_token_level": True}}, tmp)
        runner.score(
            [paths[0], paths[1]],
            predictions_file=paths[2],
            checkpoint_path=checkpoint or system.checkpoint(),
            output_file=scores,
        )
        lines = read_lines(scores)
    if len(lines) != len(sources) * len(views):
        raise UserError(
            "system %s: OpenNMT-tf scored %d targets of %d"
            % (system.name, len(lines), len(sources) * len(views))
        )
    per_view = []
    for k in range(len(views)):
        values = []
        for line in lines[k * len(sources) : (k + 1) * len(sources)]:
            fields = line.split(" ||| ")
            values.extend(-float(value) for value in fields[2].split())
        per_view.append(values)
    return np.array(per_view).T


def _dev_paths(corpus_dir, domains, src, tgt):
    """The tokenized dev files of each domain: ``[(source, target)]``.

    Raises:
      UserError: ``dev set of DOMAIN: PATH: no such file``.
    """
    pairs = []
    for domain in domains:
        paths = tuple(os.path.join(corpus_dir, "dev.%s.%s" % (domain, lang)) for lang in (src, tgt))
        for path in paths:
            if not os.path.exists(path):
                raise UserError("dev set of %s: %s: no such file" % (domain, path))
        pairs.append(paths)
    return pairs


def learned_weights_stamp(system, corpus_dir, src, tgt, checkpoint=None):
    """What the ens-learned weights of :obj:`system` depend on
    (:func:`ldr_opennmt.stamps.make_stamp`): the SHA-256 of the checkpoint's files
    (``checkpoint``; a model retrained at the same path differs), of the dev files of its
    domains (``dev``), its views and its vocabularies. The number of dev sentences per
    domain is the fit's choice (``ldr-eval fit-ensemble --per-domain``), recorded but not
    compared.

    Args:
      system: The :class:`~ldr_opennmt.evaluation.systems.System`.
      corpus_dir: A corpus built by ``ldr-data``.
      src: The source language.
      tgt: The target language.
      checkpoint: The checkpoint prefix (default: the system's latest).

    Raises:
      UserError: if the checkpoint is incomplete or a dev file is missing.
    """
    domains = system_domains(system)
    paths = [path for pair in _dev_paths(corpus_dir, domains, src, tgt) for path in pair]
    return stamps.make_stamp(
        checkpoint=system.checkpoint_digest(checkpoint),
        dev=stamps.files_digest(paths),
        views=ensembles.view_names(domains),
        vocabularies=system.vocabularies(),
    )


def learned_weights_decision(system, corpus_dir, src, tgt):
    """Whether the ens-learned weights of :obj:`system` can be used as they are.

    They can when they are configured (``data: ensemble_weights``, no ``ensemble.json``), or
    when its ``ensemble.json`` records the :func:`learned_weights_stamp` of this checkpoint
    and dev data; not when none are stored or configured, nor when they were fitted for
    other weights (the model trained on since, or retrained at the same path), other dev
    data, or before the file had a stamp.

    Returns:
      A :class:`ldr_opennmt.stamps.Decision` (true: reuse); its ``reason`` says what
      differs (``checkpoint differs``).
    """
    path = os.path.join(system.model_dir, ensembles.WEIGHTS_FILE)
    if not os.path.exists(path):
        if system.finalized_config()["data"].get(ensembles.CONFIG_KEY) is not None:
            return stamps.Decision(
                True, "configured (data: %s)" % ensembles.CONFIG_KEY, None, False
            )
        return stamps.Decision(False, "no fitted weights (%s)" % path, None, False)
    return stamps.matches(path, learned_weights_stamp(system, corpus_dir, src, tgt))


def balanced_dev(corpus_dir, domains, src, tgt, per_domain):
    """The first :obj:`per_domain` tokenized dev pairs of each domain: ``(sources,
    targets, pairs per domain)`` (a smaller dev set gives all its pairs)."""
    sources, targets, counts = [], [], []
    for paths in _dev_paths(corpus_dir, domains, src, tgt):
        pairs = list(zip(read_lines(paths[0]), read_lines(paths[1])))[:per_domain]
        sources.extend(pair[0] for pair in pairs)
        targets.extend(pair[1] for pair in pairs)
        counts.append(len(pairs))
    return sources, targets, counts


def fit_learned_weights(system, corpus_dir, src, tgt, per_domain=200, work_dir=None):
    """Fits the ens-learned weights of :obj:`system` and stores them in its model directory.

    Args:
      system: A :class:`~ldr_opennmt.evaluation.systems.System` with domain views.
      corpus_dir: A corpus built by ``ldr-data`` (its ``dev.{domain}`` files).
      src: The source language.
      tgt: The target language.
      per_domain: Dev sentences per known domain (the same number for each: balanced).
      work_dir: A directory for temporary files (default: the model directory).

    Returns:
      The content of ``{model_dir}/ensemble.json``: the weights and what they were fitted
      on, and their stamp (``inputs``, :func:`learned_weights_stamp`).
    """
    domains = system_domains(system)
    if not domains:
        raise UserError("system %s declares no domains: it has no views to ensemble" % system.name)
    refusal = system.ensemble_refusal
    if refusal:
        raise UserError("system %s: %s" % (system.name, refusal))
    checkpoint = system.checkpoint()
    # Before the fit: the files it reads, as they are when it starts.
    stamp = learned_weights_stamp(system, corpus_dir, src, tgt, checkpoint)
    sources, targets, counts = balanced_dev(corpus_dir, domains, src, tgt, per_domain)
    log_probs = view_token_log_probs(
        system, sources, targets, work_dir or system.model_dir, checkpoint
    )
    weights, likelihood = ensembles.fit_weights(log_probs)
    record = {
        "views": ensembles.view_names(domains),
        "weights": weights,
        "log_likelihood_per_token": likelihood,
        "uniform_log_likelihood_per_token": float(
            np.mean(np.logaddexp.reduce(log_probs - np.log(log_probs.shape[1]), axis=1))
        ),
        "tokens": int(log_probs.shape[0]),
        "sentences_per_domain": dict(zip(domains, counts)),
        "corpus": os.path.abspath(corpus_dir),
        "checkpoint": checkpoint,
        "fitted": datetime.datetime.now().isoformat(timespec="seconds"),
    }
    stamps.write(os.path.join(system.model_dir, ensembles.WEIGHTS_FILE), stamp, **record)
    return stamps.canonical(dict(record, format=stamps.FORMAT, inputs=stamp))
