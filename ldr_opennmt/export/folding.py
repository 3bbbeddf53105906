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
CTranslate2 know (see :mod:`ldr_opennmt.export.ct2_export`). Folded models are
for inference: their embedders have no dropout.

The per-domain projections that model families put into the stock attention and
feed-forward layers (:func:`ldr_opennmt.layers.replace.replace_dense`) fold too, when
each is a linear map for a fixed domain: their :meth:`fold` gives the plain ``Dense``
weights, which go into the same slot of the plain Transformer
(:func:`~ldr_opennmt.layers.replace.dense_slots` pairs the slots). The Factorized
Transformer's designs (Deng et al., 2020) fold this way:

* PA (F5): each domain's Q, K, V and output kernels;
* SF (F2 + F6): the multi-query K/V head repeated over the heads (an ordinary
  multi-head K/V kernel: CTranslate2's ``multi_query_attention`` spec is not used, as
  the OpenNMT-tf converter never sets it and it applies to every attention at once),
  and the square map multiplied into the FFN's outer projection, ``K A_d``, ``b A_d``;
* DF (F1-F4): ``W^C W_d^S`` for each factorized FFN linear, the embedding tables
  ``W^C W_d^S``, and the factorized output layer as the transpose of the target
  table (the plain model ties its target input and output embeddings, as DF does).

Anything that cannot be folded exactly is refused with a
:class:`~ldr_opennmt.UserError`: RNN models (CTranslate2 3.x converts
no OpenNMT-tf RNN), domain-specific layers outside the embedders and the stock
projection slots, layers without an exact fold (domain mixing: input-dependent
proportions), weights outside the embedders, encoder and decoder.
"""

import functools

import opennmt
import tensorflow as tf
from opennmt.utils import misc

from ldr_opennmt import domains as domains_lib
from ldr_opennmt.errors import UserError
from ldr_opennmt.inputters import MultiDomainInputter
from ldr_opennmt.layers.context import DomainSpecificLayer
from ldr_opennmt.layers.replace import dense_slots
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
        remedy = "" if "SavedModel" in refusal else " (serve its SavedModel: onmt-main export)"
        raise UserError("%s cannot be exported to CTranslate2: %s%s" % (name, refusal, remedy))
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
    slotted = {id(layer) for layer in _slot_layers(model)}
    for layer in model.submodules:
        if isinstance(layer, DomainSpecificLayer) and all(layer is not e for e in embedders):
            if id(layer) not in slotted:
                raise UserError(
                    "%s has domain-specific parameters in %s, which cannot be folded into "
                    "a plain Transformer: the fold covers the embedders and the attention and "
                    "feed-forward projections (dense_slots) whose layers define fold(); serve "
                    "the SavedModel (onmt-main export), and state why in the model class's "
                    "ctranslate2_refusal" % (name, layer.name)
                )
            layer.fold(domains_lib.GENERIC_ID)  # A layer with no exact fold refuses here.
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


def _slot_layers(model):
    """The layers in the stock projection slots of the model's encoder and decoder."""
    return [
        getattr(parent, attribute)
        for stack in (model.encoder, model.decoder)
        for parent, attribute in dense_slots(stack)
    ]


def _folded_slots(model, plain):
    """``(per-domain layer, plain Dense)`` pairs: the slots that :func:`assign_domain` sets."""
    return [
        (layer, plain_layer)
        for layer, plain_layer in zip(_slot_layers(model), _slot_layers(plain), strict=True)
        if isinstance(layer, DomainSpecificLayer)
    ]


def _ties_target(model):
    """Whether the model's output layer is its target embedding, transposed (shared
    embeddings, or the Factorized output layer that reads the target embedder)."""
    share = opennmt.models.EmbeddingsSharingLevel
    output_fold = getattr(model.decoder.output_layer, "fold", None)
    return share.share_target_embeddings(model.share_embeddings) or output_fold is not None


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
            "no fold is defined for %s: it cannot be exported to CTranslate2 (define its "
            "fold(domain_id), or serve the SavedModel: onmt-main export)" % type(embedder).__name__
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
        share_embeddings=share.TARGET if _ties_target(model) else share.NONE,
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


def _copy_weights(source_layer, target_layer, what, folded=()):
    """Copies the weights of a layer into its twin, paired by checkpoint name.

    The weights of the :obj:`folded` pairs (per-domain layer, plain layer) are left
    out on both sides: :func:`assign_domain` sets them for each domain.
    """
    skip = {w.ref() for pair in folded for layer in pair for w in layer.weights}
    source = misc.get_variables_name_mapping(source_layer, what)
    target = misc.get_variables_name_mapping(target_layer, what)
    source = {name: v for name, v in source.items() if v.ref() not in skip}
    target = {name: v for name, v in target.items() if v.ref() not in skip}
    mismatch = sorted(
        name
        for name in set(source) | set(target)
        if name not in source or name not in target or source[name].shape != target[name].shape
    )
    named = {variable.ref() for variable in target.values()}
    mismatch += [w.name for w in target_layer.weights if w.ref() not in named | skip]
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
      model: A built multi-domain Transformer (LDR, DC, Factorized or Mixed).

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
    # The target tables (also the output kernel of a tied model) are set per domain.
    folded = _folded_slots(model, plain) + [(target, plain.labels_inputter)]
    _copy_weights(model.encoder, plain.encoder, "encoder", folded)
    _copy_weights(model.decoder, plain.decoder, "decoder", folded)
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
    for layer, plain_layer in _folded_slots(model, plain):
        weights = layer.fold(domain)
        plain_layer.kernel.assign(weights["kernel"])
        if plain_layer.use_bias:
            plain_layer.bias.assign(weights["bias"])


def fold(model, domain):
    """The plain Transformer equivalent to :obj:`model` for one domain.

    Args:
      model: A built multi-domain Transformer (LDR, DC, Factorized or Mixed; LDR target
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
