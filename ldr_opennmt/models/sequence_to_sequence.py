"""Multi-domain sequence-to-sequence models.

:class:`MultiDomainModel` is a mixin for ``opennmt.models.SequenceToSequence``
subclasses. It is the single place that routes the domain id of each sentence:

* the source inputter (:class:`ldr_opennmt.inputters.MultiDomainInputter`) adds a
  ``domain`` id to the features;
* every forward pass runs inside :func:`ldr_opennmt.layers.domain_scope` with
  those ids, and beam search inside a scope with the ids tiled to the beam, so
  any domain-aware layer (source or target embedder, encoder or decoder block)
  reads the right domain in training, evaluation, beam search and SavedModels;
* training runs Procedure 1 or joint training (``params: domain_training``), and
  the optimizer skips the update of domains absent from a step.
"""

import functools

import opennmt
import tensorflow as tf
import tensorflow_addons as tfa
from opennmt import config as config_util
from opennmt.utils import exporters

from ldr_opennmt import assets as assets_lib
from ldr_opennmt import config_keys, config_loader, ensembles
from ldr_opennmt.errors import UserError
from ldr_opennmt.inputters import (
    DEFAULT_MAXIMUM_SOURCE_LENGTH,
    MultiDomainExamplesInputter,
    MultiDomainInputter,
)
from ldr_opennmt.layers.context import DomainSpecificLayer, configured_regions, domain_scope
from ldr_opennmt.models import ensemble
from ldr_opennmt.models import optimizer as optimizer_lib
from ldr_opennmt.models import procedure
from ldr_opennmt.upstream import ledger


def bidirectional_lstm_encoder(num_layers, hidden_size, dropout):
    """Bidirectional LSTM encoder: ``hidden_size / 2`` cells per direction, concatenated."""
    if hidden_size % 2:
        raise ValueError("hidden_size must be even (bidirectional encoder)")
    return opennmt.encoders.RNNEncoder(
        num_layers=num_layers,
        num_units=hidden_size // 2,
        bidirectional=True,
        residual_connections=False,
        dropout=dropout,
        reducer=opennmt.layers.ConcatReducer(),
        cell_class=tf.keras.layers.LSTMCell,
    )


def _assert_vector(value, name):
    """:obj:`value` as a vector, failing in graph unless its rank is 1."""
    rank = tf.rank(value)
    message = tf.strings.join(
        [
            "Invalid %s input of rank " % name,
            tf.strings.as_string(rank),
            ' (one label per sentence: a vector of rank 1, e.g. ["medical", "generic"])',
        ]
    )
    check = tf.debugging.Assert(tf.equal(rank, 1), [message], name=name + "_rank")
    with tf.control_dependencies([check]):
        return tf.reshape(value, [-1])


def _assert_same_batch_size(features):
    """Returns the serving features, failing in graph unless all have the same batch size."""
    names = sorted(features)
    sizes = [tf.shape(features[name])[0] for name in names]
    parts = ["Batch size mismatch (one domain label per sentence): "]
    for i, (name, size) in enumerate(zip(names, sizes)):
        parts += [", " if i else "", tf.strings.as_string(size), " in ", name]
    message = tf.strings.join(parts)
    check = tf.debugging.Assert(
        tf.reduce_all(tf.equal(tf.stack(sizes), sizes[0])), [message], name="batch_size"
    )
    with tf.control_dependencies([check]):
        return {name: tf.identity(value) for name, value in features.items()}


