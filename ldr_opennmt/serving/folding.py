"""Folding a multi-domain Transformer into one plain Transformer per domain.

For a fixed domain, every domain-aware input layer of the catalog is a linear
function of the word, i.e. a plain embedding table:

* LDR (eq. 2 of the paper): ``e_k(v) = M_g e_g(v) + M_k e_k(v) + b``, the table
  :meth:`~ldr_opennmt.layers.LDREmbedder.fused_table` (generic: without ``M_k e_k``);
* domain control: ``[e(v); d_k]``, the word table with the domain vector appended
  to every row (generic: a zero vector),
  :meth:`~ldr_opennmt.layers.DomainControlEmbedder.fused_table`;
* a plain :class:`opennmt.inputters.WordEmbedder` (Mixed, the target side of most
  systems): its own table.

:func:`fold` builds an ``opennmt.models.Transformer`` with the same sizes and
vocabularies, plain word embedders on both sides, the encoder and decoder weights
copied and the folded tables as embeddings: for that domain it computes what the
multi-domain model computes, and it is the kind of model that OpenNMT-tf and
CTranslate2 know (see :mod:`ldr_opennmt.serving.ct2_export`). Folded models are
for inference: their embedders have no dropout.

Anything that cannot be folded exactly is refused with a
:class:`~ldr_opennmt.UserError`: RNN models (CTranslate2 3.x converts
no OpenNMT-tf RNN), domain-specific layers other than the embedders, weights
outside the embedders, encoder and decoder.
"""

import functools

import opennmt
import tensorflow as tf
from opennmt.utils import misc

from ldr_opennmt import domains as domains_lib
from ldr_opennmt.errors import UserError
from ldr_opennmt.inputters import MultiDomainInputter
from ldr_opennmt.layers.context import DomainSpecificLayer
from ldr_opennmt.models.sequence_to_sequence import MultiDomainModel


def check_foldable(model):
    """Checks that :obj:`model` is a multi-domain Transformer that folds exactly.

    Args:
      model: A built multi-domain model.

    Raises:
      UserError: if the model is not a multi-domain Transformer, or has
        parameters that the fold would drop.
    """
    name = type(model).__name__
    if not isinstance(model, MultiDomainModel):
        raise UserError(
            "%s is not a multi-domain translation model: export it with "
            "onmt-main export --format ctranslate2" % name
        )
    refusal = getattr(model, "ctranslate2_refusal", None)
    if refusal:  # A family that says why no plain model equals it.
        raise UserError("%s cannot be exported to CTranslate2: %s" % (name, refusal))
    if not isinstance(model, opennmt.models.Transformer):
        raise UserError(
            "%s cannot be exported to CTranslate2: CTranslate2 3.x converts only OpenNMT-tf "
            "Transformer models (export a SavedModel instead)" % name
        )
    if not isinstance(model.features_inputter, MultiDomainInputter) or not isinstance(
        model.encoder, opennmt.encoders.SelfAttentionEncoder
    ):
        raise UserError("%s: only single-source Transformers can be folded" % name)
    if not model.built:
        raise ValueError("the model must be built (create_variables() or a restored checkpoint)")
    embedders = (source_embedder(model), model.labels_inputter)
    for layer in model.submodules:
        if isinstance(layer, DomainSpecificLayer) and all(layer is not e for e in embedders):
            raise UserError(
                "%s has domain-specific parameters in %s, which cannot be folded into "
                "embeddings" % (name, layer.name)
            )
    covered = {
        weight.ref()
        for layer in embedders + (model.encoder, model.decoder)
        for weight in layer.weights
    }
    missing = [weight.name for weight in model.weights if weight.ref() not in covered]
    if missing:
        raise UserError(
            "%s has weights outside its embedders, encoder and decoder (%s): the fold would "
            "drop them" % (name, ", ".join(missing))
        )


def source_embedder(model):
    """The word embedder of a multi-domain model's source inputter."""
    return model.features_inputter.word_inputter


def domain_id(model, domain):
    """The id of :obj:`domain` in the model's declared domains.

    Args:
      model: A multi-domain model.
      domain: A declared domain name, or ``generic``.

    Returns:
      The domain id (``GENERIC_ID`` for ``generic``).

    Raises:
      UserError: if the name is neither declared nor ``generic``.
    """
    if domain == domains_lib.GENERIC:
        return domains_lib.GENERIC_ID
    declared = list(model.domains or [])
    if domain not in declared:
        raise UserError(
            "unknown domain %r (declared: %s)"
            % (domain, ", ".join(declared + [domains_lib.GENERIC]))
        )
    return declared.index(domain)


def export_domains(model):
    """The domains to export by default: every declared domain, then ``generic``."""
    return list(model.domains or []) + [domains_lib.GENERIC]


def folded_embedding(embedder, domain):
    """The embedding table ``[V, D]`` that :obj:`embedder` computes for one domain.

    Row ``v`` is the embedder's output for word ``v`` (without dropout).

    Args:
      embedder: A built LDR, domain control or plain word embedder.
      domain: A domain id, or ``GENERIC_ID``.

    Returns:
      A float tensor of shape ``[vocabulary_size, output size]``.

    Raises:
      UserError: for a domain-aware embedder that has no fold.
    """
    if isinstance(embedder, DomainSpecificLayer):
        return embedder.fold(domain)["embedding"]  # Each layer defines its own fold.
    if not isinstance(embedder, opennmt.inputters.WordEmbedder):
        raise UserError(
            "no fold is defined for %s: it cannot be exported to CTranslate2"
            % type(embedder).__name__
        )
    return tf.convert_to_tensor(embedder.embedding)


