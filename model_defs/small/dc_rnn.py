"""Small domain-control RNN for CPU experiments and tests."""

from ldr_opennmt import models


def model():
    return models.dc_rnn(embedding_size=64, hidden_size=128)