def _assert_valid_lengths(features):
    """Returns the serving features, failing in graph unless every ``length`` is in
    ``[1, width of tokens]``.

    A length of 0 or less, or longer than the padded ``tokens``, would otherwise be
    accepted: the model would read padding as words or translate nothing. The message
    names the first bad entry (index from 0) and the valid range.
    """
    length = features["length"]
    width = tf.shape(features["tokens"], out_type=length.dtype)[1]
    bad = tf.logical_or(tf.less(length, 1), tf.greater(length, width))
    # A sentinel entry keeps argmax defined on an empty batch (no entry is then bad).
    first = tf.argmax(tf.concat([tf.cast(bad, tf.int32), [1]], 0), output_type=tf.int32)
    value = tf.concat([length, tf.zeros([1], length.dtype)], 0)[first]
    message = tf.strings.join(
        [
            "Invalid length ",
            tf.strings.as_string(value),
            " at index ",
            tf.strings.as_string(first),
            " (each length must be in [1, ",
            tf.strings.as_string(width),
            "], the width of tokens)",
        ]
    )
    check = tf.debugging.Assert(tf.logical_not(tf.reduce_any(bad)), [message], name="length")
    with tf.control_dependencies([check]):
        return {name: tf.identity(value) for name, value in features.items()}


def _empty_outputs(specs):
    """Outputs of a batch of zero sentences, with the dtypes and the known sizes of
    :obj:`specs` (unknown sizes are 0)."""
    return {
        name: tf.zeros([0] + [dim or 0 for dim in spec.shape.as_list()[1:]], spec.dtype)
        for name, spec in specs.items()
    }


def transformer_arguments(num_layers, num_units, num_heads, ffn_inner_dim, dropout):
    """The ``opennmt.models.Transformer`` size arguments with one dropout rate for the
    layers, the attention and the FFN (every family's layout)."""
    return dict(
        num_layers=num_layers,
        num_units=num_units,
        num_heads=num_heads,
        ffn_inner_dim=ffn_inner_dim,
        dropout=dropout,
        attention_dropout=dropout,
        ffn_dropout=dropout,
    )


def word_transformer_arguments(
    num_layers, num_units, num_heads, ffn_inner_dim, dropout, share_target_embeddings
):
    """The :class:`MultiDomainTransformer` arguments of a Transformer with plain word
    embedders on both sides and one dropout rate (the Mixed Transformer's layout), which
    the families that put their per-domain parts elsewhere build on (domain mixing,
    residual adapters, TTM, ML/AdvL).

    Args:
      num_layers: Number of encoder and decoder layers.
      num_units: Model size (and embedding size).
      num_heads: Number of attention heads.
      ffn_inner_dim: FFN inner size.
      dropout: Dropout, attention dropout and FFN dropout.
      share_target_embeddings: Tie the target input and output embeddings.

    Returns:
      A dict of keyword arguments (``source_embedder`` and ``target_embedder``
      included).
    """
    share = opennmt.models.EmbeddingsSharingLevel
    return dict(
        transformer_arguments(num_layers, num_units, num_heads, ffn_inner_dim, dropout),
        source_embedder=opennmt.inputters.WordEmbedder(num_units),
        target_embedder=opennmt.inputters.WordEmbedder(num_units),
        share_embeddings=share.TARGET if share_target_embeddings else share.NONE,
    )


def _completes_initialization(initialize):
    """Wraps a model class's ``initialize`` so that, when the outermost call returns (the
    subclass has put its layers in place), :meth:`MultiDomainModel.initialized` runs."""

    @functools.wraps(initialize)
    def _initialize(self, *args, **kwargs):
        depth = self.__dict__.get("_initialize_depth", 0)
        object.__setattr__(self, "_initialize_depth", depth + 1)  # Untracked by Keras.
        try:
            result = initialize(self, *args, **kwargs)
        finally:
            object.__setattr__(self, "_initialize_depth", depth)
        if depth == 0:
            self.initialized()
        return result

    _initialize.completes_initialization = True
    return _initialize


