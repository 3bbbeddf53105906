"""Multitask (ML) and adversarial (AdvL) domain learning (Britz et al., 2017): the model.

Both baselines are a plain Transformer trained on all domains with a sentence-level
domain classifier on its encoder output (Jiang et al., 2020, section 4.1, "MTL" and
"AdvL"; Deng et al., 2020, section 4.1, "ML"):

* **ML** (``adversarial=False``): the classifier and the translator are trained
  jointly, so the encoder learns domain-aware (domain-discriminative) representations.
* **AdvL** (``adversarial=True``): the classifier sits behind a gradient reversal
  (identity forward, gradient times ``-lambda`` backward,
  :class:`~ldr_opennmt.layers.adversarial.GradientReversal`): the classifier learns
  to predict the domain while the encoder learns to make it unable to, i.e.
  domain-invariant representations.

**Classifier** (:class:`~ldr_opennmt.layers.adversarial.DomainClassifierHead`): the
mean of the final encoder output over the real source positions (padding masked),
then one hidden ReLU layer of ``num_units`` cells and a dense layer to one logit per
declared domain. The papers summarised for this project say "a sentence-level domain
classifier" on the encoder's representation and nothing more. Our choices and why:
the mean is the simplest sentence summary that sees every source word and has no
parameter of its own; one hidden layer keeps the head small (the baselines should
differ from the Mixed Transformer by the training signal, not by capacity) while
letting it be non-linear; the head has no dropout (its input already comes from a
regularized encoder, and it is not used at inference). For AdvL the reversal is
applied to the pooled vector, which is the same as reversing the encoder output
(the masked mean is linear), and the head's own weights get the plain gradient.

**Loss**: ``L = L_gen + w L_cls``. ``L_gen`` is OpenNMT-tf's translation
cross-entropy (label smoothing and its normalization included). ``L_cls`` is the
domain cross-entropy (no label smoothing) averaged over the sentences of the batch
that have a domain label; ``generic``-labelled sentences are left out (a batch of
generic sentences only has ``L_cls = 0``). ``w`` is ``classifier_loss_weight``
(1 by default, as the papers give no weight; ``params:
domain_classifier_loss_weight`` overrides it; ``w = 0`` trains a plain Transformer
with an idle classifier). As in the domain-mixing model, ``w L_cls`` is added as
``w L_cls x (the loss normalizer)`` to the loss numerator, so that the normalized
training loss is ``L_gen + w L_cls`` also under gradient accumulation and several
replicas (the mean over labelled sentences is per batch). The evaluation loss (and
its perplexity) is ``L_gen`` alone, comparable with the other systems; evaluation
reports the classifier's accuracy on the labelled sentences as the
``domain_accuracy`` metric (0 when no sentence is labelled).

**The reversal weight** ``lambda`` follows the schedule of gradient reversal's
origin (Ganin and Lempitsky, 2015): ``lambda_p = lambda (2 / (1 + exp(-10 p)) - 1)``,
``p = min(step / N, 1)`` the training progress, ``lambda`` = ``reversal_scale`` (1 by
default; ``params: gradient_reversal_scale`` overrides it) and ``N`` =
``reversal_ramp_steps`` (``params: gradient_reversal_steps`` overrides it; set it to
the run's ``train: max_step``, which the model does not see: 10000 by default). The
weight starts at 0, while the classifier is still random and its reversed gradient is
noise, and reaches ``0.987 lambda`` at ``p = 0.5``. The papers summarised for this
project give no schedule (Jiang et al., 2020, section 4.1, only say that the gradient is
"flipped"), so the schedule of the gradient reversal layer's own publication is the
default; ``N = 0`` keeps ``lambda`` constant from the
first step (the ablation, and what this model did before). The step is the one
OpenNMT-tf passes to ``call`` (the optimizer's ``iterations``); a forward pass without
one (evaluation) uses ``lambda``, which only acts on gradients anyway. ML has no
reversal and ignores both settings.

**How the classifier sees the encoder output**: the stock encoder gets a behaviour
(:func:`ldr_opennmt.layers.behaviours.install_behaviour`) whose ``call`` records its
output and source lengths while the model's forward pass has a collection open
(:func:`collect_encoder_outputs`); the model applies the head to the record after
the stock ``SequenceToSequence.call``. The encoder runs once.

**Labels**: used by ``L_cls`` only, so training needs them (a label file,
``domain:NAME`` or ``ldr-main``'s ``train_corpora``) and nothing else does: the
translation is a plain Transformer that reads no domain, ``infer --features_file
test.en`` works, a label file there is checked against the declared domains and
ignored, and the SavedModel's signature has no ``domain`` input
(:class:`~ldr_opennmt.inputters.MultiDomainInputter` with ``optional_labels``). The
number of classes is the number of declared domains (or a trained checkpoint's
``data: domain_regions``): a domain cannot be added to a trained model.

**Training mode**: joint only (``params: domain_training`` may only say so): the
model has no domain-specific parameter for Procedure 1 or the Factorized curriculum
to route, and a ``generic`` pass would give no classification signal.

**Exports**: SavedModel and checkpoint only; the other exporters (CTranslate2) are
refused in one line, as for the mixing model. The translation part is a plain
Transformer that CTranslate2 could run, but the converter cannot read the
multi-domain source inputter, and a second way to export would be one more path to
keep right; a SavedModel serves the model without labels.

**Embeddings**: the target input and output embeddings are not shared by default,
as in the Mixed Transformer that these baselines extend.
"""

