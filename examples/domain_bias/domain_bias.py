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
per-domain weight block (:class:`ldr_opennmt.layers.DomainCopies`), the domain of each
sentence from the domain scope in training,
evaluation, beam search and the SavedModel; Procedure 1 and the other training modes
(the ``domain_<k>_*`` variables of the block are its domain-specific parameters);
``ldr-main``, ``ldr-eval``, ``ldr-translate``, the exports and the checks of checkpoints.
CTranslate2 folding is refused in one line (:attr:`DomainBiasTransformer.ctranslate2_refusal`):
the fold covers the attention and feed-forward projections and the embedders, not the
output layer's bias.
"""

import opennmt

from ldr_opennmt import registry, upstream
from ldr_opennmt.layers import DomainCopies
from ldr_opennmt.models import MultiDomainTransformer, procedure
from ldr_opennmt.models.sequence_to_sequence import transformer_arguments

# The package's patches of onmt-main (one-line errors, training lock, domains.json, ...):
# installed here, on import, because onmt-main copies this file before it builds the model.
upstream.install()


class DomainBiasDense(opennmt.layers.Dense, DomainCopies):
    """The output layer: a plain (shared) projection plus one bias vector per domain.

    The per-domain bias is a weight of the package's per-domain building block
    (:class:`ldr_opennmt.layers.DomainCopies`): one copy ``domain_<k>_output_bias`` per
    domain region, and a general copy that is the constant 0, so that ``generic`` adds
    nothing and each region starts at zero.
    """

    def __init__(self, units, **kwargs):
        super().__init__(units, **kwargs)
        self.init_copies()  # The model sets the region count before build.

    def build(self, input_shape):
        super().build(input_shape)
        self.add_copies("output_bias", [self.units], "zeros", generic_value=0)

    def call(self, inputs):
        logits = super().call(inputs)
        # Each sentence's copy ([batch, 1, ..., units]), from the domain scope that the
        # model binds in training, evaluation, beam search and the SavedModel.
        return logits + self.per_sentence("output_bias", logits.shape.rank, logits.dtype)


class DomainBiasTransformer(MultiDomainTransformer):
    """A Transformer whose output layer is a :class:`DomainBiasDense`."""

    #: Trained by Procedure 1 unless the configuration says otherwise.
    default_domain_training = procedure.PROCEDURE1
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


#: Its row of the experiments' benchmark (``ldr-experiments bench --user_module FILE``): read
#: by ``ldr_experiments/systems.py``; without it the family gets one row named after it.
BENCHMARK_ROWS = {"domain_bias_transformer": {"domain_bias": {}}}


@registry.register_family(
    "domain_bias_transformer",
    title="Domain output bias",
    paper="examples/domain_bias (the worked example of docs/adding-a-method.md)",
    summary="A Transformer whose output layer adds one learned bias vector per domain.",
    parameter_count=_parameter_count,
)
def domain_bias_transformer(
    num_layers=6, num_units=512, num_heads=8, ffn_inner_dim=2048, dropout=0.1
):
    """The family's builder: the model at the given sizes."""
    return DomainBiasTransformer(num_layers, num_units, num_heads, ffn_inner_dim, dropout)


def model():
    """What ``onmt-main --model`` calls: the demo's small size (2 layers of 64 units)."""
    return domain_bias_transformer(num_layers=2, num_units=64, num_heads=4, ffn_inner_dim=128)
