"""Domain labels as an input, and a source inputter that carries them.

Data files: the source text and a label file aligned with it (one domain name
per line, or ``generic``). On the command line and in the YAML configuration
they are given as a pair, in the same way as OpenNMT-tf multi-source inputs::

    train_features_file: [train.src, train.domain]
    onmt-main ... infer --features_file test.src test.domain

A label file can also be written ``domain:NAME`` (:func:`constant_label`): every
line of the aligned source has that label. The multi-domain Runner uses it for
per-domain corpora (``data: train_corpora``), so users need no hand-made label
files, and configurations stay plain YAML.

The features produced by :class:`MultiDomainInputter` are the word features
(``tokens``, ``ids``, ``length``) plus ``domain``, the int32 domain id of each
sentence.
"""

import contextlib
import sys

import numpy as np
import opennmt
import tensorflow as tf
from opennmt.data import dataset as dataset_util

from ldr_opennmt import domains as domains_lib
from ldr_opennmt import ensembles
from ldr_opennmt.errors import UserError
from ldr_opennmt.layers.embedding import DomainAwareWordEmbedder

#: Where a multi-domain model goes for CTranslate2 (see ``ldr_opennmt.serving``).
CTRANSLATE2_HINT = "use `ldr-export ctranslate2` (one folded CTranslate2 model per domain)"


#: A label "file" written ``domain:NAME`` stands for a file whose every line is NAME.
CONSTANT_LABEL_PREFIX = "domain:"


def constant_label(name):
    """The label-file entry meaning "every sentence of the aligned source is :obj:`name`".

    It is a plain string, so configurations holding it stay plain YAML (OpenNMT-tf
    writes and re-reads them, e.g. for batch-size auto-tuning). The multi-domain
    Runner uses it for per-domain corpora (``data: train_corpora``); users can
    write it wherever a label file goes, also on the command line::

        onmt-main ... infer --features_file test.en domain:medical
    """
    return CONSTANT_LABEL_PREFIX + str(name)


def constant_label_name(label_file):
    """The domain name of a :func:`constant_label` entry, or ``None`` for a file path."""
    if isinstance(label_file, str) and label_file.startswith(CONSTANT_LABEL_PREFIX):
        return label_file[len(CONSTANT_LABEL_PREFIX) :]
    return None


def constant_label_id(label_file, domains, where):
    """The id of a :func:`constant_label` entry's domain (checked against :obj:`domains`).

    Without declared domains (a model that ignores them), the generic id.

    Raises:
      UserError: if the name is neither declared nor ``generic``.
    """
    return domains_lib.label_id(constant_label_name(label_file), domains, where)


def constant_label_dataset(label_file):
    """An endless dataset of a constant label: zipped with a source, it stops with it."""
    return tf.data.Dataset.from_tensors(tf.constant(constant_label_name(label_file))).repeat()


