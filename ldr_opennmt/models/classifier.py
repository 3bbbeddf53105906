"""A domain classifier for the LDR_pred setting (Pham et al., 2019, section 3.3).

A bidirectional LSTM over the source words and a softmax over the declared
domains, built on OpenNMT-tf's ``SequenceClassifier``. Its classes are the
``data: domains`` list itself (no class vocabulary file), and its training data
are the source sides of the per-domain corpora (``data: train_corpora``) or a
source file with an aligned label file. ``ldr-main infer`` on it writes one
predicted domain name per line: a label file for ``onmt-main infer`` and
``ldr-eval --modes pred``. With ``infer: domain_posterior: true`` it writes the
posterior instead, as an ensemble label (``medical:0.71 religious:0.20 software:0.09``):
the ens-soft ensemble of a translation model with the same domains
(:mod:`ldr_opennmt.ensembles`).
"""

import opennmt
import tensorflow as tf
from opennmt.data import dataset as dataset_util
from opennmt.models.sequence_classifier import ClassInputter

from ldr_opennmt import domains as domains_lib
from ldr_opennmt import ensembles
from ldr_opennmt.errors import UserError
from ldr_opennmt.inputters import constant_label_dataset, constant_label_name
from ldr_opennmt.layers.adversarial import masked_mean
from ldr_opennmt.models.sequence_to_sequence import bidirectional_lstm_encoder

#: The ``infer`` option that prints posteriors instead of the predicted domain.
POSTERIOR_OPTION = "domain_posterior"


class DomainClassInputter(ClassInputter):
    """Reads domain labels (files or ``domain:NAME`` constants) as classes."""

    def __init__(self):
        super().__init__()
        self.domains = None

    def initialize(self, data_config):
        self.domains = domains_lib.validate_domain_names(
            data_config.get("domains"), source="the data configuration"
        )
        self.vocabulary_file = None
        self.vocabulary_size = len(self.domains)
        names = tf.constant(self.domains)
        ids = tf.range(len(self.domains), dtype=tf.int64)
        self.tokens_to_ids = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(names, ids), default_value=-1
        )
        self.ids_to_tokens = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(ids, names), default_value=domains_lib.GENERIC
        )
        self.tokenizer = opennmt.tokenizers.make_tokenizer(None)

    def make_dataset(self, data_file, training=None):
        if isinstance(data_file, (list, tuple)):
            return [self.make_dataset(f, training=training) for f in data_file]
        name = constant_label_name(data_file)
        if name is not None:
            if name not in self.domains:  # Not even generic: a classifier cannot learn it.
                raise UserError(
                    "%s: unknown domain %r (the classes: %s)"
                    % (data_file, name, ", ".join(self.domains))
                )
            return constant_label_dataset(data_file)
        # Every label must be a declared domain (a classifier cannot learn "generic").
        for line, domain_id in enumerate(domains_lib.read_label_file(data_file, self.domains), 1):
            if domain_id == domains_lib.GENERIC_ID:
                raise UserError(
                    "%s:%d: %r is not a class of the domain classifier"
                    % (data_file, line, domains_lib.GENERIC)
                )
        return dataset_util.make_datasets(tf.data.TextLineDataset, data_file)

    def get_dataset_size(self, data_file):
        if isinstance(data_file, (list, tuple)):
            sizes = [self.get_dataset_size(f) for f in data_file]
            return None if None in sizes else sizes
        if constant_label_name(data_file) is not None:
            return None  # As long as the source it labels.
        return super().get_dataset_size(data_file)

    def make_features(self, element=None, features=None, training=None):
        if features is None:
            features = {}
        if "classes" not in features:
            features["classes"] = tf.strings.strip(element)
        features["classes_id"] = self.tokens_to_ids.lookup(features["classes"])
        return features


class DomainClassifier(opennmt.models.SequenceClassifier):
    """Bidirectional LSTM + softmax over the declared domains."""

    #: Read by the multi-domain Runner: features are sources, labels are domains.
    is_domain_classifier = True

    def __init__(self, embedding_size=512, hidden_size=512, num_layers=1, dropout=0.1):
        """Initializes the classifier.

        Args:
          embedding_size: Size of the source word embeddings.
          hidden_size: Size of the encoder outputs (``hidden_size / 2`` LSTM cells
            per direction).
          num_layers: Number of encoder layers.
          dropout: Dropout probability.
        """
        super().__init__(
            opennmt.inputters.WordEmbedder(embedding_size=embedding_size),
            bidirectional_lstm_encoder(num_layers, hidden_size, dropout),
        )
        # SequenceClassifier hard-codes a ClassInputter: the same object graph, with
        # domain names as classes.
        self.examples_inputter = opennmt.inputters.ExampleInputter(
            self.features_inputter, DomainClassInputter()
        )

    @property
    def domains(self):
        """The domain names, in class order."""
        return self.labels_inputter.domains

    def call(self, features, labels=None, training=None, step=None):
        # Mean of the encoder outputs over the real tokens: the sentence as a whole
        # (SequenceClassifier would take the last layer state of one direction).
        inputs = self.features_inputter(features, training=training)
        length = self.features_inputter.get_length(features)
        outputs, _, _ = self.encoder(inputs, sequence_length=length, training=training)
        logits = self.output_layer(masked_mean(outputs, length))
        predictions = None
        if not training:
            classes_id = tf.argmax(logits, axis=1)
            predictions = {
                "classes": self.labels_inputter.ids_to_tokens.lookup(classes_id),
                "classes_id": classes_id,
                "probs": tf.nn.softmax(tf.cast(logits, tf.float32)),
            }
        return logits, predictions

    def format_prediction(self, prediction, params=None):
        # With ``infer: domain_posterior: true``, the posterior over the domains as an
        # ensemble label (``medical:0.712345 religious:...``): a label file for the
        # ens-soft ensemble of a translation model with the same domains (the paper's
        # ens-soft weighs the known domains only, so generic gets no weight).
        if (params or {}).get(POSTERIOR_OPTION):
            return ensembles.format_label(list(prediction["probs"]) + [0.0], self.domains)
        return super().format_prediction(prediction, params=params)

    def auto_config(self, num_replicas=1):
        return {
            "params": {"optimizer": "Adam", "learning_rate": 0.001},
            "train": {"batch_size": 64, "batch_type": "examples", "max_step": 5000},
            "infer": {"batch_size": 64},
        }


def domain_classifier(embedding_size=512, hidden_size=512, num_layers=1, dropout=0.1):
    """The paper's domain classifier: bidirectional LSTM + softmax."""
    return DomainClassifier(
        embedding_size=embedding_size,
        hidden_size=hidden_size,
        num_layers=num_layers,
        dropout=dropout,
    )
