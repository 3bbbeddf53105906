"""LDR with the transform after every layer, as the authors' released code builds it.

A :class:`LayerwiseLDRTransformer` reads :class:`~ldr_opennmt.layers.ldr.
LayerwiseLDREmbedder` embeddings (the generic embedding of the model's size, the masked
domain regions beside it) on the source side, and on the target side when its target
embedder is one too, and adds each word's domain region through a bias-free dense layer
after the input and after every layer of the encoder (and decoder)
(:mod:`ldr_opennmt.layers.ldr_transform`; the released code's
``cell/self_attention_encoder_LDR.py`` and ``cell/self_attention_decoder_LDR.py``). Built
by :func:`ldr_opennmt.models.catalog.ldr_transformer` with ``ldr_transform="every_layer"``.

Every transform kernel is a domain weight of its region: Procedure 1 trains them with the
true-label pass, as the released code's ``generic_domain_training`` trains every variable
named ``ldr``; the other training modes, the domain scope, the SavedModel's ``domain``
input and ensembles of views work as for any family. The CTranslate2 export refuses the
model in one line (:data:`~ldr_opennmt.layers.ldr.LAYERWISE_FOLD_REFUSAL`).
"""

from ldr_opennmt.layers import ldr_transform
from ldr_opennmt.layers.ldr import LAYERWISE_FOLD_REFUSAL, LayerwiseLDREmbedder
from ldr_opennmt.models.sequence_to_sequence import MultiDomainTransformer


class LayerwiseLDRTransformer(MultiDomainTransformer):
    """A Transformer with the LDR transform after its input and after every layer, on
    each side whose embedder is a :class:`~ldr_opennmt.layers.ldr.LayerwiseLDREmbedder`."""

    ctranslate2_refusal = LAYERWISE_FOLD_REFUSAL

    def __init__(self, source_embedder, target_embedder, **kwargs):
        """Initializes the model.

        Args:
          source_embedder: A :class:`~ldr_opennmt.layers.ldr.LayerwiseLDREmbedder` of
            the model's size.
          target_embedder: Another one, or a plain ``WordEmbedder``.
          **kwargs: Arguments of
            :class:`~ldr_opennmt.models.sequence_to_sequence.MultiDomainTransformer`.

        Raises:
          ValueError: if the source embedder is not a layerwise LDR embedder, or an
            embedder's generic size is not the model's.
        """
        if not isinstance(source_embedder, LayerwiseLDREmbedder):
            raise ValueError("the source embedder must be a LayerwiseLDREmbedder")
        super().__init__(source_embedder, target_embedder, **kwargs)
        for stack, embedder in self.ldr_sides():
            if embedder.embedding_size != stack.num_units:
                raise ValueError(
                    "the LDR embedder's generic region has %d cells, the model %d units"
                    % (embedder.embedding_size, stack.num_units)
                )
            ldr_transform.install(stack, embedder.domain_region_size, embedder.zero_domain_regions)

    def ldr_sides(self):
        """``[(stack, its LDR embedder)]``: the encoder, and the decoder with LDR targets."""
        sides = (
            (self.encoder, self.features_inputter.word_inputter),
            (self.decoder, self.labels_inputter),
        )
        return [(s, e) for s, e in sides if isinstance(e, LayerwiseLDREmbedder)]

    def initialize(self, data_config, params=None):
        super().initialize(data_config, params=params)
        # Each stack's transforms have its embedder's regions (declared, then reserved).
        for stack, embedder in self.ldr_sides():
            for transform in ldr_transform.transforms(stack):
                transform.set_num_regions(embedder.num_regions, len(embedder.domains))
