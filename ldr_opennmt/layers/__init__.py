"""Domain-aware layers, and the building blocks of new multi-domain methods.

* The domain context (:mod:`~ldr_opennmt.layers.context`): :func:`domain_scope` and
  :func:`current_domain` (the domain id of each sentence, bound by the model around every
  pass), the one per-thread stack of frames behind it (:func:`push_frame`,
  :func:`innermost_frame`), :class:`Recorder` (values recorded inside stock layers), and
  the protocol of layers with per-domain variables, :class:`DomainSpecificLayer`.
* Per-domain weights (:mod:`~ldr_opennmt.layers.per_domain`): :class:`DomainCopies` (a
  general copy and one copy per region, selected per sentence), :class:`DomainDense`,
  :func:`domain_matmul`, :func:`mixed_matmul`.
* Behaviours on stock OpenNMT-tf layers (:mod:`~ldr_opennmt.layers.behaviours`):
  :class:`Behaviour`, :func:`install_behaviour`; linear layers of stock attention and
  feed-forward layers are swapped with :func:`replace_dense`.
* The families' layers: :mod:`~ldr_opennmt.layers.ldr` (and the released code's LDR
  transform after every layer, :mod:`~ldr_opennmt.layers.ldr_transform`),
  :mod:`~ldr_opennmt.layers.domain_control`, :mod:`~ldr_opennmt.layers.factorized`,
  :mod:`~ldr_opennmt.layers.mixing`, :mod:`~ldr_opennmt.layers.adapters`,
  :mod:`~ldr_opennmt.layers.ttm`, :mod:`~ldr_opennmt.layers.adversarial`.
"""

from ldr_opennmt.layers.behaviours import Behaviour, install_behaviour
from ldr_opennmt.layers.context import (
    DomainSpecificLayer,
    Recorder,
    current_domain,
    domain_one_hot,
    domain_scope,
    innermost_frame,
    push_frame,
)
from ldr_opennmt.layers.domain_control import DomainControlEmbedder
from ldr_opennmt.layers.embedding import DomainAwareWordEmbedder
from ldr_opennmt.layers.ldr import LayerwiseLDREmbedder, LDREmbedder
from ldr_opennmt.layers.per_domain import (
    DomainCopies,
    DomainDense,
    DomainLinear,
    domain_matmul,
    mixed_matmul,
)
from ldr_opennmt.layers.replace import replace_dense
