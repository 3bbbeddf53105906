"""mixed rnn (full size, as in the LDR paper)."""

from ldr_opennmt import models


def model():
    return models.mixed_rnn()