import opennmt
import tensorflow as tf

from ldr_opennmt import domains as domains_lib
from ldr_opennmt import family_table
from ldr_opennmt.layers import adversarial as adversarial_layers
from ldr_opennmt.layers import factorized as factorized_layers
from ldr_opennmt.layers.behaviours import Behaviour, install_behaviour
from ldr_opennmt.layers.context import Recorder, configured_regions
from ldr_opennmt.models import procedure
from ldr_opennmt.models.sequence_to_sequence import (
    MultiDomainTransformer,
    word_transformer_arguments,
)

#: ``params`` key overriding the model's ``classifier_loss_weight``.
WEIGHT_PARAM = "domain_classifier_loss_weight"

#: ``params`` key overriding the model's ``reversal_ramp_steps`` (AdvL).
RAMP_PARAM = "gradient_reversal_steps"

#: ``params`` key overriding the model's ``reversal_scale`` (AdvL's final ``lambda``).
SCALE_PARAM = "gradient_reversal_scale"

#: The default number of steps of the reversal weight's ramp (AdvL).
DEFAULT_RAMP_STEPS = 10000

#: The evaluation metric: the classifier's accuracy on the labelled sentences.
ACCURACY_METRIC = "domain_accuracy"

#: The encoder outputs of a forward pass (see :func:`collect_encoder_outputs`).
_ENCODER_OUTPUTS = Recorder()


def collect_encoder_outputs():
    """Records ``(outputs, sequence_length)`` of every recording encoder called while
    it is open (in call order; traced tensors inside ``tf.function``)."""
    return _ENCODER_OUTPUTS.collect()


class _RecordingEncoder(Behaviour):
    """Encoder behaviour: records the encoder output for :func:`collect_encoder_outputs`."""

    applies_to = (opennmt.encoders.SelfAttentionEncoder,)

    def call(self, inputs, sequence_length=None, training=None):
        outputs, state, length = super().call(
            inputs, sequence_length=sequence_length, training=training
        )
        _ENCODER_OUTPUTS.record((outputs, length))
        return outputs, state, length