class DomainInputter(opennmt.inputters.Inputter):
    """Reads domain labels and maps them to domain ids."""

    def __init__(self, required=True, **kwargs):
        """Initializes the inputter.

        Args:
          required: If ``True``, a domain list must be declared in the data
            configuration. If ``False`` (models that ignore domains) and no list is
            declared, labels are read but every sentence is treated as generic.
          **kwargs: Additional layer keyword arguments.
        """
        super().__init__(**kwargs)
        self.required = required
        self.optional_labels = False
        self.domains = None
        self._table = None
        self._view_table = None
        self._any_label_is_generic = False
        #: Why this model translates no ensemble of domain views (set by the model;
        #: ``None``: ensemble labels are read, see :mod:`ldr_opennmt.ensembles`).
        self.ensemble_refusal = "this model has no domain views to ensemble"
        #: The fitted weights of ``ens-learned`` (``data: ensemble_weights``), or ``None``.
        self.learned_weights = None
        self._scoring = False

    @contextlib.contextmanager
    def any_label_is_generic(self):
        """Within this context (eager code only), every label reads as ``generic``.

        For the placeholder batch on which OpenNMT-tf's ``Model.create_variables``
        builds a model (its labels are ``"a"``).
        """
        self._any_label_is_generic = True
        try:
            yield
        finally:
            self._any_label_is_generic = False

    def initialize(self, data_config):
        domains = data_config.get("domains")
        if domains is None and not self.required:
            self.domains = None
            return
        self.domains = domains_lib.validate_domain_names(domains, source="the data configuration")
        self._table = domains_lib.make_lookup_table(self.domains)
        self.learned_weights = ensembles.learned_from_config(data_config, self.domains)
        self._view_table = ensembles.make_view_table(self.domains)

    @contextlib.contextmanager
    def scoring(self):
        """Within this context, label files are for scoring or evaluation (a reference is
        given): the teacher-forced pass runs one view per sentence, so ensemble labels are
        refused (they would be scored as their largest-weight view)."""
        self._scoring = True
        try:
            yield
        finally:
            self._scoring = False

    @property
    def reads_ensembles(self):
        """Whether ensemble labels are translated (declared domains, no refusal)."""
        return self.domains is not None and self.ensemble_refusal is None

    def _ensemble_label(self, training):
        """The ``ensemble`` reader of :func:`~ldr_opennmt.domains.read_label_file`."""

        def _read(label, where):
            if not ensembles.is_ensemble_label(label):
                return False
            if training:
                reason = "ensembles of domain views are for translation, not training"
            elif self._scoring:
                reason = (
                    "ensembles of domain views are for translation (infer, the SavedModel), "
                    "not for scoring or evaluation against references"
                )
            elif self.domains is None:
                reason = "the data configuration declares no domains"
            else:
                reason = self.ensemble_refusal
            if reason:
                raise UserError("%s: ensemble label %r: %s" % (where, label, reason))
            ensembles.parse_label(label, self.domains, self.learned_weights, where)
            return True

        return _read

    def validate_file(self, label_file, source_file=None, training=False):
        """Checks every label of :obj:`label_file` (and its line count).

        Args:
          label_file: A label file or a :func:`constant_label`.
          source_file: The aligned source file (line count, error messages).
          training: Whether the labels are for training (no ensemble label then).

        Returns:
          The domain id of each line (a single id for a :func:`constant_label`; an
          ensemble label counts as ``generic``).

        Raises:
          UserError: with the file, line number and value of the first bad label.
        """
        name = constant_label_name(label_file)
        if name is not None:
            if self._ensemble_label(training)(name, source_file or label_file):
                return [domains_lib.GENERIC_ID]
            return [constant_label_id(label_file, self.domains, source_file or label_file)]
        if not tf.io.gfile.exists(label_file):
            raise UserError("%s: domain label file not found" % label_file)
        expected = None
        if source_file is not None:
            expected = domains_lib.count_lines(source_file)
        # Without declared domains (a model that ignores them), any label is accepted
        # but the file must still be aligned with the source.
        return domains_lib.read_label_file(
            label_file,
            self.domains,
            expected_lines=expected,
            source_path=source_file,
            ensemble=self._ensemble_label(training),
        )

    def make_dataset(self, data_file, training=None):
        if isinstance(data_file, (list, tuple)):
            return [self.make_dataset(f, training=training) for f in data_file]
        if constant_label_name(data_file) is not None:
            return constant_label_dataset(data_file)
        return dataset_util.make_datasets(tf.data.TextLineDataset, data_file)

    def input_signature(self):
        if self.optional_labels:
            return {}  # Serving needs no label.
        return {"domain": tf.TensorSpec([None], tf.string)}

    def make_features(self, element=None, features=None, training=None):
        if features is None:
            features = {}
        if "domain" in features and features["domain"].dtype == tf.int32:
            return features
        labels = features.pop("domain", element)
        labels = tf.convert_to_tensor(labels, dtype=tf.string)
        if self.domains is None or self._any_label_is_generic:
            ids = tf.fill(tf.shape(labels), domains_lib.GENERIC_ID)
        elif not training and not self._scoring and self.reads_ensembles:
            # Translation: view weights too (an ensemble label mixes the views). Scoring and
            # evaluation datasets (traced inside scoring()) have plain labels only: without
            # weights, their graphs hold no ensemble branch.
            mixed = ensembles.ensemble_rows(labels)
            plain = tf.where(mixed, domains_lib.GENERIC, labels)
            ids = domains_lib.lookup_domain_ids(self._table, plain, self.domains)
            ens_ids, weights = ensembles.label_weights(
                tf.where(mixed, labels, ensembles.ENS_UNIFORM),
                self.domains,
                self.learned_weights,
                table=self._view_table,
            )
            features[ensembles.WEIGHTS_FEATURE] = tf.where(
                mixed[..., None], weights, ensembles.one_hot_views(ids, len(self.domains))
            )
            ids = tf.where(mixed, ens_ids, ids)
        else:
            ids = domains_lib.lookup_domain_ids(self._table, labels, self.domains)
        features["domain"] = ids
        return features


