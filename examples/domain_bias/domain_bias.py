"""A new multi-domain method in one file: a per-domain output bias.

The idea (not in the package): a Transformer trained on all domains, whose output layer
adds one learned bias vector per domain to the logits. It is the cheapest way to let each
domain prefer its own words (one vocabulary-sized vector per domain), and the ``generic``
label adds no bias, so the model stays a Mixed model for text of unknown domain.

This file is all there is to the method. It is, at the same time:

* **a user module**: importing it registers the family ``domain_bias_transformer``
  (``ldr-main --list-families --user_module examples/domain_bias/domain_bias.py``);
* **a model definition**: ``onmt-main --model examples/domain_bias/domain_bias.py``
  calls :func:`model` (``onmt-main`` copies the file into the model directory, so it
  imports only installed packages).

What the package gives it without any change (see ``docs/adding-a-method.md``): the
domain of each sentence through :func:`ldr_opennmt.layers.domain_one_hot` in training,
evaluation, beam search and the SavedModel; Procedure 1 and the other training modes
(the variables made by ``add_domain_weight`` are its domain-specific parameters);
``ldr-main``, ``ldr-eval``, ``ldr-translate``, the exports and the checks of checkpoints.
CTranslate2 folding is refused in one line (:attr:`DomainBiasTransformer.ctranslate2_refusal`):
the fold covers the attention and feed-forward projections and the embedders, not the
output layer's bias.
"""

import opennmt
import tensorflow as tf

from ldr_opennmt import registry
from ldr_opennmt.layers import DomainSpecificLayer, domain_one_hot
from ldr_opennmt.models import MultiDomainTransformer
from ldr_opennmt.models.sequence_to_sequence import transformer_arguments


class DomainBiasDense(opennmt.layers.Dense, DomainSpecificLayer):
    """The output layer: a plain (shared) projection plus one bias vector per domain."""

    def __init__(self, units, **kwargs):
        super().__init__(units, **kwargs)
        self.num_regions = None

    def set_num_regions(self, num_regions):
        """Called by the model before build: one region per declared domain."""
        self.num_regions = num_regions

    def build(self, input_shape):
        super().build(input_shape)
        if self.num_regions is None:
            raise ValueError("%s: set_num_regions() must be called before build" % self.name)
        # One vector per domain region, starting at zero (the generic output).
        self.domain_biases = [
            self.add_domain_weight(k, "output_bias", [self.units], initializer="zeros")
            for k in range(self.num_regions)
        ]

    def call(self, inputs):
        logits = super().call(inputs)
        # [batch, 1, ..., num_regions]: the current sentences' domains, all zero for
        # generic; beam search and the SavedModel bind the same scope.
        one_hot = domain_one_hot(self.num_regions, logits.dtype, rank=logits.shape.rank)
        biases = tf.cast(tf.stack(self.domain_biases, axis=0), logits.dtype)
        return logits + tf.tensordot(one_hot, biases, axes=1)


class DomainBiasTransformer(MultiDomainTransformer):
    """A Transformer whose output layer is a :class:`DomainBiasDense`."""

    ctranslate2_refusal = (
        "its per-domain output bias is outside the projections and embedders that the fold "
        "covers (serve the SavedModel)"
    )

    def __init__(self, num_layers=6, num_units=512, num_heads=8, ffn_inner_dim=2048, dropout=0.1):
        super().__init__(
            opennmt.inputters.WordEmbedder(num_units),
            opennmt.inputters.WordEmbedder(num_units),
            **transformer_arguments(num_layers, num_units, num_heads, ffn_inner_dim, dropout),
        )

    def initialize(self, data_config, params=None):
        super().initialize(data_config, params=params)
        # The stock decoder made a plain Dense of the target vocabulary size: replace it
        # before the model is built (the checkpoint keeps the name output_layer).
        plain = self.decoder.output_layer
        self.decoder.output_layer = DomainBiasDense(plain.units, use_bias=plain.use_bias)
        # One region per declared domain (or a trained checkpoint's data: domain_regions).
        self.set_layer_regions(data_config, 0, "the domain-bias Transformer")


def _parameter_count(vocab_size=50000, d_model=512, num_domains=5, adapter_dim=None, **sizes):
    """The Factorized paper's #P convention: the vanilla count plus a bias per domain."""
    from ldr_opennmt.layers import factorized  # The vanilla count's one home.

    vanilla = factorized.parameter_count(
        "vanilla", vocab_size=vocab_size, d_model=d_model, num_domains=num_domains, **sizes
    )
    return vanilla + num_domains * vocab_size


@registry.register_family(
    "domain_bias_transformer",
    title="Domain output bias",
    paper="examples/domain_bias (the worked example of docs/adding-a-method.md)",
    summary="A Transformer whose output layer adds one learned bias vector per domain.",
    parameter_count=_parameter_count,
    benchmark={"domain_bias": {}},
)
def domain_bias_transformer(
    num_layers=6, num_units=512, num_heads=8, ffn_inner_dim=2048, dropout=0.1
):
    """The family's builder: the model at the given sizes."""
    return DomainBiasTransformer(num_layers, num_units, num_heads, ffn_inner_dim, dropout)


def model():
    """What ``onmt-main --model`` calls: the demo's small size (2 layers of 64 units)."""
    return domain_bias_transformer(num_layers=2, num_units=64, num_heads=4, ffn_inner_dim=128)