class DomainClassifierTransformer(MultiDomainTransformer):
    """A Transformer trained with a domain classifier on its encoder output (ML/AdvL)."""

    domain_training_modes = (procedure.JOINT,)

    #: Why ``ldr-export ctranslate2`` refuses the model.
    ctranslate2_refusal = (
        "the ML/AdvL exports are SavedModels only (the source inputter carries the "
        "classifier's domain labels); the SavedModel translates without labels"
    )

    def __init__(
        self,
        adversarial=False,
        num_layers=6,
        num_units=512,
        num_heads=8,
        ffn_inner_dim=2048,
        dropout=0.1,
        classifier_loss_weight=1.0,
        reversal_scale=1.0,
        reversal_ramp_steps=DEFAULT_RAMP_STEPS,
        classifier_hidden_units=None,
        share_target_embeddings=False,
    ):
        """Initializes the model.

        Args:
          adversarial: ``False`` for multitask learning (ML), ``True`` for adversarial
            learning (AdvL, the classifier behind a gradient reversal).
          num_layers: Number of encoder and decoder layers.
          num_units: Model size.
          num_heads: Number of attention heads.
          ffn_inner_dim: FFN inner size.
          dropout: Dropout, attention dropout and FFN dropout.
          classifier_loss_weight: ``w`` in ``L_gen + w L_cls``, ``>= 0`` (``params:
            domain_classifier_loss_weight`` overrides it).
          reversal_scale: ``lambda`` of the gradient reversal (AdvL only), ``>= 0``: the
            weight the ramp reaches (``params: gradient_reversal_scale`` overrides it).
          reversal_ramp_steps: ``N``, the training steps of the ramp of ``lambda`` from
            0 (AdvL only), an integer ``>= 0``; 0 keeps ``lambda`` constant (``params:
            gradient_reversal_steps`` overrides it).
          classifier_hidden_units: Size of the classifier's hidden layer (default:
            :obj:`num_units`).
          share_target_embeddings: Tie the target input and output embeddings.

        Raises:
          UserError: on a negative weight or scale, or ramp steps that are not an
            integer ``>= 0``.
        """
        weight = adversarial_layers.validate_non_negative(
            classifier_loss_weight, "classifier_loss_weight"
        )
        scale = adversarial_layers.validate_non_negative(reversal_scale, "reversal_scale")
        ramp_steps = adversarial_layers.validate_ramp_steps(
            reversal_ramp_steps, "reversal_ramp_steps"
        )
        super().__init__(
            domain_training=procedure.JOINT,
            **word_transformer_arguments(
                num_layers, num_units, num_heads, ffn_inner_dim, dropout, share_target_embeddings
            ),
        )
        # Labels: required for training (L_cls), optional elsewhere.
        self.features_inputter.optional_labels = True
        self.adversarial = bool(adversarial)
        self._default_weight = weight
        self._default_ramp_steps = ramp_steps
        self._default_scale = scale
        self.domain_classifier = adversarial_layers.DomainClassifierHead(
            classifier_hidden_units or num_units,
            reversal_scale=scale if self.adversarial else None,
            reversal_ramp_steps=ramp_steps,
            name="domain_classifier",
        )
        install_behaviour(self.encoder, _RecordingEncoder)

    @property
    def system_name(self):
        """``"AdvL"`` or ``"ML"`` (for messages)."""
        return "AdvL" if self.adversarial else "ML"

    @property
    def domain_training_reason(self):
        return (
            "the %s Transformer trains jointly (L = L_gen + w L_cls, no domain-specific "
            "parameter)" % self.system_name
        )

    @property
    def classifier_loss_weight(self):
        """``w``: ``params: domain_classifier_loss_weight``, or the model's argument.

        Raises:
          UserError: if the parameter is not a number ``>= 0``.
        """
        value = self.params.get(WEIGHT_PARAM)
        if value is None:
            return self._default_weight
        return adversarial_layers.validate_non_negative(value, "params: " + WEIGHT_PARAM)

    @property
    def reversal_ramp_steps(self):
        """``N``: ``params: gradient_reversal_steps``, or the model's argument.

        Raises:
          UserError: if the parameter is not an integer ``>= 0``.
        """
        value = self.params.get(RAMP_PARAM)
        if value is None:
            return self._default_ramp_steps
        return adversarial_layers.validate_ramp_steps(value, "params: " + RAMP_PARAM)

    @property
    def reversal_scale(self):
        """``lambda``: ``params: gradient_reversal_scale``, or the model's argument (``None``
        for ML, which has no reversal).

        Raises:
          UserError: if the parameter is not a number ``>= 0``.
        """
        value = self.params.get(SCALE_PARAM)
        if value is not None:
            value = adversarial_layers.validate_non_negative(value, "params: " + SCALE_PARAM)
        if not self.adversarial:
            return None
        return self._default_scale if value is None else value

    def reversal_weight(self, step=None):
        """``lambda`` at :obj:`step` (AdvL; ``None`` for ML, which has no reversal)."""
        if self.domain_classifier.reversal is None:
            return None
        return self.domain_classifier.reversal.weight(step)

    @property
    def num_domains(self):
        """The number of classes (known once initialized)."""
        return self.domain_classifier.num_domains

    def initialize(self, data_config, params=None):
        super().initialize(data_config, params=params)
        _ = self.classifier_loss_weight  # Fail early on an invalid weight.
        ramp_steps = self.reversal_ramp_steps  # And on invalid ramp steps.
        scale = self.reversal_scale  # And on an invalid scale.
        if self.domain_classifier.reversal is not None:
            self.domain_classifier.reversal.set_ramp_steps(ramp_steps)
            self.domain_classifier.reversal.scale = scale
        _, num_domains = configured_regions(data_config, 0, "the %s Transformer" % self.system_name)
        self.domain_classifier.set_num_domains(num_domains)

    def call(self, features, labels=None, training=None, step=None):
        if labels is None:  # Inference: a plain Transformer.
            return super().call(features, labels=labels, training=training, step=step)
        with collect_encoder_outputs() as records:
            outputs, predictions = super().call(
                features, labels=labels, training=training, step=step
            )
        if len(records) != 1:
            raise RuntimeError("expected one encoder output, got %d" % len(records))
        memory, memory_length = records[0]
        logits = self.domain_classifier(memory, memory_length, step=step, training=training)
        total, count = adversarial_layers.classification_loss(logits, features["domain"])
        outputs = dict(outputs)
        outputs["domain_logits"] = logits
        outputs["classification_loss"] = tf.math.divide_no_nan(total, count)
        return outputs, predictions

    def auxiliary_losses(self, outputs):
        if "classification_loss" not in outputs:
            return []
        return [(outputs["classification_loss"], self.classifier_loss_weight)]

    def evaluate(self, features, labels):
        outputs, predictions = self(features, labels=labels)
        loss = self.compute_loss(outputs, labels, training=False)
        # For the accuracy metric (update_metrics only sees predictions and labels).
        predictions = dict(predictions)
        predictions["predicted_domain"] = tf.argmax(
            outputs["domain_logits"], axis=-1, output_type=tf.int32
        )
        predictions["domain"] = features["domain"]
        return loss, predictions

    def get_metrics(self):
        return {ACCURACY_METRIC: tf.keras.metrics.Accuracy()}

    def update_metrics(self, metrics, predictions, labels):
        domain = predictions["domain"]
        metrics[ACCURACY_METRIC].update_state(
            domain,
            predictions["predicted_domain"],
            sample_weight=tf.not_equal(domain, domains_lib.GENERIC_ID),
        )


