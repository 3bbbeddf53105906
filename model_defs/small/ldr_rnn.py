"""Small LDR RNN for CPU experiments and tests."""

from ldr_opennmt import models


def model():
    return models.ldr_rnn(embedding_size=64, hidden_size=128, domain_region_size=4)
