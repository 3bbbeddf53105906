"""What every backend of ``ldr-serve`` shares: its kind and the refused request.

Below :mod:`ldr_opennmt.serving.backends` (which chooses a backend) and
:mod:`ldr_opennmt.serving.savedmodel_backend` (which ``backends`` imports only for a
SavedModel), so that neither imports the other back. Standard library only.
"""

#: The kinds of backend (``Backend.kind``): an ``ldr-export ctranslate2`` directory, a
#: SavedModel of ``ldr-main export``.
CTRANSLATE2 = "ctranslate2"
SAVED_MODEL = "savedmodel"


class RequestError(Exception):
    """A refused request: an HTTP status and a one-line message."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status = status
