"""mixed transformer (full size, as in the LDR paper)."""

from ldr_opennmt import hooks, models

# The package's hooks into onmt-main (one-line errors, training lock, domains.json, ...):
# installed here, on import, because onmt-main copies this file before it builds the model.
hooks.install()


def model():
    return models.mixed_transformer()