class MultiDomainModel(ledger.DecodingScopeMixin):
    """Mixin adding domain routing and multi-domain training to a seq2seq model."""

    #: Checkpoints restored for inference, export, evaluation and scoring, under stock
    #: onmt-main too, must hold every variable of the model (see ``compat``).
    checks_checkpoints = True

    #: Training mode used when ``params: domain_training`` is not set.
    default_domain_training = procedure.JOINT
    #: The training modes a family supports (default: every mode) and, when it
    #: restricts them, why (the start of the one-line error on another mode).
    domain_training_modes = procedure.MODES
    domain_training_reason = None
    #: Set by a family that no plain Transformer equals for a domain: why the exports to
    #: CTranslate2 (``ldr-export ctranslate2``, ``--format ctranslate2``) refuse it.
    ctranslate2_refusal = None
    #: Set by a family whose domain views cannot be mixed: why ensemble labels
    #: (:mod:`ldr_opennmt.ensembles`) are refused. Models without domain-specific
    #: parameters and models whose translation reads no label are refused anyway.
    ensemble_refusal = None
    #: Set by a family whose translation reads the label without any domain-specific
    #: layer (TTM: the label forces a domain token).
    reads_labels_without_domain_layers = False

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        # A family's initialize puts its domain layers in place after super().initialize:
        # what depends on them (region counts, the ensemble refusal) is settled when the
        # outermost initialize returns.
        own = cls.__dict__.get("initialize")
        if own is not None and not getattr(own, "completes_initialization", False):
            cls.initialize = _completes_initialization(own)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # SequenceToSequence hard-codes its examples inputter: replaced by one that adds
        # domain batches, over the same two inputters (same checkpoint layout).
        self.examples_inputter = MultiDomainExamplesInputter(
            self.features_inputter, self.labels_inputter
        )

    @property
    def domains(self):
        """The declared domain names, or ``None`` for models that ignore domains."""
        return self.features_inputter.domains

    @property
    def domain_training(self):
        """The configured training mode (``params: domain_training``, else the default).

        Raises:
          UserError: on an unknown mode, or one the family does not support
            (:attr:`domain_training_modes`).
        """
        mode = self.params.get("domain_training", self.default_domain_training)
        if mode not in procedure.MODES:
            raise UserError(
                "params: domain_training must be one of %s, got %r"
                % (", ".join(procedure.MODES), mode)
            )
        if mode not in self.domain_training_modes:
            raise UserError(
                "%s: params: domain_training must be %s, got %r"
                % (self.domain_training_reason, " or ".join(self.domain_training_modes), mode)
            )
        return mode

    @_completes_initialization
    def initialize(self, data_config, params=None):
        # The package's keys of the two sections a model sees (also under stock onmt-main).
        config_keys.check_section("data", data_config)
        config_keys.check_section("params", params)
        # Tokenization files found beside the configuration that names them (ldr-data's
        # tokenizer.LANG.yml and its bpe.LANG), under any command.
        data_config = config_loader.resolve_tokenization(data_config)
        super().initialize(data_config, params=params)
        if self.domain_training == procedure.SUMMED:  # Fail early on an invalid mode.
            procedure.summed_weights(self.params, self.domains or [], shares=lambda: [])
        if hasattr(self.features_inputter, "truncate_source"):
            self.features_inputter.maximum_source_length = self.maximum_source_length
        if self.params.get("replace_unknown_target"):
            raise UserError(
                "params: replace_unknown_target is not supported by multi-domain models"
            )

    def initialized(self):
        """Runs when the model's outermost ``initialize`` returns, the family's layers in
        place: checks that every domain layer has its region count and records what the
        inputter reads from the complete model (the ensemble refusal).

        Raises:
          UserError: naming a domain layer whose region count is not set (its model's
            ``initialize`` did not call :meth:`set_layer_regions`).
        """
        for layer in self.domain_layers():
            if getattr(layer, "num_regions", 0) is None:
                raise UserError(
                    "%s: the domain layer %s (%s) has no region count: call "
                    "self.set_layer_regions(data_config, num_reserved_regions, owner) in %s."
                    "initialize, after the layer is in place"
                    % (type(self).__name__, layer.name, type(layer).__name__, type(self).__name__)
                )
        domain_inputter = getattr(self.features_inputter, "domain_inputter", None)
        if domain_inputter is not None:
            domain_inputter.ensemble_refusal = self.ensemble_refusal_reason()

    @property
    def maximum_source_length(self):
        """The longest source at inference, in tokens (``params: maximum_source_length``,
        default :data:`ldr_opennmt.inputters.DEFAULT_MAXIMUM_SOURCE_LENGTH`): longer
        sources are truncated, with a warning (see
        :meth:`ldr_opennmt.inputters.MultiDomainInputter.truncate_source`)."""
        return self.params.get("maximum_source_length") or DEFAULT_MAXIMUM_SOURCE_LENGTH

    def ignored_labels_reason(self):
        """Why this model's translation does not depend on the domain label, or ``None``
        (recorded in exports: ``ldr-translate`` warns about labels a model ignores)."""
        name = type(self).__name__
        if self.features_inputter.optional_labels:
            return "%s translates without reading the domain label" % name
        if self.domains is None:
            return "%s declares no domains: every label reads as generic" % name
        if not self.domain_layers() and not self.reads_labels_without_domain_layers:
            return (
                "%s has no domain-specific parameters: every domain label gives the same "
                "translation" % name
            )
        return None

    def ensemble_refusal_reason(self):
        """Why this model translates no ensemble of domain views, or ``None``."""
        name = type(self).__name__
        if self.ensemble_refusal:
            return self.ensemble_refusal
        if self.features_inputter.optional_labels:
            return "%s translates without reading the domain label (no domain views)" % name
        if not self.domain_layers():
            return "%s has no domain-specific parameters: all its domain views are one model" % name
        return None

    def _dynamic_decode(self, features, encoder_outputs, encoder_state, encoder_sequence_length):
        # Beam search of one view per sentence, or, when a sentence asks for a mixture
        # of views, of the ensemble (decided per batch, in graph: one SavedModel serves
        # both; a batch of plain labels pays nothing for the ensemble branch).
        single = super()._dynamic_decode
        weights = features.get(ensembles.WEIGHTS_FEATURE)
        if weights is None or self._skip_decoding:
            return single(features, encoder_outputs, encoder_state, encoder_sequence_length)
        return tf.cond(
            ensembles.is_mixture(weights),
            lambda: ensemble.ensemble_decode(self, features, weights),
            lambda: single(features, encoder_outputs, encoder_state, encoder_sequence_length),
        )

    def auxiliary_losses(self, outputs):
        """Hook: the extra training losses of a family, as ``(mean, weight)`` pairs read
        from the outputs of :meth:`call` (default: none). Evaluation leaves them out."""
        return []

    def compute_loss(self, outputs, labels, training=True):
        # Model.compute_training_loss ignores Keras' add_loss: an extra loss is added
        # here, as ``weight x mean x (the loss normalizer)`` to the numerator, so that the
        # normalized training loss is ``L + weight x mean`` also under gradient
        # accumulation and several replicas.
        loss = super().compute_loss(outputs, labels, training=training)
        if not training or not isinstance(outputs, dict):
            return loss
        for mean, weight in self.auxiliary_losses(outputs):
            if not isinstance(loss, tuple):
                loss = loss + weight * tf.cast(mean, loss.dtype)
                continue
            numerator, normalizer = loss[0], loss[1]
            extra = weight * tf.cast(mean, numerator.dtype) * tf.cast(normalizer, numerator.dtype)
            loss = (numerator + extra,) + tuple(loss[1:])
        return loss

    def regularize_loss(self, loss, variables=None):
        # Domain variables are not regularized: a penalty gradient would move the
        # parameters of domains absent from the batch (see training/optimizer.py).
        specific = {v.ref() for v in self.domain_variables()}
        if variables is None:
            variables = self.trainable_variables
        return super().regularize_loss(
            loss, variables=[v for v in variables if v.ref() not in specific]
        )

    def transfer_weights(self, new_model, new_optimizer=None, optimizer=None, ignore_weights=None):
        if self.domain_variables():
            # OpenNMT-tf remaps only the generic embedding table to the new vocabulary;
            # the per-domain tables would be copied row-misaligned.
            raise UserError(
                "update_vocab is not supported yet for models with domain-specific parameters"
            )
        return super().transfer_weights(
            new_model,
            new_optimizer=new_optimizer,
            optimizer=optimizer,
            ignore_weights=ignore_weights,
        )

    def export(self, export_dir, exporter=None):
        # Only the SavedModel and checkpoint exporters keep the domain input: the
        # CTranslate2 converter would export the generic embedding alone.
        allowed = (exporters.SavedModelExporter, exporters.CheckpointExporter)
        if exporter is not None and not isinstance(exporter, allowed) and self.ctranslate2_refusal:
            raise UserError(
                "%s cannot export %s: %s (export a SavedModel: onmt-main export without "
                "--format, which keeps the domain input)"
                % (type(exporter).__name__, type(self).__name__, self.ctranslate2_refusal)
            )
        if exporter is not None and not isinstance(exporter, allowed) and self.domain_variables():
            raise UserError(
                "%s cannot export a multi-domain model (it would drop the domain-specific "
                "parameters): export a SavedModel, or for CTranslate2 use `ldr-export "
                "ctranslate2` (one folded CTranslate2 model per domain)" % type(exporter).__name__
            )
        # Built under a temporary name and renamed when complete (assets.extra
        # included): an interrupted export leaves no directory that looks complete.
        with assets_lib.export_directory(export_dir) as partial:
            return super().export(partial, exporter=exporter)

    def auto_config(self, num_replicas=1):
        config = super().auto_config(num_replicas=num_replicas)
        return config_util.merge_config(
            config, {"params": {"domain_training": self.default_domain_training}}
        )

    def serve_function(self):
        # OpenNMT-tf's serving function, behind checks that tokens, length and domain
        # have one entry per sentence (a single label would be broadcast) and that each
        # length fits the tokens; an empty batch returns empty outputs (beam search
        # fails on zero sentences with an opaque TensorArray error).
        serve = super().serve_function()
        specs = {}

        def _translate(features):
            outputs = serve.python_function(features)
            specs.update(
                (name, tf.TensorSpec(value.shape, value.dtype)) for name, value in outputs.items()
            )
            return outputs

        def _nothing():
            if not specs:  # tf.cond traced this branch first: trace the model alone.
                specs.update(serve.get_concrete_function().structured_outputs)
            return _empty_outputs(specs)

        # The domain input accepts any rank, checked in graph with a readable message (a
        # [batch, 1] tensor would otherwise fail the signature binding opaquely).
        signature = dict(serve.input_signature[0])
        if "domain" in signature:
            signature["domain"] = tf.TensorSpec(None, signature["domain"].dtype, name="domain")

        @tf.function(input_signature=(signature,))
        def _run(features):
            if "domain" in features:
                features = dict(features, domain=_assert_vector(features["domain"], "domain"))
            features = _assert_same_batch_size(features)
            if "length" in features and "tokens" in features:
                features = _assert_valid_lengths(features)
            batch_size = tf.shape(next(iter(features.values())))[0]
            # tf.cond traces the first branch first, so _nothing() reuses its output specs.
            return tf.cond(batch_size > 0, lambda: _translate(features), _nothing)

        return _run

    def export_assets(self, asset_dir):
        # Tokenizer configurations and their files, plus the declared domain list.
        return assets_lib.export_assets(self, asset_dir)

    def domain_layers(self):
        """The domain-specific layers of the model (see :class:`DomainSpecificLayer`)."""
        return [m for m in self.submodules if isinstance(m, DomainSpecificLayer)]

    def set_layer_regions(self, data_config, num_reserved_regions, owner):
        """Sets the number of regions on every domain layer (call it in ``initialize``).

        For families whose domain layers sit inside the stock encoder and decoder, which
        the model does not initialize (Factorized blocks, residual adapters): the
        declared domains plus :obj:`num_reserved_regions`, or a trained checkpoint's
        ``data: domain_regions``.

        Args:
          data_config: The data configuration.
          num_reserved_regions: Regions kept free for domains added later.
          owner: The model's name, for the error messages.
        """
        _, regions = configured_regions(data_config, num_reserved_regions, owner)
        for layer in self.domain_layers():
            layer.set_num_regions(regions)

    def set_jit_compile(self, enable):
        super().set_jit_compile(enable)
        # XLA needs static shapes: the layers that partition a batch's positions by
        # domain (data-dependent shapes) compute every copy on the whole batch and
        # select per sentence under --jit_compile.
        for layer in self.domain_layers():
            if hasattr(layer, "branch_free"):
                layer.branch_free = bool(enable)

    def domain_regions(self):
        """The number of domain regions, as the layers report it (0 for Mixed).

        Known once the model is initialized (``initialize``), before it is built.
        """
        return max([layer.num_regions for layer in self.domain_layers()], default=0)

    def domain_weights(self):
        """Returns a dict mapping each domain region to its variables (all layers)."""
        regions = {}
        for layer in self.domain_layers():
            for region, variables in layer.domain_weights().items():
                regions.setdefault(region, []).extend(variables)
        return regions

    def domain_variables(self):
        """Returns the list of all domain-specific variables."""
        return [v for variables in self.domain_weights().values() for v in variables]

    def call(self, features, labels=None, training=None, step=None):
        with domain_scope(features["domain"]):
            return super().call(features, labels=labels, training=training, step=step)

    def decoding_scope(self, features):
        domain = features["domain"]
        beam_size = self.params.get("beam_width", 1)
        if beam_size > 1:
            # Same layout as the encoder outputs tiled by the parent class.
            domain = tfa.seq2seq.tile_batch(domain, beam_size)
        return domain_scope(domain)

    def compute_gradients(self, features, labels, optimizer, loss_scale=None, normalize_loss=True):
        mode = self.domain_training
        if not self.__dict__.get("_mode_logged"):
            # Once per model, when the trainer first traces its step (stock onmt-main and
            # ldr-main alike): which mode trains, and whether it is the family's default.
            object.__setattr__(self, "_mode_logged", True)
            configured = "domain_training" in self.params
            tf.get_logger().info(
                "Training mode: params: domain_training: %s (%s)",
                mode,
                (
                    "configured"
                    if configured
                    else "the default of %s; set params: domain_training to change it"
                    % type(self).__name__
                ),
            )
        return procedure.compute_gradients(
            self,
            features,
            labels,
            optimizer,
            mode,
            loss_scale=loss_scale,
            normalize_loss=normalize_loss,
        )

    def get_optimizer(self):
        optimizer = super().get_optimizer()
        if optimizer is None:
            return None
        return optimizer_lib.skip_absent_domains(
            optimizer, self.domain_variables, frozen_variables_fn=self.frozen_variables
        )

    def frozen_variables(self):
        """The variables training never updates: the shared ones in ``domains`` mode
        (the Factorized curriculum's stage 2), none otherwise."""
        if self.domain_training != procedure.DOMAINS:
            return []
        specific = {v.ref() for v in self.domain_variables()}
        return [v for v in self.trainable_weights if v.ref() not in specific]

    def create_variables(self, optimizer=None):
        # OpenNMT-tf builds the model on a placeholder batch labeled "a".
        with self.features_inputter.domain_inputter.any_label_is_generic():
            super().create_variables(optimizer=optimizer)


