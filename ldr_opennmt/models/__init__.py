"""Multi-domain sequence-to-sequence models."""

from ldr_opennmt.models.adapters import ResidualAdapterTransformer, residual_adapter_transformer
from ldr_opennmt.models.classifier import DomainClassifier, domain_classifier
from ldr_opennmt.models.dc import dc_rnn, dc_transformer
from ldr_opennmt.models.factorized import FactorizedTransformer, factorized_transformer
from ldr_opennmt.models.ldr import (
    LayerwiseLDRTransformer,
    ldr_rnn,
    ldr_transformer,
    ldr_transformer_released,
)
from ldr_opennmt.models.mixed import mixed_rnn, mixed_transformer
from ldr_opennmt.models.mixing import MixingTransformer, mixing_transformer
from ldr_opennmt.models.multitask import (
    DomainClassifierTransformer,
    advl_transformer,
    ml_transformer,
)
from ldr_opennmt.models.sequence_to_sequence import (
    MultiDomainModel,
    MultiDomainRNN,
    MultiDomainTransformer,
)
from ldr_opennmt.models.ttm import TTMTransformer, ttm_transformer