#: The default of ``params: maximum_source_length`` (tokens).
DEFAULT_MAXIMUM_SOURCE_LENGTH = 1024


class MultiDomainInputter(opennmt.inputters.ParallelInputter):
    """Source inputter: a word embedder plus the sentence domain labels.

    The word embedder keeps the plain ``source_`` configuration prefix (e.g.
    ``source_vocabulary``), so configurations stay those of a single-source
    model plus ``domains`` and a label file. It is a ``ParallelInputter`` so that
    OpenNMT-tf regroups the flat file list of evaluation (``[src, labels, tgt]``)
    as ``[[src, labels], tgt]``; its features are flat (``ids``, ``length``,
    ``domain``...) and its output is the single embedding of the word inputter.
    """

    def __init__(self, word_inputter, domains_required=True, optional_labels=False):
        """Initializes the inputter.

        Args:
          word_inputter: The :class:`opennmt.inputters.WordEmbedder` (or a
            domain-aware subclass) embedding the source tokens.
          domains_required: Whether a declared domain list is mandatory.
          optional_labels: See :attr:`optional_labels`.
        """
        self.word_inputter = word_inputter
        self.domain_inputter = DomainInputter(required=domains_required)
        super().__init__([word_inputter, self.domain_inputter], combine_features=False)
        self.optional_labels = optional_labels

    @property
    def optional_labels(self):
        """Labels needed for training only (models that use them only in their loss).

        When ``True``: a training corpus must have labels, any other source file
        (inference, scoring, evaluation) may come alone, its sentences then being
        ``generic``; features without ``domain`` get ``generic`` ids; the serving
        signature has no ``domain`` input. A given label file is still checked.
        """
        return self.domain_inputter.optional_labels

    @optional_labels.setter
    def optional_labels(self, optional):
        self.domain_inputter.optional_labels = bool(optional)

    @opennmt.inputters.Inputter.asset_prefix.setter
    def asset_prefix(self, asset_prefix):
        # The base setter (not MultiInputter's, which numbers the sub-inputters).
        opennmt.inputters.Inputter.asset_prefix.fset(self, asset_prefix)
        self.word_inputter.asset_prefix = asset_prefix
        self.domain_inputter.asset_prefix = asset_prefix + "domain_"

    @property
    def num_outputs(self):
        return 1

    # Attributes of the word embedder that OpenNMT-tf reads on the source inputter.
    vocabulary_file = property(lambda self: self.word_inputter.vocabulary_file)
    vocabulary_size = property(lambda self: self.word_inputter.vocabulary_size)
    tokens_to_ids = property(lambda self: self.word_inputter.tokens_to_ids)
    ids_to_tokens = property(lambda self: self.word_inputter.ids_to_tokens)
    tokenizer = property(lambda self: self.word_inputter.tokenizer)
    mark_start = property(lambda self: self.word_inputter.mark_start)
    mark_end = property(lambda self: self.word_inputter.mark_end)
    num_oov_buckets = property(lambda self: self.word_inputter.num_oov_buckets)

    @property
    def embedding(self):
        """The embedding table of a plain word inputter (OpenNMT-tf's ``update_vocab``).

        Raises:
          UserError: if the word inputter is domain-aware: its output is not the
            rows of one table (its generic table alone would be a wrong model).
        """
        if isinstance(self.word_inputter, DomainAwareWordEmbedder):
            raise UserError(
                "the source embedding of %s is not a single table: it depends on the domain "
                "(for CTranslate2, %s)" % (type(self.word_inputter).__name__, CTRANSLATE2_HINT)
            )
        return self.word_inputter.embedding

    @property
    def reducer(self):
        """Blocks CTranslate2's OpenNMT-tf converter, the only reader of this attribute.

        OpenNMT-tf never reads it here (this class overrides every method that does).
        The converter takes the two sub-inputters for two source embeddings and asks
        how to merge them: the word inputter's table would be exported without the
        domain-specific parameters (LDR regions, DC domain vectors), and the domain
        labels dropped, i.e. a wrong model without error.

        Raises:
          UserError: always, naming ``ldr-export ctranslate2``.
        """
        raise UserError(
            "CTranslate2's OpenNMT-tf converter cannot convert a multi-domain model (source: "
            "%s + domain labels; the domain input and any domain-specific parameter would be "
            "dropped): %s" % (type(self.word_inputter).__name__, CTRANSLATE2_HINT)
        )

    @reducer.setter
    def reducer(self, reducer):
        # Set by MultiInputter.__init__; the output is the word inputter's alone.
        if reducer is not None:
            raise ValueError("MultiDomainInputter takes no reducer")

    @property
    def domains(self):
        """The declared domain names (or ``None``)."""
        return self.domain_inputter.domains

    def get_oov_tokens(self, features):
        return self.word_inputter.get_oov_tokens(features)

    def split_files(self, data_file):
        """Returns (source files, label files or None) from the configured data files.

        Accepted: ``[src, labels]``, ``[[src1, src2], [labels1, labels2]]`` (several
        weighted training files) and, for models that ignore domains, ``src``.
        """
        if isinstance(data_file, (list, tuple)) and len(data_file) == 2:
            sources, labels = data_file
            label_list = list(labels) if isinstance(labels, (list, tuple)) else [labels]
            if isinstance(sources, (list, tuple)) and any(
                isinstance(f, (list, tuple)) for f in list(sources) + label_list
            ):
                raise UserError(
                    "several training files are given as [[src1, src2, ...], "
                    "[labels1, labels2, ...]], got %r" % (data_file,)
                )
            return sources, labels
        if isinstance(data_file, (list, tuple)) and len(data_file) == 1:
            data_file = data_file[0]
        if isinstance(data_file, str) and (
            not self.domain_inputter.required or self.optional_labels
        ):
            return data_file, None
        raise UserError(
            "expected a source file and an aligned domain label file "
            "(e.g. features_file: [train.src, train.domain]), got %r" % (data_file,)
        )

    def make_dataset(self, data_file, training=None):
        source_files, label_files = self.split_files(data_file)
        if label_files is None and training and self.optional_labels:
            raise UserError(
                "training needs domain labels (this model's loss uses them): give "
                "features_file: [train.src, train.domain] or data: train_corpora, got %r"
                % (data_file,)
            )
        if label_files is not None:
            pairs = (
                zip(source_files, label_files)
                if isinstance(source_files, (list, tuple))
                else [(source_files, label_files)]
            )
            if isinstance(source_files, (list, tuple)) != isinstance(label_files, (list, tuple)):
                raise UserError(
                    "give as many domain label files as source files: %r vs %r"
                    % (source_files, label_files)
                )
            if isinstance(source_files, (list, tuple)) and len(source_files) != len(label_files):
                raise UserError(
                    "%d source files but %d domain label files"
                    % (len(source_files), len(label_files))
                )
            seen = set()
            for source_file, label_file in pairs:
                seen.update(
                    self.domain_inputter.validate_file(
                        label_file, source_file=source_file, training=training
                    )
                )
            if (
                training
                and self.domains is not None
                and not constant_label_name(label_files) is not None
            ):
                # Legitimate when fine-tuning on some domains, suspicious otherwise.
                for i, domain in enumerate(self.domains):
                    if i not in seen:
                        tf.get_logger().warning(
                            "Domain %r is declared but no training sentence has this label in %s",
                            domain,
                            label_files,
                        )
        sources = self.word_inputter.make_dataset(source_files, training=training)
        if label_files is None:
            labels = [None] * len(sources) if isinstance(sources, list) else None
        else:
            labels = self.domain_inputter.make_dataset(label_files, training=training)

        def _zip(source, label):
            if label is None:
                label = source.map(lambda _: tf.constant(domains_lib.GENERIC))
            return tf.data.Dataset.zip((source, label))

        if isinstance(sources, list):
            return [_zip(s, lab) for s, lab in zip(sources, labels)]
        return _zip(sources, labels)

    def get_dataset_size(self, data_file):
        source_files, _ = self.split_files(data_file)
        return self.word_inputter.get_dataset_size(source_files)

    def input_signature(self):
        signature = dict(self.word_inputter.input_signature())
        signature.update(self.domain_inputter.input_signature())
        return signature

    def get_length(self, features, ignore_special_tokens=False):
        return self.word_inputter.get_length(features, ignore_special_tokens=ignore_special_tokens)

    def get_padded_shapes(self, element_spec, maximum_length=None):
        return self.word_inputter.get_padded_shapes(element_spec, maximum_length=maximum_length)

    #: The longest source at inference, in tokens (``params: maximum_source_length``,
    #: set by the model; see :meth:`truncate_source`).
    maximum_source_length = DEFAULT_MAXIMUM_SOURCE_LENGTH
    #: Whether a truncated source prints a warning line from the graph (stock
    #: ``onmt-main``, SavedModels); ``Runner.infer`` counts them itself instead.
    warn_truncation_in_graph = True

    def truncate_source(self, features):
        """Cuts the source tokens of inference features at :attr:`maximum_source_length`.

        A 20,000-token line would otherwise take more than 4 GB in self-attention
        (``[heads, length, length]`` per layer) at inference. Training drops long
        examples instead (``train: maximum_features_length``).
        """
        limit = self.maximum_source_length
        length = features["length"]
        too_long = tf.greater(length, limit)
        if self.warn_truncation_in_graph:

            def _warn():
                printed = tf.print(
                    "ldr-opennmt: warning: a source of",
                    tf.reduce_max(length),
                    "tokens truncated to params: maximum_source_length (%d)" % limit,
                    output_stream=sys.stderr,
                )
                with tf.control_dependencies([printed] if printed is not None else []):
                    return tf.constant(True)

            warned = tf.cond(tf.reduce_any(too_long), _warn, lambda: tf.constant(False))
            with tf.control_dependencies([warned]):
                length = tf.identity(length)
        features = dict(features)
        features["length"] = tf.minimum(length, limit)
        for name in ("tokens", "ids"):
            if name in features:
                value = features[name]
                features[name] = value[:limit] if value.shape.rank == 1 else value[:, :limit]
        return features

    def make_features(self, element=None, features=None, training=None):
        if features is None:
            features = {}
        domain = features.pop("domain", None)
        features = self.word_inputter.make_features(
            element=domains_lib.strip_bom(element[0]) if element is not None else None,
            features=features,
            training=training,
        )
        if not training:
            features = self.truncate_source(features)
        if domain is None and element is None and self.optional_labels:
            # Served or hand-made features without labels: every sentence is generic.
            features["domain"] = tf.fill(
                tf.shape(features["length"]), tf.constant(domains_lib.GENERIC_ID, tf.int32)
            )
            return features
        domain_features = {} if domain is None else {"domain": domain}
        features.update(
            self.domain_inputter.make_features(
                element=element[1] if element is not None else None,
                features=domain_features,
                training=training,
            )
        )
        return features

    def keep_for_training(self, features, maximum_length=None):
        if isinstance(maximum_length, (list, tuple)):
            maximum_length = maximum_length[0]
        return self.word_inputter.keep_for_training(features, maximum_length=maximum_length)

    def build(self, input_shape):
        self.word_inputter.build(input_shape)
        self.domain_inputter.built = True  # No weights; MultiInputter.built reads it.
        self.built = True

    def call(self, features, training=None):
        return self.word_inputter(features, training=training)

    def visualize(self, model_root, log_dir):
        self.word_inputter.visualize(model_root, log_dir)


