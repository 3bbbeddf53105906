"""Residual adapters (Bapna and Firat, 2019) on a frozen Transformer: the model.

A :class:`ResidualAdapterTransformer` is a plain Transformer (the Mixed baseline's
architecture, same sizes and embedding sharing) with a per-domain
:class:`~ldr_opennmt.layers.adapters.ResidualAdapter` after every encoder and decoder
layer (:func:`ldr_opennmt.layers.adapters.install`). The ``generic`` label means no
adapter: the model then translates exactly as its base.

**Training** (``ldr-main``): on top of a converged Mixed model, whose parameters stay
frozen, each domain's adapters on that domain's data::

    model_dir: runs/adapters
    finetune:
      base: runs/mixed        # a Mixed model of the same size
      steps: 2000

The Runner restores the base (weights and optimizer state) into ``model_dir``, checks
that the base provides every parameter of the model except the adapters (a base of
another size or architecture is refused in one line), and trains with
``domain_training: domains`` (the only mode): gradients for the adapters only, the
base's parameters frozen by the optimizer (their update is skipped, so a restored Adam
state or weight decay cannot move them: bit-identical), and the adapters of a domain
absent from a step not updated. With ``data: train_corpora`` each batch comes from one
domain.

Under stock ``onmt-main``: ``train --checkpoint_path BASE --continue_from_checkpoint``
does the same restore (without the checks). A training that starts at step 0 (no base
restored: every frozen parameter would stay random) is refused in one line.
"""

import tensorflow as tf

from ldr_opennmt import family_table
from ldr_opennmt.errors import UserError
from ldr_opennmt.layers import adapters
from ldr_opennmt.layers import factorized as factorized_layers
from ldr_opennmt.models import procedure
from ldr_opennmt.models.sequence_to_sequence import (
    MultiDomainTransformer,
    word_transformer_arguments,
)


class ResidualAdapterTransformer(MultiDomainTransformer):
    """A Transformer with per-domain residual adapters after every layer."""

    #: The model's training needs a trained base (see :meth:`compute_gradients`).
    requires_base = True
    domain_training_modes = (procedure.DOMAINS,)
    domain_training_reason = "residual adapters train on a frozen base model"
    #: Why ``ldr-export ctranslate2`` refuses the model.
    ctranslate2_refusal = (
        "residual adapters are not linear (a layer norm and a ReLU inside a residual block), "
        "so no plain Transformer equals the model for a domain: export a SavedModel"
    )

    def __init__(
        self,
        num_layers=6,
        num_units=512,
        num_heads=8,
        ffn_inner_dim=2048,
        dropout=0.1,
        adapter_dim=2048,
        share_target_embeddings=False,
        num_reserved_regions=0,
    ):
        """Initializes the model.

        Args:
          num_layers: Number of encoder and decoder layers (the base's).
          num_units: Model size (the base's).
          num_heads: Number of attention heads (the base's).
          ffn_inner_dim: FFN inner size (the base's).
          dropout: Dropout, attention dropout and FFN dropout of the base's layers.
          adapter_dim: The adapters' inner (bottleneck) size.
          share_target_embeddings: Tie the target input and output embeddings (as the
            base does).
          num_reserved_regions: Adapter regions kept free for domains added later.

        Raises:
          UserError: on a non-positive :obj:`adapter_dim` or a negative reserved count.
        """
        adapters.validate_inner_dim(adapter_dim)
        if num_reserved_regions < 0:
            raise UserError("num_reserved_regions must be >= 0, got %d" % num_reserved_regions)
        super().__init__(
            domain_training=procedure.DOMAINS,
            **word_transformer_arguments(
                num_layers, num_units, num_heads, ffn_inner_dim, dropout, share_target_embeddings
            ),
        )
        self.adapter_dim = adapter_dim
        self.num_reserved_regions = num_reserved_regions
        for stack in (self.encoder, self.decoder):
            adapters.install(stack, adapter_dim)

    def initialize(self, data_config, params=None):
        super().initialize(data_config, params=params)
        self.set_layer_regions(
            data_config, self.num_reserved_regions, "the residual-adapter Transformer"
        )

    def compute_gradients(self, features, labels, optimizer, loss_scale=None, normalize_loss=True):
        # Read when the step is traced (after the checkpoint is restored): a run that
        # starts at step 0 restored no base, and would train adapters on random weights.
        with tf.init_scope():
            step = int(optimizer.iterations.numpy())
        if step == 0:
            raise UserError(
                "residual adapters train on top of a trained base model, but this run starts "
                "at step 0: use ldr-main with finetune: {base: BASE_MODEL_DIR, steps: N} (or "
                "onmt-main train --checkpoint_path BASE --continue_from_checkpoint)"
            )
        return super().compute_gradients(
            features, labels, optimizer, loss_scale=loss_scale, normalize_loss=normalize_loss
        )


ADAPTERS_PAPER = "Bapna and Firat, 2019 (EMNLP): simple, scalable adaptation"


def residual_adapter_transformer(**kwargs):
    """Residual adapters (Bapna and Firat, 2019): a per-domain bottleneck block after every
    layer of a Transformer whose other parameters are a frozen, trained Mixed model
    (``finetune: base``). The sizes (the base's) and ``adapter_dim`` (2048 by default, the
    Factorized paper's comparison) are
    :class:`~ldr_opennmt.models.adapters.ResidualAdapterTransformer`'s arguments."""
    return ResidualAdapterTransformer(**kwargs)


def _adapters_count(adapter_dim=2048, **sizes):
    layers = sizes["encoder_layers"] + sizes["decoder_layers"]
    return factorized_layers.parameter_count("vanilla", **sizes) + adapters.parameter_count(
        sizes["d_model"], adapter_dim, layers, sizes["num_domains"]
    )


def _adapter_rows(size):
    # Adapters 4x the model size (2048 for 512 units); trained alone, the base frozen.
    return {"adapter_dim": 4 * size["num_units"], "domain_training": "domains"}


RESIDUAL_ADAPTERS = family_table.Family(
    name="residual_adapters",
    builder=residual_adapter_transformer,
    title="Residual adapters",
    paper=ADAPTERS_PAPER,
    summary="A per-domain bottleneck block after every layer of a frozen Mixed model.",
    tiny={"adapter_dim": 8},
    stage1="mixed_transformer",
    finetune="base",
    parameter_count=_adapters_count,
    presets=dict(family_table.TIED, paper={"adapter_dim": 2048}, small={"adapter_dim": 256}),
    benchmark={"adapters": _adapter_rows},
)
