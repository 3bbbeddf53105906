"""Base class of word embedders whose output depends on the sentence domain."""

import opennmt

from ldr_opennmt.errors import UserError
from ldr_opennmt.layers.context import DomainSpecificLayer, configured_regions


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
            raise UserError(
                "%s: pretrained embeddings (%s) are not supported"
                % (type(self).__name__, self.embedding_file)
            )
        self.domains, self.num_regions = configured_regions(
            data_config, self.num_reserved_regions, type(self).__name__
        )

    def fused_table(self, domain_id):
        """The embedding of every vocabulary unit in one domain, ``[V, output size]``.

        For a fixed domain a domain-aware embedder must be a plain embedding table
        (row ``v`` is its output for word ``v``, without dropout): this is what
        lets a model fold into one plain model per domain (CTranslate2 export).

        Args:
          domain_id: A domain id, or ``GENERIC_ID`` (-1).
        """
        return DomainSpecificLayer.fold(self, domain_id)  # Refuses: no fold defined.

    def fold(self, domain_id):
        return {"embedding": self.fused_table(domain_id)}

    def is_reserved(self, region):
        """Whether region ``region`` belongs to no declared domain (kept for later).

        Reserved regions are created so that the layer's output for their id equals
        the generic output (see :meth:`add_domain_weight`'s initializers in
        subclasses): a domain added later starts from the generic representation,
        and evaluating it before training on it falls back to generic.
        """
        return region >= len(self.domains)
