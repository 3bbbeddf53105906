"""Multi-domain sequence-to-sequence models."""

from ldr_opennmt.models.adapters import ResidualAdapterTransformer
from ldr_opennmt.models.catalog import (
    advl_transformer,
    dc_rnn,
    dc_transformer,
    factorized_transformer,
    ldr_rnn,
    ldr_transformer,
    ldr_transformer_released,
    mixed_rnn,
    mixed_transformer,
    mixing_transformer,
    ml_transformer,
    residual_adapter_transformer,
    ttm_transformer,
)
from ldr_opennmt.models.classifier import DomainClassifier, domain_classifier
from ldr_opennmt.models.factorized import FactorizedTransformer
from ldr_opennmt.models.ldr import LayerwiseLDRTransformer
from ldr_opennmt.models.mixing import MixingTransformer
from ldr_opennmt.models.multitask import DomainClassifierTransformer
from ldr_opennmt.models.sequence_to_sequence import (
    MultiDomainModel,
    MultiDomainRNN,
    MultiDomainTransformer,
)
from ldr_opennmt.models.ttm import TTMTransformer
