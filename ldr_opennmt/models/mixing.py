"""Word-level adaptive layer-wise domain mixing (Jiang et al., ACL 2020): the model.

A :class:`MixingTransformer` is a Transformer whose attention Q/K/V projections and
FFN linears have one weight copy per declared domain, mixed per word by the
domain proportions of each layer (:mod:`ldr_opennmt.layers.mixing`, installed into
OpenNMT-tf's stock encoder and decoder). Variants (section 4.2):

* ``encoder_decoder`` (the paper's E/DC, default): every encoder and decoder layer;
* ``encoder``: the encoder only; the decoder is a stock Transformer decoder.

**Loss** (section 3.4): ``L = L_gen + L_mix``. ``L_gen`` is OpenNMT-tf's
cross-entropy (label smoothing and its normalization included); ``L_mix`` is the
mean, over every (word, mixed layer) pair of the batch, of ``-log D_J(x)``, ``J``
the word's sentence domain: source words for encoder layers (and for the decoder
layers' proportions of the encoder output), target words for decoder layers;
padding and ``generic``-labelled sentences are left out. It is added as
``L_mix x (the loss normalizer)`` to the loss numerator, so that the normalized
training loss is ``L_gen + L_mix``, also under gradient accumulation and several
replicas. With the gradient cut (``cut=True``, the paper's) ``L_mix`` trains only
the proportion layers and ``L_gen`` only the translator. The evaluation loss (and
its perplexity) is ``L_gen`` alone, comparable with the other systems.

**Labels**: the domain labels are used only by ``L_mix``, so training needs them
(a label file, ``domain:NAME`` or ``ldr-main``'s ``train_corpora``; a training
corpus without labels is refused) and nothing else does: ``infer --features_file
test.en`` works, a label file there is checked against the declared domains and
ignored, and the SavedModel's signature has no ``domain`` input
(:class:`~ldr_opennmt.inputters.MultiDomainInputter` with ``optional_labels``).

**Training mode**: joint only. Procedure 1 and the Factorized curriculum modes need
domain-specific parameters updated by one domain's batches; mixed weights get a
gradient from every word (``eps > 0``), so they are shared parameters in that sense.

**WL is not built.** The paper's WL variant (section 4.1; "Encoder + WL" and
"E/DC + WL" in Tables 2-4) weights the loss of target word ``j`` by ``1 + alpha_j``,
``alpha_j`` coming from "an attention based domain classifier built upon the last
hidden layer" (after Zeng et al., 2018). That is all the paper says: not which last
hidden layer (encoder or decoder), what the attention's query and keys are, how
``alpha`` is normalized, how the classifier is trained, nor whether gradients flow
through ``alpha``. Any of these choices would be ours, not the paper's.
"""

import contextlib

import tensorflow as tf
from opennmt.utils import exporters

from ldr_opennmt import family_table
from ldr_opennmt.errors import UserError
from ldr_opennmt.layers import mixing
from ldr_opennmt.layers.context import configured_regions, domain_scope
from ldr_opennmt.models import procedure
from ldr_opennmt.models.sequence_to_sequence import (
    MultiDomainTransformer,
    word_transformer_arguments,
)
from ldr_opennmt.upstream import ledger

#: The variants this model builds.
VARIANTS = ("encoder", "encoder_decoder")