class MultiDomainTransformer(MultiDomainModel, opennmt.models.Transformer):
    """A Transformer whose source (and optionally target) embedders are domain-aware.

    With plain ``WordEmbedder`` embedders this is the "Mixed" baseline: the domain
    labels are read (and validated when domains are declared) but used by no layer.
    """

    def __init__(
        self,
        source_embedder,
        target_embedder,
        domains_required=True,
        domain_training=None,
        **kwargs
    ):
        """Initializes the model.

        Args:
          source_embedder: The source word embedder (plain, LDR or domain control).
          target_embedder: The target word embedder (plain or LDR).
          domains_required: Whether the data configuration must declare domains.
          domain_training: Default training mode (``params: domain_training``
            overrides it); ``None``: the class's :attr:`default_domain_training`.
          **kwargs: Arguments of ``opennmt.models.Transformer`` (num_layers,
            num_units, num_heads, ffn_inner_dim, dropout, ...).
        """
        super().__init__(
            source_inputter=MultiDomainInputter(source_embedder, domains_required=domains_required),
            target_inputter=target_embedder,
            **kwargs,
        )
        if domain_training is not None:
            self.default_domain_training = domain_training


class MultiDomainRNN(MultiDomainModel, opennmt.models.SequenceToSequence):
    """Attentional RNN (Bahdanau et al., 2015) with domain-aware embedders.

    A bidirectional LSTM encoder (``hidden_size / 2`` cells per direction,
    concatenated) and an LSTM decoder with additive attention, as in the LDR paper.
    """

    def __init__(
        self,
        source_embedder,
        target_embedder,
        num_layers=1,
        hidden_size=1024,
        dropout=0.1,
        domains_required=True,
        domain_training=None,
    ):
        """Initializes the model.

        Args:
          source_embedder: The source word embedder.
          target_embedder: The target word embedder.
          num_layers: Number of layers of the encoder and of the decoder.
          hidden_size: Size of the encoder outputs and of the decoder state.
          dropout: Dropout probability.
          domains_required: Whether the data configuration must declare domains.
          domain_training: Default training mode (``params: domain_training``
            overrides it); ``None``: the class's :attr:`default_domain_training`.
        """
        encoder = bidirectional_lstm_encoder(num_layers, hidden_size, dropout)
        decoder = opennmt.decoders.AttentionalRNNDecoder(
            num_layers=num_layers,
            num_units=hidden_size,
            bridge_class=opennmt.layers.CopyBridge,
            attention_mechanism_class=tfa.seq2seq.BahdanauAttention,
            cell_class=tf.keras.layers.LSTMCell,
            dropout=dropout,
            residual_connections=False,
        )
        super().__init__(
            MultiDomainInputter(source_embedder, domains_required=domains_required),
            target_embedder,
            encoder,
            decoder,
        )
        if domain_training is not None:
            self.default_domain_training = domain_training

    def set_jit_compile(self, enable):
        if enable:
            # Measured with TensorFlow 2.13 on CPU: XLA rejects the OptionalFromValue op
            # that the gradient of the tf.cond inside the decoder's teacher-forcing loop
            # needs. A stock opennmt SequenceToSequence with AttentionalRNNDecoder fails
            # identically; refuse up front instead of failing in the first step.
            raise UserError(
                "--jit_compile is not supported by RNN models: XLA cannot compile the "
                "training loop of OpenNMT-tf 2.32's AttentionalRNNDecoder (stock OpenNMT-tf "
                "RNNs fail the same way); train without --jit_compile or use a Transformer"
            )
        super().set_jit_compile(enable)

    def auto_config(self, num_replicas=1):
        config = super().auto_config(num_replicas=num_replicas)
        # The paper's RNN setting: Adam (0.9, 0.999), learning rate 0.0005, batch 128.
        return config_util.merge_config(
            config,
            {
                "params": {
                    "optimizer": "Adam",
                    "optimizer_params": {"beta_1": 0.9, "beta_2": 0.999},
                    "learning_rate": 0.0005,
                },
                "train": {
                    "batch_size": 128,
                    "batch_type": "examples",
                    "maximum_features_length": 80,
                    "maximum_labels_length": 80,
                },
            },
        )
