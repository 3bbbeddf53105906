"""Small Mixed RNN for CPU experiments and tests."""

from ldr_opennmt import models


def model():
    return models.mixed_rnn(embedding_size=64, hidden_size=128)
