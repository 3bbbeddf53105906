"""Domain-aware layers."""

from ldr_opennmt.layers.context import (
    DomainSpecificLayer,
    current_domain,
    domain_one_hot,
    domain_scope,
)
from ldr_opennmt.layers.domain_control import DomainControlEmbedder
from ldr_opennmt.layers.embedding import DomainAwareWordEmbedder
from ldr_opennmt.layers.ldr import LDREmbedder
