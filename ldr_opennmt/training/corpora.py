"""Per-domain corpora in the data configuration.

Users hold one corpus per domain (EMEA, ECB, Europarl, ...). The multi-domain
Runner reads them from the ``data`` section::

    data:
      domains: [medical, religious, software]   # optional: defaults to the corpora order
      train_corpora:
        medical: [train.medical.en, train.medical.fr]
        religious: [train.religious.en, train.religious.fr]
        software: [train.software.en, train.software.fr]
      eval_corpora:
        medical: [dev.medical.en, dev.medical.fr]
        ...

and turns them into the file lists OpenNMT-tf's inputters read, with a
a ``domain:NAME`` entry (:func:`~ldr_opennmt.inputters.constant_label`) standing
for each corpus' label file, so no label file has to be written by hand and the
expanded configuration is still plain YAML.
"""

import collections
import math

import tensorflow as tf

from ldr_opennmt import domains as domains_lib
from ldr_opennmt.errors import UserError
from ldr_opennmt.inputters import constant_label

#: One domain's parallel corpus.
Corpus = collections.namedtuple("Corpus", ("domain", "source", "target", "size"))
_NOT_A_MAPPING = "data: %s must map each domain name to [source_file, target_file]"


def _corpus_files(key, name, spec):
    if isinstance(spec, dict):
        spec = [spec.get("source"), spec.get("target")]
    if (
        not isinstance(spec, (list, tuple))
        or len(spec) != 2
        or not all(isinstance(path, str) and path for path in spec)
    ):
        raise UserError(
            "data: %s: %s: expected [source_file, target_file], got %r" % (key, name, spec)
        )
    for path in spec:
        if path.splitlines() != [path]:  # It would cut the messages that name it.
            raise UserError("data: %s: %s: a file name with a line break: %r" % (key, name, path))
        try:
            if not tf.io.gfile.exists(path):
                raise UserError("data: %s: %s: file not found: %s" % (key, name, path))
        except (tf.errors.OpError, UnicodeError) as e:  # E.g. an unknown scheme://.
            raise UserError(
                "data: %s: %s: cannot read %s (%s)" % (key, name, path, " ".join(str(e).split()))
            ) from None
    return spec


def read_corpora(data_config, key):
    """Reads and checks the per-domain corpora ``data_config[key]``.

    Args:
      data_config: The ``data`` section of the configuration.
      key: ``train_corpora`` or ``eval_corpora``.

    Returns:
      A list of :class:`Corpus` in the declared domain order, or ``None`` if the
      key is not set.

    Every file is read once, here (see :func:`ldr_opennmt.domains.check_parallel_files`):
    its lines are counted, a line that is not UTF-8 is refused, and the pairs with
    an empty source or target are counted and logged, one warning per file, before
    training. Training drops them (``data: keep_empty_targets: true`` keeps those
    with an empty target); evaluation corpora are used as they are.

    Raises:
      UserError: on an undeclared domain, a missing or empty file, a line that is
        not UTF-8, source and target files of different lengths (with the file and
        line), or a training corpus whose every pair has an empty side.
    """
    corpora = data_config.get(key)
    if corpora is None:
        return None
    if not isinstance(corpora, dict) or not corpora:
        raise UserError(_NOT_A_MAPPING % key)
    declared = domains_lib.validate_domain_names(
        data_config.get("domains") or list(corpora), source="data: domains"
    )
    keep_empty = domains_lib.keep_empty_targets(data_config)
    result = []
    for name, spec in corpora.items():
        name = str(name)
        if name not in declared:
            raise UserError(
                "data: %s: domain %r is not declared in data: domains (%s)"
                % (key, name, ", ".join(declared))
            )
        source, target = _corpus_files(key, name, spec)
        # A file of no line is a file of no byte (a last line needs no newline).
        if tf.io.gfile.stat(source).length == 0:
            raise UserError("%s: empty corpus for domain %r (data: %s)" % (source, name, key))
        # One pass over each file counts its lines, checks UTF-8 and reports empty lines.
        size = domains_lib.check_parallel_files(
            source,
            target,
            training=key != "eval_corpora",
            keep_empty=keep_empty,
            what="domain %r (data: %s)" % (name, key),
        ).size
        result.append(Corpus(name, source, target, size))
    result.sort(key=lambda corpus: declared.index(corpus.domain))
    return result


def domain_names(data_config):
    """The declared domains, defaulting to the order of the train (or eval) corpora."""
    names = data_config.get("domains")
    if names is None:
        for key in ("train_corpora", "eval_corpora"):
            if data_config.get(key):
                if not isinstance(data_config[key], dict):
                    raise UserError(_NOT_A_MAPPING % key)
                names = list(data_config[key])
                break
    return domains_lib.validate_domain_names(names, source="data: domains")


def sampling(corpora, alpha):
    """The domain distribution and the OpenNMT-tf ``train_files_weights`` giving it.

    ``P(domain i) = |C_i|^alpha / sum_j |C_j|^alpha``, ``|C_i|`` being the size of
    corpus ``i``. OpenNMT-tf multiplies each weight by the corpus size before normalizing
    (:func:`opennmt.data.normalize_weights`), hence the weights ``|C_i|^(alpha - 1)``.

    Returns:
      (probabilities, weights), one per corpus.

    Raises:
      UserError: if alpha is negative, not a finite number, or so large that
        ``|C_i|^alpha`` is beyond a float.
    """
    try:
        alpha = float(alpha)
    except (TypeError, ValueError, OverflowError):
        raise UserError("train: domain_sampling_alpha must be a number, got %r" % (alpha,))
    if not math.isfinite(alpha):
        raise UserError("train: domain_sampling_alpha must be a finite number, got %s" % alpha)
    if alpha < 0:
        raise UserError("train: domain_sampling_alpha must be >= 0, got %s" % alpha)
    sizes = [corpus.size for corpus in corpora]
    try:
        probabilities = domains_lib.sampling_probabilities(sizes, alpha)
        weights = [float(size) ** (alpha - 1) for size in sizes]
    except OverflowError:
        probabilities = None
    if sizes and (probabilities is None or not math.isclose(sum(probabilities), 1.0)):
        # |C_i|^alpha (or their sum) is beyond a float.
        raise UserError(
            "train: domain_sampling_alpha %s is too large for corpora of %d lines"
            % (alpha, max(sizes))
        )
    return probabilities, weights


def example_files(corpora, classifier=False):
    """Returns the (features_file, labels_file) lists OpenNMT-tf reads for corpora.

    Args:
      corpora: A list of :class:`Corpus`.
      classifier: For a domain classifier, the features are the sources and the
        labels the domain names; otherwise the features are ``[sources, labels]``
        and the labels the targets.
    """
    labels = [constant_label(corpus.domain) for corpus in corpora]
    sources = [corpus.source for corpus in corpora]
    if classifier:
        features, targets = sources, labels
    else:
        features, targets = [sources, labels], [corpus.target for corpus in corpora]
    if len(corpora) == 1:
        # A single corpus is given as plain files, not a weighted list.
        features = [f[0] for f in features] if not classifier else features[0]
        targets = targets[0]
    return features, targets