class MultiDomainExamplesInputter(opennmt.models.sequence_to_sequence.SequenceToSequenceInputter):
    """The (source, target) inputter of multi-domain models: adds domain batches.

    With ``domain_batches: true`` in the data configuration and one training file
    per domain, every training batch is made of a single domain's sentences, the
    domain being drawn for each batch with the probabilities that OpenNMT-tf
    derives from ``train_files_weights`` and the corpus sizes
    (:func:`opennmt.data.normalize_weights`: weight x size, normalized). This is
    Procedure 1, steps 2-3, of Pham et al. (2019); the multi-domain Runner sets
    the weights to ``|C_i|^(alpha - 1)`` so that a batch comes from domain i with
    probability ``|C_i|^alpha / sum_j |C_j|^alpha``.

    Without ``domain_batches``, OpenNMT-tf's own example-level weighted sampling
    is used (batches mix domains).

    It also drops the training pairs with an empty side
    (:meth:`keep_for_training`), and checks the training files before building
    the dataset (:meth:`check_training_files`).

    A model can put tokens before every target that depend on the example's source
    features (e.g. its domain): see :attr:`target_prefix_fn`.
    """

    domain_batches = False
    keep_empty_targets = False
    _training_features_file = None
    _domain_shares = None

    #: Set by a model that needs it (default ``None``): a callable taking the source
    #: features of one example (``domain`` included) and returning the 1-D string
    #: tensor of the tokens to put before its target words, possibly empty. They are
    #: looked up in the target vocabulary and inserted after the start token, so the
    #: decoder reads ``<s> PREFIX w1 ..`` and predicts ``PREFIX w1 .. </s>`` (training,
    #: evaluation and ``score``); they do not count as target words for the empty
    #: target filter. Target Token Mixing (:mod:`ldr_opennmt.models.ttm`) prepends the
    #: domain token with it.
    target_prefix_fn = None

    def initialize(self, data_config):
        super().initialize(data_config)
        self.domain_batches = bool(data_config.get("domain_batches", False))
        self.keep_empty_targets = domains_lib.keep_empty_targets(data_config)

    def keep_for_training(self, features, maximum_length=None):
        """OpenNMT-tf's length filter, plus: no pair with an empty source or target.

        OpenNMT-tf keeps an example whose lengths are above 0, but a target's length
        counts the start token it adds (the decoder reads ``<s> w1 .. wn`` and predicts
        ``w1 .. wn </s>``): an empty target line has length 1 and would be trained
        on, teaching the model to translate a sentence into nothing. The lengths
        here are without special tokens. ``data: keep_empty_targets: true`` keeps
        the pairs with an empty target; an empty source is always dropped (OpenNMT-tf
        drops it too, unless source sequence controls make its length non-zero).
        """
        keep = super().keep_for_training(features, maximum_length=maximum_length)
        if isinstance(keep, bool) and not keep:
            return False
        source, target = features
        constraints = [
            tf.greater(self.features_inputter.get_length(source, ignore_special_tokens=True), 0)
        ]
        if not self.keep_empty_targets:
            words = self.labels_inputter.get_length(target, ignore_special_tokens=True)
            if self.target_prefix_fn is not None:
                words -= tf.size(self.target_prefix_fn(source), out_type=words.dtype)
            constraints.append(tf.greater(words, 0))
        if not isinstance(keep, bool):
            constraints.append(keep)
        return tf.reduce_all(constraints)

    def make_features(self, element=None, features=None, training=None):
        if element is not None:  # The target line (the source's is the source inputter's).
            element = (element[0], domains_lib.strip_bom(element[1]))
        features, labels = super().make_features(
            element=element, features=features, training=training
        )
        if self.target_prefix_fn is not None:
            prefix = self.target_prefix_fn(features)
            labels = prepend_target_tokens(self.labels_inputter, labels, prefix)
        return features, labels

    def make_evaluation_dataset(self, features_file, labels_file, batch_size, **kwargs):
        domain_inputter = getattr(self.features_inputter, "domain_inputter", None)
        if domain_inputter is None:
            return super().make_evaluation_dataset(features_file, labels_file, batch_size, **kwargs)
        with domain_inputter.scoring():  # onmt-main score and eval: no ensemble label.
            return super().make_evaluation_dataset(features_file, labels_file, batch_size, **kwargs)

    def check_training_files(self, features_file, labels_file):
        """Checks each (source, target) pair of training files; logs their empty pairs.

        See :func:`ldr_opennmt.domains.check_parallel_files`: a line that is not
        UTF-8 and files of different lengths are refused, the pairs with an empty
        side counted per file before training starts. Files the multi-domain
        Runner has already checked (``data: train_corpora``) are not read again.
        Specifications OpenNMT-tf cannot pair are left to its own errors.

        Raises:
          UserError: see :func:`~ldr_opennmt.domains.check_parallel_files`.
        """
        sources, _ = self.features_inputter.split_files(features_file)
        if isinstance(sources, str) and isinstance(labels_file, str):
            pairs = [(sources, labels_file)]
        elif (
            isinstance(sources, (list, tuple))
            and isinstance(labels_file, (list, tuple))
            and len(sources) == len(labels_file)
        ):
            pairs = list(zip(sources, labels_file))
        else:
            return
        for source, target in pairs:
            domains_lib.check_parallel_files(
                source, target, training=True, keep_empty=self.keep_empty_targets
            )

    def domain_shares(self):
        """Each domain's share of the training examples last given to
        :meth:`make_training_dataset` (``params: summed_generic_weight: corpus_share``).

        Returns:
          A list of ``len(domains) + 1`` floats summing to 1: index 0 is the share of the
          lines labelled ``generic``, index ``i + 1`` that of domain ``i``.

        Raises:
          UserError: when no training files were given yet, or a label is invalid.
        """
        if self._domain_shares is not None:
            return self._domain_shares
        if self._training_features_file is None:
            raise UserError(
                "params: summed_generic_weight: corpus_share reads the domain shares from the "
                "training files, and none were given (set the weight to a number or a mapping "
                "domain: share)"
            )
        domain_inputter = self.features_inputter.domain_inputter
        sources, labels = self.features_inputter.split_files(self._training_features_file)
        if isinstance(sources, str):
            sources, labels = [sources], [labels]
        counts = np.zeros(len(domain_inputter.domains) + 1, dtype=np.int64)
        for source, label in zip(sources, labels):
            ids = domain_inputter.validate_file(label, source_file=source, training=True)
            if constant_label_name(label) is not None:
                counts[ids[0] + 1] += domains_lib.count_lines(source)
            else:
                np.add.at(counts, np.asarray(ids, dtype=np.int64) + 1, 1)
        total = int(counts.sum())
        if total == 0:
            raise UserError(
                "params: summed_generic_weight: corpus_share: the training files are empty"
            )
        self._domain_shares = [float(c) / total for c in counts]
        return self._domain_shares

    def make_training_dataset(self, features_file, labels_file, batch_size, **kwargs):
        # Remembered for domain_shares(), which reads them only when asked.
        if self._training_features_file != features_file:
            self._training_features_file = features_file
            self._domain_shares = None
        if not kwargs.get("batch_autotune_mode"):
            # Auto-tuning runs in child processes on data the parent has checked.
            self.check_training_files(features_file, labels_file)
        if not self.domain_batches:
            return super().make_training_dataset(features_file, labels_file, batch_size, **kwargs)
        sources, labels = self.features_inputter.split_files(features_file)
        if not isinstance(sources, (list, tuple)) or len(sources) < 2:
            return super().make_training_dataset(features_file, labels_file, batch_size, **kwargs)
        if kwargs.get("single_pass"):
            raise ValueError("domain_batches cannot be combined with single_pass")
        if kwargs.get("batch_autotune_mode"):
            # Memory autotuning only needs batches of maximal length: one domain does.
            return super().make_training_dataset(
                [sources[0], labels[0]], labels_file[0], batch_size, **kwargs
            )
        weights = kwargs.pop("weights", None)
        datasets = [
            super(MultiDomainExamplesInputter, self).make_training_dataset(
                [source, label], target, batch_size, **kwargs
            )
            for source, label, target in zip(sources, labels, labels_file)
        ]
        sizes = [self.features_inputter.word_inputter.get_dataset_size(s) for s in sources]
        probabilities = dataset_util.normalize_weights(datasets, weights=weights, sizes=sizes)
        tf.get_logger().info(
            "Domain batches: a batch comes from %s",
            ", ".join(
                "%s (%d examples) with p=%.4f" % (constant_label_name(label) or label, size, p)
                for label, size, p in zip(labels, sizes, probabilities)
            ),
        )
        # Each domain pipeline repeats forever and prefetches; sampling happens on
        # whole batches. The seed comes from the global one (onmt-main --seed).
        return tf.data.Dataset.sample_from_datasets(
            datasets, weights=probabilities, seed=_worker_seed(kwargs.get("shard_index", 0))
        )


