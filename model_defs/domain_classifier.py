"""Domain classifier for LDR_pred: bidirectional LSTM + softmax (paper's setting)."""

from ldr_opennmt import models


def model():
    return models.domain_classifier(embedding_size=512, hidden_size=512)