def transformer_arguments(model):
    """The ``opennmt.models.Transformer`` arguments that rebuild the model's encoder
    and decoder (read from the built layers)."""
    encoder, decoder = model.encoder, model.decoder
    attention = encoder.layers[0].self_attention.layer
    ffn = encoder.layers[0].ffn.layer
    share = opennmt.models.EmbeddingsSharingLevel
    return dict(
        num_layers=(len(encoder.layers), len(decoder.layers)),
        num_units=encoder.num_units,
        num_heads=attention.num_heads,
        ffn_inner_dim=ffn.inner.units,
        dropout=encoder.dropout,
        attention_dropout=attention.dropout,
        ffn_dropout=ffn.dropout,
        ffn_activation=ffn.inner.activation,
        mha_bias=attention.linear_queries.use_bias,
        position_encoder_class=_position_encoder_class(encoder.position_encoder),
        maximum_relative_position=attention.maximum_relative_position,
        attention_reduction=decoder.attention_reduction,
        pre_norm=encoder.layer_norm is not None,
        output_layer_bias=decoder.output_layer_bias,
        # Multi-domain source inputters never share their table with the target.
        share_embeddings=(
            share.TARGET if share.share_target_embeddings(model.share_embeddings) else share.NONE
        ),
    )


def _position_encoder_class(position_encoder):
    if position_encoder is None:
        return None
    kwargs = {"reducer": position_encoder.reducer}
    if isinstance(position_encoder, opennmt.layers.PositionEmbedder):
        kwargs["maximum_position"] = position_encoder.maximum_position
    return functools.partial(type(position_encoder), **kwargs)


def _plain_embedder(embedder):
    """A plain word embedder of the size of :obj:`embedder`'s output, for inference."""
    size = int(folded_embedding(embedder, domains_lib.GENERIC_ID).shape[-1])
    return opennmt.inputters.WordEmbedder(
        embedding_size=size, num_oov_buckets=embedder.num_oov_buckets
    )


def _data_config(source, target):
    config = {
        "source_vocabulary": source.vocabulary_file,
        "target_vocabulary": target.vocabulary_file,
    }
    if source.mark_start or source.mark_end:
        config["source_sequence_controls"] = {
            "start": bool(source.mark_start),
            "end": bool(source.mark_end),
        }
    return config


def _copy_weights(source_layer, target_layer, what):
    """Copies the weights of a layer into its twin, paired by checkpoint name."""
    source = misc.get_variables_name_mapping(source_layer, what)
    target = misc.get_variables_name_mapping(target_layer, what)
    mismatch = sorted(
        name
        for name in set(source) | set(target)
        if name not in source or name not in target or source[name].shape != target[name].shape
    )
    named = {variable.ref() for variable in target.values()}
    mismatch += [w.name for w in target_layer.weights if w.ref() not in named]
    if mismatch:
        raise UserError(
            "cannot fold: the %s of the plain Transformer differs from the model's (%s)"
            % (what, ", ".join(mismatch))
        )
    for name, variable in target.items():
        variable.assign(source[name])


def plain_transformer(model):
    """Builds the plain Transformer that folds of :obj:`model` go into.

    The encoder and decoder weights are copied; the embeddings are set per domain
    by :func:`assign_domain`.

    Args:
      model: A built multi-domain Transformer (LDR, DC or Mixed).

    Returns:
      A built ``opennmt.models.Transformer`` with plain word embedders, the same
      vocabularies, tokenizers and parameters.

    Raises:
      UserError: if the model cannot be folded (see :func:`check_foldable`).
    """
    check_foldable(model)
    source, target = source_embedder(model), model.labels_inputter
    plain = opennmt.models.Transformer(
        source_inputter=_plain_embedder(source),
        target_inputter=_plain_embedder(target),
        **transformer_arguments(model),
    )
    params = {k: v for k, v in model.params.items() if k != "domain_training"}
    plain.initialize(_data_config(source, target), params=params)
    plain.features_inputter.tokenizer = source.tokenizer
    plain.labels_inputter.tokenizer = target.tokenizer
    plain.create_variables()
    _copy_weights(model.encoder, plain.encoder, "encoder")
    _copy_weights(model.decoder, plain.decoder, "decoder")
    return plain


def assign_domain(plain, model, domain):
    """Sets the embeddings of :obj:`plain` to the fold of :obj:`model` for :obj:`domain`.

    Args:
      plain: The Transformer built by :func:`plain_transformer` for :obj:`model`.
      model: The multi-domain Transformer.
      domain: A declared domain name, or ``generic``.

    Raises:
      UserError: on an unknown domain name.
    """
    domain = domain_id(model, domain)
    pairs = (
        (source_embedder(model), plain.features_inputter),
        (model.labels_inputter, plain.labels_inputter),
    )
    for embedder, plain_embedder in pairs:
        plain_embedder.embedding.assign(folded_embedding(embedder, domain))


def fold(model, domain):
    """The plain Transformer equivalent to :obj:`model` for one domain.

    Args:
      model: A built multi-domain Transformer (LDR, DC or Mixed; LDR target
        embeddings included).
      domain: A declared domain name, or ``generic``.

    Returns:
      A built ``opennmt.models.Transformer`` whose outputs for any source equal
      those of :obj:`model` with every sentence labeled :obj:`domain`.

    Raises:
      UserError: on an unknown domain, an RNN model or a model that does not fold.
    """
    domain_id(model, domain)  # Fail before building anything.
    plain = plain_transformer(model)
    assign_domain(plain, model, domain)
    return plain
