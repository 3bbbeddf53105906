"""A new multi-domain method that acts inside every layer: a per-domain output scale.

The idea (not in the package): every feed-forward block of the encoder and the decoder
scales its output by a learned vector of its sentence's domain, ``FFN_d(x) = s_d * FFN(x)``,
``s_d`` starting at 1 (the generic label uses 1). It is the smallest per-domain change that
reaches every layer: ``2 x num_layers x num_units`` parameters per domain.

This file shows the *every-layer* case of ``docs/adding-a-method.md`` (the first example,
``examples/domain_bias``, replaces one layer on a public attribute):

* the stock Transformer's linear layers are reached with
  :func:`ldr_opennmt.layers.replace.dense_slots` (every attention and feed-forward
  projection of a layer stack, in a fixed order) and swapped, before build, with
  :func:`ldr_opennmt.layers.replace_dense`, which keeps the stock ``call``, caches and
  checkpoint paths;
* the new layer is a ``Dense`` whose output is scaled per domain, with its weights from the
  per-domain building block :class:`ldr_opennmt.layers.DomainCopies`;
* because a scaled linear layer is a linear layer for a fixed domain, it defines
  ``fold(domain_id)``, and the model folds into one plain CTranslate2 Transformer per domain
  (``ldr-export ctranslate2``): no ``ctranslate2_refusal``.

It is a user module (``--user_module``, ``user_modules:``) and a model definition
(``onmt-main --model``) at once; it imports only installed packages.
``ldr-main check-family domain_scale_transformer --user_module
examples/domain_scale/domain_scale.py`` checks it.
"""

import opennmt
import tensorflow as tf

from ldr_opennmt import registry, upstream
from ldr_opennmt.layers import DomainCopies, replace_dense
from ldr_opennmt.layers.replace import dense_slots
from ldr_opennmt.models import MultiDomainTransformer, procedure
from ldr_opennmt.models.sequence_to_sequence import transformer_arguments

# The package's patches of onmt-main (one-line errors, training lock, domains.json, ...):
# installed here, on import, because onmt-main copies this file before it builds the model.
upstream.install()


class DomainScaledDense(opennmt.layers.Dense, DomainCopies):
    """A stock projection whose output is multiplied by one vector per domain.

    The scale is a per-domain weight of :class:`~ldr_opennmt.layers.DomainCopies`: one copy
    ``domain_<k>_output_scale`` per region, initialized to 1, and a general copy that is the
    constant 1 (``generic`` leaves the projection as it is).
    """

    def __init__(self, units, **kwargs):
        super().__init__(units, **kwargs)
        self.init_copies()  # The model sets the region count in initialize.

    def build(self, input_shape):
        super().build(input_shape)
        self.add_copies("output_scale", [self.units], "ones", generic_value=1)

    def call(self, inputs):
        outputs = super().call(inputs)
        return outputs * self.per_sentence("output_scale", outputs.shape.rank, outputs.dtype)

    def fold(self, domain_id):
        """The plain ``Dense`` this layer equals for one domain: ``s_d (x W + b) = x (W s_d)
        + b s_d``."""
        scale = self.copy_for("output_scale", domain_id)
        weights = {"kernel": tf.convert_to_tensor(self.kernel) * scale}
        if self.use_bias:
            weights["bias"] = tf.convert_to_tensor(self.bias) * scale
        return weights


class DomainScaleTransformer(MultiDomainTransformer):
    """A Transformer whose feed-forward output projections are :class:`DomainScaledDense`."""

    #: Trained by Procedure 1 unless the configuration says otherwise.
    default_domain_training = procedure.PROCEDURE1

    def __init__(self, num_layers=6, num_units=512, num_heads=8, ffn_inner_dim=2048, dropout=0.1):
        super().__init__(
            opennmt.inputters.WordEmbedder(num_units),
            opennmt.inputters.WordEmbedder(num_units),
            **transformer_arguments(num_layers, num_units, num_heads, ffn_inner_dim, dropout),
        )
        # Every layer of both stacks, before build: the FFN's "outer" projection of each.
        for stack in (self.encoder, self.decoder):
            for parent, attribute in dense_slots(stack):
                if attribute == "outer":
                    replace_dense(parent, attribute, DomainScaledDense, "domain-scale")

    def initialize(self, data_config, params=None):
        super().initialize(data_config, params=params)
        # One region per declared domain (or a trained checkpoint's data: domain_regions).
        self.set_layer_regions(data_config, 0, "the domain-scale Transformer")


@registry.register_family(
    "domain_scale_transformer",
    title="Domain FFN scale",
    paper="examples/domain_scale (the every-layer example of docs/adding-a-method.md)",
    summary="A Transformer whose feed-forward blocks scale their output by a vector per domain.",
)
def domain_scale_transformer(
    num_layers=6, num_units=512, num_heads=8, ffn_inner_dim=2048, dropout=0.1
):
    """The family's builder: the model at the given sizes."""
    return DomainScaleTransformer(num_layers, num_units, num_heads, ffn_inner_dim, dropout)


def model():
    """What ``onmt-main --model`` calls: the demo's small size (2 layers of 64 units)."""
    return domain_scale_transformer(num_layers=2, num_units=64, num_heads=4, ffn_inner_dim=128)