def _worker_seed(shard_index):
    """The operation seed of a worker's domain draws: ``None`` (the global seed's) for
    the first worker, a different seed for each other one.

    Under Horovod each worker builds its own pipeline (its shard of every corpus) with
    the same ``--seed``: with the same seed, every worker would draw the same domain
    at every step, and each update would see one domain only. Drawn independently, the
    workers' batches of a step come from domains drawn with the formula's proportions,
    as under ``--num_gpus`` (where the replicas take successive batches of one
    pipeline). The base comes from NumPy's generator, which ``--seed`` also seeds, so a
    seeded run stays reproducible.
    """
    if not shard_index:
        return None
    return int(np.random.randint(2**31 - 1 - shard_index)) + shard_index


def prepend_target_tokens(labels_inputter, labels, tokens):
    """Puts :obj:`tokens` before the words of one example's target features.

    Args:
      labels_inputter: The target ``WordEmbedder`` (in decoder mode).
      labels: The target features of one example (``tokens``, ``ids``, ``ids_out``,
        ``length``), as the inputter made them.
      tokens: A 1-D string tensor, possibly empty.

    Returns:
      New target features: ``tokens`` starts with :obj:`tokens`, ``ids``/``ids_out``
      have their ids after the start token, ``length`` counts them.

    Raises:
      ValueError: on batched features (they are made one example at a time).
    """
    if labels["ids"].shape.rank != 1:
        raise ValueError("target prefixes are added to one example at a time, not a batch")
    labels = dict(labels)
    ids = tf.cast(labels_inputter.tokens_to_ids.lookup(tokens), labels["ids"].dtype)
    # Decoder mode split the full sequence (<s> w1 .. wn </s>) into ids = full[:-1] and
    # ids_out = full[1:]: rebuild it, insert after the start token, split again.
    full = tf.concat([labels["ids"][:1], labels["ids_out"]], 0)
    start = 1 if labels_inputter.mark_start else 0
    full = tf.concat([full[:start], ids, full[start:]], 0)
    labels["ids"], labels["ids_out"] = full[:-1], full[1:]
    labels["tokens"] = tf.concat([tokens, labels["tokens"]], 0)
    labels["length"] += tf.size(tokens, out_type=labels["length"].dtype)
    return labels