class MixingTransformer(MultiDomainTransformer):
    """A Transformer with word-level, layer-wise domain mixing."""

    domain_training_modes = (procedure.JOINT,)
    domain_training_reason = (
        "the mixing Transformer trains jointly (L = L_gen + L_mix, every domain's weights get "
        "a gradient from every word)"
    )
    ctranslate2_refusal = (
        "its per-domain weights are mixed by input-dependent domain proportions: no plain "
        "Transformer equals it for one domain (export a SavedModel instead)"
    )

    def __init__(
        self,
        num_layers=6,
        num_units=512,
        num_heads=8,
        ffn_inner_dim=2048,
        dropout=0.1,
        epsilon=mixing.DEFAULT_EPSILON,
        cut=True,
        variant="encoder_decoder",
        share_target_embeddings=True,
    ):
        """Initializes the model.

        Args:
          num_layers: Number of encoder and decoder layers.
          num_units: Model size.
          num_heads: Number of attention heads.
          ffn_inner_dim: FFN inner size.
          dropout: Dropout, attention dropout and FFN dropout.
          epsilon: The smoothing of the domain proportions, in ``[0, 1]`` (0.05 in the
            paper; 1 makes every proportion uniform).
          cut: The gradient cut between the proportion layers and the translator
            (``False`` for the ablation).
          variant: ``"encoder_decoder"`` (E/DC) or ``"encoder"``.
          share_target_embeddings: Tie the target input and output embeddings.

        Raises:
          UserError: on an :obj:`epsilon` outside ``[0, 1]`` or an unknown variant.
        """
        epsilon = mixing.validate_epsilon(epsilon)
        if variant not in VARIANTS:
            raise UserError(
                "unknown mixing Transformer variant %r (expected one of: %s)"
                % (variant, ", ".join(VARIANTS))
            )
        super().__init__(
            domain_training=procedure.JOINT,
            **word_transformer_arguments(
                num_layers, num_units, num_heads, ffn_inner_dim, dropout, share_target_embeddings
            ),
        )
        # Labels: required for training (L_mix), optional elsewhere.
        self.features_inputter.optional_labels = True
        self.epsilon = epsilon
        self.cut = bool(cut)
        self.variant = variant
        self._num_domains = None
        self._stacks = [self.encoder] + ([self.decoder] if variant == "encoder_decoder" else [])
        for stack in self._stacks:
            mixing.install(stack, epsilon=epsilon, cut=cut)

    @property
    def num_domains(self):
        """``k``, the number of per-domain copies (known once initialized)."""
        return self._num_domains

    def initialize(self, data_config, params=None):
        super().initialize(data_config, params=params)
        _, self._num_domains = configured_regions(data_config, 0, "the mixing Transformer")
        for stack in self._stacks:
            mixing.set_num_domains(stack, self._num_domains)

    def proportion_layers(self):
        """The :class:`~ldr_opennmt.layers.mixing.DomainProportions` layers: encoder
        layers, then decoder layers (E/DC)."""
        return [layer for stack in self._stacks for layer in mixing.proportion_layers(stack)]

    def call(self, features, labels=None, training=None, step=None):
        if labels is None:
            return super().call(features, labels=labels, training=training, step=step)
        with mixing.collect_proportions() as records:
            outputs, predictions = super().call(
                features, labels=labels, training=training, step=step
            )
        outputs = dict(outputs)
        total, count = mixing.mixing_loss(
            records,
            features["domain"],
            {
                mixing.SOURCE: self.features_inputter.get_length(features),
                mixing.TARGET: self.labels_inputter.get_length(labels),
            },
        )
        outputs["mixing_loss"] = tf.math.divide_no_nan(total, count)
        return outputs, predictions

    @contextlib.contextmanager
    def decoding_scope(self, features):
        # Beam search runs in a loop: its proportions are not collected.
        with super().decoding_scope(features), mixing.pause_collection():
            yield

    def auxiliary_losses(self, outputs):
        return [(outputs["mixing_loss"], 1.0)] if "mixing_loss" in outputs else []

    def compute_proportions(self, features, labels=None):
        """The domain proportions of every mixed layer for a batch (no dropout).

        Args:
          features: Source features (labels, if any, are not used).
          labels: Target features: with them, the decoder layers' proportions of the
            target words (teacher forcing) are computed too.

        Returns:
          The :class:`~ldr_opennmt.layers.mixing.ProportionRecord` of every proportion
          computation, encoder layers first (``proportions`` ``[batch, time, k]``; the
          time axis indexes the source or target words, per ``side``).
        """
        with mixing.collect_proportions() as records, domain_scope(features["domain"]):
            length = self.features_inputter.get_length(features)
            inputs = self.features_inputter(features, training=False)
            memory, state, memory_length = self.encoder(
                inputs, sequence_length=length, training=False
            )
            if labels is not None and self.variant == "encoder_decoder":
                ledger.decode_target(self, labels, memory, state, memory_length, training=False)
        return records

    def export(self, export_dir, exporter=None):
        allowed = (exporters.SavedModelExporter, exporters.CheckpointExporter)
        if exporter is not None and not isinstance(exporter, allowed):
            raise UserError(
                "%s cannot export the mixing Transformer: its per-domain weights are mixed by "
                "input-dependent domain proportions, so no plain Transformer equals it (export "
                "a SavedModel)" % type(exporter).__name__
            )
        return super().export(export_dir, exporter=exporter)


MIXING_PAPER = "Jiang et al., 2020 (ACL): word-level adaptive layer-wise domain mixing"


def mixing_transformer(**kwargs):
    """Word-level adaptive layer-wise domain mixing (Jiang et al., 2020): per-domain
    attention Q/K/V and FFN weights mixed per word by each layer's learned domain
    proportions, trained with ``L_gen + L_mix`` (domain labels for training only).
    The options (``epsilon`` 0.05, ``cut``, ``variant`` ``"encoder_decoder"`` or
    ``"encoder"``) and sizes are
    :class:`~ldr_opennmt.models.mixing.MixingTransformer`'s arguments."""
    return MixingTransformer(**kwargs)


MIXING_TRANSFORMER = family_table.Family(
    name="mixing_transformer",
    builder=mixing_transformer,
    title="Domain mixing",
    paper=MIXING_PAPER,
    summary="Per-domain attention and FFN weights mixed per word by learned domain "
    "proportions; labels for training only.",
    presets={"encoder": {"variant": "encoder"}},
    benchmark={
        "mix_k2": {"num_domains": 2},
        "mix_k3": {"num_domains": 3},
        "mix_k6": {"num_domains": 6},
    },
)
