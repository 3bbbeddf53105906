"""Domain classifier for LDR_pred: bidirectional LSTM + softmax (paper's setting)."""

from ldr_opennmt import hooks, models

# The package's hooks into onmt-main (one-line errors, training lock, domains.json, ...):
# installed here, on import, because onmt-main copies this file before it builds the model.
hooks.install()


def model():
    return models.domain_classifier(embedding_size=512, hidden_size=512)