def ml_transformer(
    num_layers=6,
    num_units=512,
    num_heads=8,
    ffn_inner_dim=2048,
    dropout=0.1,
    classifier_loss_weight=1.0,
    **kwargs
):
    """Multitask learning (Britz et al., 2017): a Transformer trained jointly with a
    domain classifier on its mean-pooled encoder output (``L_gen + w L_cls``). Other
    options are :class:`DomainClassifierTransformer`'s arguments."""
    return DomainClassifierTransformer(
        adversarial=False,
        num_layers=num_layers,
        num_units=num_units,
        num_heads=num_heads,
        ffn_inner_dim=ffn_inner_dim,
        dropout=dropout,
        classifier_loss_weight=classifier_loss_weight,
        **kwargs,
    )


def advl_transformer(
    num_layers=6,
    num_units=512,
    num_heads=8,
    ffn_inner_dim=2048,
    dropout=0.1,
    classifier_loss_weight=1.0,
    reversal_scale=1.0,
    reversal_ramp_steps=DEFAULT_RAMP_STEPS,
    **kwargs
):
    """Adversarial learning (Britz et al., 2017): as :func:`ml_transformer` with the
    classifier behind a gradient reversal, so that the encoder learns domain-invariant
    representations. Its weight ramps from 0 to ``lambda`` (:obj:`reversal_scale`) over
    :obj:`reversal_ramp_steps` training steps (Ganin and Lempitsky's schedule; ``params:
    gradient_reversal_steps`` overrides the number, 0 keeps ``lambda`` constant)."""
    return DomainClassifierTransformer(
        adversarial=True,
        num_layers=num_layers,
        num_units=num_units,
        num_heads=num_heads,
        ffn_inner_dim=ffn_inner_dim,
        dropout=dropout,
        classifier_loss_weight=classifier_loss_weight,
        reversal_scale=reversal_scale,
        reversal_ramp_steps=reversal_ramp_steps,
        **kwargs,
    )


BRITZ_PAPER = "Britz et al., 2017 (WMT): effective domain mixing"


def _classifier_count(**sizes):
    # The classifier head (d x d hidden layer, d x domains logits), unused at inference.
    d_model = sizes["d_model"]
    return (
        factorized_layers.parameter_count("vanilla", **sizes)
        + d_model * d_model
        + d_model * sizes["num_domains"]
    )


ML_TRANSFORMER = family_table.Family(
    name="ml_transformer",
    builder=ml_transformer,
    title="ML",
    paper=BRITZ_PAPER,
    summary="Multitask learning: a domain classifier on the encoder output.",
    parameter_count=family_table.sizes_only(_classifier_count),
    benchmark={"ml": {}},
)


ADVL_TRANSFORMER = family_table.Family(
    name="advl_transformer",
    builder=advl_transformer,
    title="AdvL",
    paper=BRITZ_PAPER,
    summary="Adversarial learning: the domain classifier behind a gradient reversal.",
    parameter_count=family_table.sizes_only(_classifier_count),
    benchmark={"advl": {}},
)
