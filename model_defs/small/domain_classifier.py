"""Small domain classifier for CPU experiments and tests."""

from ldr_opennmt import models


def model():
    return models.domain_classifier(embedding_size=64, hidden_size=64)
