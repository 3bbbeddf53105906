"""Base class of word embedders whose output depends on the sentence domain."""

import opennmt

from ldr_opennmt import domains as domains_lib
from ldr_opennmt.layers.context import DomainSpecificLayer


class DomainAwareWordEmbedder(opennmt.inputters.WordEmbedder, DomainSpecificLayer):
    """A :class:`opennmt.inputters.WordEmbedder` with one parameter region per domain.

    The number of regions is the number of domains declared in the data
    configuration (``domains``) plus :obj:`num_reserved_regions` spare regions for
    domains added later. Region ``k`` belongs to the domain with id ``k``.
    """

    def __init__(self, embedding_size, num_reserved_regions=0, dropout=0.0, **kwargs):
        """Initializes the embedder.

        Args:
          embedding_size: The size of the word embedding.
          num_reserved_regions: Number of unused regions kept for future domains.
          dropout: The probability to drop units in the output.
          **kwargs: Additional layer keyword arguments.
        """
        super().__init__(embedding_size=embedding_size, dropout=dropout, **kwargs)
        if num_reserved_regions < 0:
            raise ValueError("num_reserved_regions must be >= 0")
        self.num_reserved_regions = num_reserved_regions
        self.domains = None
        self.num_regions = None

    def initialize(self, data_config):
        super().initialize(data_config)
        if self.embedding_file:
            raise domains_lib.DomainError(
                "%s: pretrained embeddings (%s) are not supported"
                % (type(self).__name__, self.embedding_file)
            )
        self.domains = domains_lib.validate_domain_names(
            data_config.get("domains"),
            source="the data configuration (required by %s)" % type(self).__name__,
        )
        self.num_regions = len(self.domains) + self.num_reserved_regions
