"""Factorized Transformer blocks (Deng et al., 2020, section 3, Figure 1).

Every factorized block keeps one weight copy per domain region next to a shared
part. The schemes of Figure 1 implemented here:

* (F5) multi-head attention, "full" scheme: the Q, K, V and output projections of
  every attention are per-domain (:class:`DomainDense`, eq. 3);
* (F2) multi-query attention, "light" scheme: the K and V projections are
  per-domain and have a single head of size ``d_model / num_heads`` (eq. 4). The
  projection is tiled ``num_heads`` times along its output axis
  (:class:`DomainDense` with ``tile=num_heads``), so that OpenNMT-tf's stock
  ``split_heads`` and its cache of projected keys/values keep working, and the
  layer folds exactly into an ordinary multi-head K/V kernel;
* (F3) FFN factorized through ``d_inner``: ``f_i(h) = W_i,d^S (W_i^C h)`` with a
  shared ``W_i^C`` and a per-domain ``W_i,d^S`` (eq. 6, :class:`FactorizedDense`);
* (F6) FFN v2: a per-domain square map after the FFN, ``W_d^A FFN(h)`` (eq. 7,
  :class:`DomainAdaptedDense`, which replaces the FFN's outer linear);
* (F4) input embeddings factorized through ``d_inner``: a shared table ``W^C``
  ``[V, d_inner]`` times a per-domain ``W_d^S`` ``[d_inner, d_model]`` (eq. 1,
  :class:`FactorizedEmbedder`, a word embedder);
* (F1) output embedding: the same factorization, tied with the target embedder:
  ``logits = (h W_d^S^T) W^C^T`` (:class:`FactorizedOutput`, a decoder output
  layer reading the target :class:`FactorizedEmbedder`'s variables).

The per-domain machinery (general copies, regions, the selection of each sentence's
copy, :class:`DomainDense`) is :mod:`ldr_opennmt.layers.per_domain`, shared with the
residual adapters; this module builds the factorized schemes from it.

The paper's designs are combinations: PA = F5, SF = F2 + F6, DF = F1 + F2 + F3 + F4;
:func:`install` puts the attention and FFN blocks of one design into a stock
``SelfAttentionEncoder`` or ``SelfAttentionDecoder`` (``"df_attention_ffn"`` is the
F2 + F3 part of DF; the embedders and the output layer are the model's, see
:class:`ldr_opennmt.models.FactorizedTransformer`), and :func:`parameter_count`
gives the paper's #P column.

**The general copy.** Every per-domain block also has a *general copy*, a shared
variable (plain ``add_weight``, not in :meth:`domain_weights`) that the generic
label (``GENERIC_ID``, -1) selects: it is what the domain-agnostic first stage of
the curriculum (section 3.1) trains. Every region is created with the general
copy's initial value, so right after build every domain label computes exactly
the generic output, and a reserved region starts as generic. :meth:`unfold`
copies the trained general copy into every region (the start of the
domain-specific stage). The general copy of the F6 square map is the identity and
is not trainable: generic is exactly the stock FFN, and a region starts there.

**Efficiency.** A per-sentence kernel ``[batch, d, d]`` is never gathered. In
training, the positions of a batch are partitioned by the copy their sentence's
label selects, each part is multiplied by its copy and the results are put back in
place: one set of weights' FLOPs whatever the mix of domains, and no conditional.
In inference a batch of one domain uses that domain's kernel and a mixed batch
every copy, rows selected; under XLA (``branch_free``, static shapes) every copy is
applied to the whole batch.
:func:`~ldr_opennmt.layers.per_domain.domain_matmul` gives the measurements behind
these choices. Variables are read in the layer's compute dtype
(``mixed_float16``/``mixed_bfloat16``).

**Regions.** The attention and FFN layers live inside the encoder/decoder, which
the model does not ``initialize``: call :meth:`DomainCopies.set_num_regions` before
the layer is built (:func:`install` does). The embedders set theirs in
``initialize`` from the data configuration. Region ``k`` is used by domain id
``k``; ids must be smaller than ``num_regions``.
"""

import tensorflow as tf
from opennmt.layers import common
from opennmt.utils.misc import shape_list

from ldr_opennmt.errors import UserError
from ldr_opennmt.layers.context import DomainSpecificLayer
from ldr_opennmt.layers.embedding import DomainAwareWordEmbedder
from ldr_opennmt.layers.per_domain import DomainCopies, DomainDense, DomainLinear
from ldr_opennmt.layers.per_domain import fresh_initializer as _fresh
from ldr_opennmt.layers.replace import replace_dense

#: The designs :func:`install` knows.
DESIGNS = ("pa", "sf", "df_attention_ffn")

#: The designs :func:`parameter_count` knows.
COUNTED_DESIGNS = ("vanilla", "df", "sf", "pa")

#: The paper's sizes (Transformer base, 5 domains, DF with ``d_inner`` 280).
PAPER_SIZES = dict(
    vocab_size=50000,
    d_model=512,
    ffn_dim=2048,
    num_heads=8,
    encoder_layers=6,
    decoder_layers=6,
    num_domains=5,
    d_inner=280,
)


class DomainAdaptedDense(DomainLinear):
    """A shared Dense followed by a per-domain square map (scheme F6, eq. 7).

    Replaces the FFN's outer linear: ``outer_d(x) = (x K + b) A_d``. Weights: the
    shared ``kernel`` and ``bias`` of the outer linear, the general ``adapter``
    (the identity, not trainable: generic is exactly the stock FFN) and, per region
    ``k``, ``domain_<k>_adapter`` (trainable, starting at the identity).
    """

    def __init__(
        self,
        units,
        use_bias=True,
        activation=None,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        num_regions=None,
        **kwargs
    ):
        """Initializes the layer.

        Args:
          units: The output size (and the size of the square map).
          use_bias: Whether the shared linear has a bias.
          activation: The activation applied after the square map.
          kernel_initializer: The shared kernel initializer.
          bias_initializer: The shared bias initializer.
          num_regions: The number of domain regions (or :meth:`set_num_regions`).
          **kwargs: Additional layer keyword arguments.
        """
        super().__init__(units, activation=activation, num_regions=num_regions, **kwargs)
        self.use_bias = use_bias
        self.kernel_initializer = kernel_initializer
        self.bias_initializer = bias_initializer

    def build(self, input_shape):
        self.kernel = self.add_weight(
            "kernel", [input_shape[-1], self.units], initializer=_fresh(self.kernel_initializer)
        )
        self.bias = None
        if self.use_bias:
            self.bias = self.add_weight(
                "bias", [self.units], initializer=_fresh(self.bias_initializer)
            )
        self.adapter = self.add_copies(
            "adapter", [self.units, self.units], "identity", trainable=False
        )
        super().build(input_shape)

    def call(self, inputs, training=None):
        kernel = tf.cast(self.kernel, self.compute_dtype)
        outputs = tf.tensordot(inputs, kernel, axes=1)
        if self.use_bias:
            outputs = tf.nn.bias_add(outputs, tf.cast(self.bias, self.compute_dtype))
        return self.activate(self.project(outputs, "adapter", training=training))

    def fold(self, domain_id):
        """The plain Dense ``{"kernel": K A_d, "bias": b A_d}`` for :obj:`domain_id`."""
        adapter = self.copy_for("adapter", domain_id)
        weights = {"kernel": tf.matmul(tf.convert_to_tensor(self.kernel), adapter)}
        if self.use_bias:
            bias = tf.expand_dims(tf.convert_to_tensor(self.bias), 0)
            weights["bias"] = tf.squeeze(tf.matmul(bias, adapter), 0)
        return weights


class FactorizedDense(DomainLinear):
    """A linear factorized through ``d_inner`` (scheme F3, eq. 6).

    ``f_d(h) = activation(W_d^S (W^C h) + b_d)`` with the shared ``shared_kernel``
    ``W^C`` ``[input_dim, d_inner]`` and, per domain, ``W_d^S`` ``[d_inner, units]``
    and its bias: the general copies ``kernel``/``bias`` and the regions
    ``domain_<k>_kernel``/``domain_<k>_bias``.
    """

    def __init__(
        self,
        units,
        d_inner,
        use_bias=True,
        activation=None,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        num_regions=None,
        **kwargs
    ):
        """Initializes the layer.

        Args:
          units: The output size.
          d_inner: The inner size of the factorization.
          use_bias: Whether the per-domain part has a bias.
          activation: The activation applied to the output.
          kernel_initializer: The initializer of both factors.
          bias_initializer: The bias initializer.
          num_regions: The number of domain regions (or :meth:`set_num_regions`).
          **kwargs: Additional layer keyword arguments.

        Raises:
          UserError: if :obj:`d_inner` is not positive.
        """
        super().__init__(units, activation=activation, num_regions=num_regions, **kwargs)
        if d_inner is None or d_inner <= 0:
            raise UserError("FactorizedDense: d_inner must be > 0, got %s" % d_inner)
        self.d_inner = d_inner
        self.use_bias = use_bias
        self.kernel_initializer = kernel_initializer
        self.bias_initializer = bias_initializer

    def build(self, input_shape):
        self.shared_kernel = self.add_weight(
            "shared_kernel",
            [input_shape[-1], self.d_inner],
            initializer=_fresh(self.kernel_initializer),
        )
        self.kernel = self.add_copies("kernel", [self.d_inner, self.units], self.kernel_initializer)
        self.bias = None
        if self.use_bias:
            self.bias = self.add_copies("bias", [self.units], self.bias_initializer)
        super().build(input_shape)

    def call(self, inputs, training=None):
        shared = tf.cast(self.shared_kernel, self.compute_dtype)
        inner = tf.tensordot(inputs, shared, axes=1)
        bias = "bias" if self.use_bias else None
        return self.activate(self.project(inner, "kernel", bias, training=training))

    def fold(self, domain_id):
        """The plain Dense ``{"kernel": W^C W_d^S, "bias": b_d}`` for :obj:`domain_id`."""
        shared = tf.convert_to_tensor(self.shared_kernel)
        weights = {"kernel": tf.matmul(shared, self.copy_for("kernel", domain_id))}
        if self.use_bias:
            weights["bias"] = self.copy_for("bias", domain_id)
        return weights


class FactorizedEmbedder(DomainAwareWordEmbedder, DomainCopies):
    """Factorized input embeddings (scheme F4, eq. 1): ``EMB_d(v) = W^C[v] W_d^S``.

    A shared table ``embedding`` ``W^C`` ``[V, d_inner]`` (the conventional name, so
    that OpenNMT-tf's vocabulary and OOV handling and checkpoints stay those of a
    :class:`opennmt.inputters.WordEmbedder`) times a per-domain projection
    ``W_d^S`` ``[d_inner, embedding_size]``: the general copy ``projection``, which
    the generic label selects, and per region ``k`` ``domain_<k>_projection``,
    created equal to it. The number of regions comes from the data configuration
    (``domains`` plus :obj:`num_reserved_regions`, or ``domain_regions``) in
    :meth:`initialize`.

    The same object, as the target embedder, is the factorized output embedding (F1)
    through :class:`FactorizedOutput`, which reads its variables (tied).
    """

    def __init__(self, embedding_size, d_inner, num_reserved_regions=0, dropout=0.0, **kwargs):
        """Initializes the embedder.

        Args:
          embedding_size: The output size (the model size).
          d_inner: The inner size of the factorization (the table's width).
          num_reserved_regions: Regions kept free for domains added later.
          dropout: The probability to drop units in the output.
          **kwargs: Additional layer keyword arguments.

        Raises:
          UserError: if a size is not positive.
        """
        if embedding_size is None or embedding_size <= 0:
            raise UserError(
                "FactorizedEmbedder: embedding_size must be > 0, got %s" % embedding_size
            )
        if d_inner is None or d_inner <= 0:
            raise UserError("FactorizedEmbedder: d_inner must be > 0, got %s" % d_inner)
        super().__init__(
            embedding_size, num_reserved_regions=num_reserved_regions, dropout=dropout, **kwargs
        )
        self.d_inner = d_inner
        self.init_copies()

    def build(self, input_shape):
        self.embedding = self.add_weight(
            "embedding", [self.vocabulary_size, self.d_inner], trainable=self.trainable
        )
        self.projection = self.add_copies(
            "projection", [self.d_inner, self.embedding_size], "glorot_uniform"
        )
        self.built = True

    def call(self, features, training=None):
        ids = features["ids"]
        if getattr(self, "_tflite_mode", False):
            inner = tf.gather_nd(self.embedding, tf.expand_dims(ids, axis=-1))
        else:
            inner = tf.nn.embedding_lookup(self.embedding, ids)
        outputs = self.project(tf.cast(inner, self.compute_dtype), "projection", training=training)
        return common.dropout(outputs, self.dropout, training=training)

    def fused_table(self, domain_id):
        """The embedding of every vocabulary unit in one domain: ``W^C W_d^S``, ``[V, D]``.

        Args:
          domain_id: A domain id, or ``GENERIC_ID`` (-1) for the general copy.
        """
        table = tf.convert_to_tensor(self.embedding)
        return tf.matmul(table, self.copy_for("projection", domain_id))

    def map_v1_weights(self, weights):
        raise NotImplementedError("factorized embedders have no OpenNMT-tf V1 counterpart")


class FactorizedOutput(tf.keras.layers.Layer):
    """The factorized output embedding (scheme F1), tied with the target embedder.

    The logits of a sentence of domain ``d`` are ``h (W^C W_d^S)^T + b``, computed as
    ``(h W_d^S^T) W^C^T``: the ``[V, D]`` product is never formed. ``W^C`` and the
    ``W_d^S`` copies are the :class:`FactorizedEmbedder`'s own variables, read at
    each call and not tracked by this layer (no duplicate in checkpoints); the only
    variable of this layer is the optional shared ``bias`` ``[V]``. The domain
    comes from the domain scope (beam-tiled during beam search), and the XLA path
    follows the embedder's ``branch_free``.

    It is installed as an OpenNMT-tf decoder's ``output_layer``; OpenNMT-tf only
    calls it (training, scoring, beam search, serving). It exposes ``units`` (the
    vocabulary size), ``use_bias`` and ``bias`` like ``opennmt.layers.Dense``, but no
    ``kernel``: the output kernel depends on the domain (:meth:`fold` gives it).
    """

    # The embedder belongs to the target inputter: not a submodule of this layer.
    _TF_MODULE_IGNORED_PROPERTIES = frozenset(
        tf.keras.layers.Layer._TF_MODULE_IGNORED_PROPERTIES | {"_embedder"}
    )

    def __init__(self, embedder, use_bias=True, **kwargs):
        """Initializes the layer.

        Args:
          embedder: The target :class:`FactorizedEmbedder` whose weights are tied.
          use_bias: Whether to add a shared bias of the vocabulary size.
          **kwargs: Additional layer keyword arguments.

        Raises:
          UserError: if :obj:`embedder` is not a :class:`FactorizedEmbedder`.
        """
        if not isinstance(embedder, FactorizedEmbedder):
            raise UserError(
                "FactorizedOutput ties a FactorizedEmbedder, not %s" % type(embedder).__name__
            )
        super().__init__(**kwargs)
        object.__setattr__(self, "_embedder", embedder)  # Untracked: tied, not owned.
        self.use_bias = use_bias
        self.bias = None

    @property
    def embedder(self):
        """The tied target embedder."""
        return self._embedder

    @property
    def units(self):
        """The output size: the target vocabulary size."""
        return self._embedder.vocabulary_size

    @property
    def kernel(self):
        """Refused: the output kernel depends on the domain."""
        raise UserError(
            "the factorized output layer has no single kernel: its projection depends on the "
            "domain (use fold(domain_id))"
        )

    def build(self, input_shape):
        if not self._embedder.built:
            raise ValueError("FactorizedOutput: build the target embedder first (call it once)")
        if self.use_bias:
            self.bias = self.add_weight("bias", [self.units], initializer="zeros")
        super().build(input_shape)

    def call(self, inputs, training=None):
        embedder = self._embedder
        dtype = self.compute_dtype
        inner = embedder.project(
            inputs, "projection", transpose=True, dtype=dtype, training=training
        )
        shape = shape_list(inner)
        table = tf.cast(embedder.embedding, dtype)
        logits = tf.matmul(tf.reshape(inner, [-1, shape[-1]]), table, transpose_b=True)
        if self.use_bias:
            logits = tf.nn.bias_add(logits, tf.cast(self.bias, dtype))
        return tf.reshape(logits, shape[:-1] + [table.shape[0]])

    def fold(self, domain_id):
        """The plain output Dense ``{"kernel": (W^C W_d^S)^T, "bias": b}`` for one domain.

        Returns:
          ``kernel`` ``[D, V]`` (and ``bias`` ``[V]`` with ``use_bias``).
        """
        weights = {"kernel": tf.transpose(self._embedder.fused_table(domain_id))}
        if self.use_bias:
            weights["bias"] = tf.convert_to_tensor(self.bias)
        return weights


def domain_layers(layer_stack):
    """The domain-specific layers inside :obj:`layer_stack` (any Keras layer)."""
    return [m for m in layer_stack.submodules if isinstance(m, DomainSpecificLayer)]


def _replace(parent, attribute, layer_class, **kwargs):
    """Replaces ``parent.<attribute>`` by a ``layer_class`` with the same units and options."""
    replace_dense(parent, attribute, layer_class, "factorized", **kwargs)


def _attentions(layer):
    """The ``MultiHeadAttention`` layers of an encoder or decoder layer."""
    wrappers = [layer.self_attention] + list(getattr(layer, "attention", []))
    return [wrapper.layer for wrapper in wrappers]


def _install_attention(attention, design, num_heads):
    if attention.num_heads != num_heads:
        raise UserError(
            "num_heads is %d but the attention layers have %d heads"
            % (num_heads, attention.num_heads)
        )
    if design == "pa":
        for attribute in ("linear_queries", "linear_keys", "linear_values", "linear_output"):
            _replace(attention, attribute, DomainDense)
    else:
        for attribute in ("linear_keys", "linear_values"):
            _replace(attention, attribute, DomainDense, tile=num_heads)


def _install_ffn(ffn, design, d_inner):
    if design == "sf":
        _replace(ffn, "outer", DomainAdaptedDense)
    elif design == "df_attention_ffn":
        _replace(ffn, "inner", FactorizedDense, d_inner=d_inner)
        _replace(ffn, "outer", FactorizedDense, d_inner=d_inner)


def install(layer_stack, design, num_heads, num_regions, d_inner=None):
    """Installs one design's per-domain blocks into a stock self-attention stack.

    Replaces the linear layers of every attention (encoder self-attention, decoder
    self- and cross-attention) and FFN of :obj:`layer_stack`, after its
    construction and before it is built; the stock ``call`` and cache code is kept.

    * ``"pa"`` (F5): Q, K, V and output projections become :class:`DomainDense`;
    * ``"sf"`` (F2 + F6): K and V become multi-query :class:`DomainDense`
      (``tile=num_heads``), the FFN's outer linear a :class:`DomainAdaptedDense`;
    * ``"df_attention_ffn"`` (F2 + F3): K and V as in ``"sf"``, both FFN linears
      :class:`FactorizedDense` through :obj:`d_inner`.

    Args:
      layer_stack: An unbuilt ``opennmt.encoders.SelfAttentionEncoder`` or
        ``opennmt.decoders.SelfAttentionDecoder``.
      design: One of :data:`DESIGNS`.
      num_heads: The number of attention heads of :obj:`layer_stack`.
      num_regions: The number of domain regions, set on every installed layer.
      d_inner: The factorization size, required by ``"df_attention_ffn"``.

    Returns:
      The installed domain-specific layers.

    Raises:
      UserError: for an unknown design, a missing or non-positive :obj:`d_inner`,
        a wrong :obj:`num_heads`, or a stack that is built or already installed.
    """
    if design not in DESIGNS:
        raise UserError(
            "unknown factorized design %r (expected one of: %s)" % (design, ", ".join(DESIGNS))
        )
    if design == "df_attention_ffn" and (d_inner is None or d_inner <= 0):
        raise UserError("the df_attention_ffn design needs d_inner > 0, got %s" % d_inner)
    if num_regions < 0:
        raise UserError("num_regions must be >= 0, got %d" % num_regions)
    if getattr(layer_stack, "layers", None) is None or layer_stack.built:
        raise UserError(
            "factorized layers install into an unbuilt SelfAttentionEncoder or "
            "SelfAttentionDecoder, not %s" % type(layer_stack).__name__
        )
    for layer in layer_stack.layers:
        for attention in _attentions(layer):
            _install_attention(attention, design, num_heads)
        _install_ffn(layer.ffn.layer, design, d_inner)
    installed = domain_layers(layer_stack)
    for layer in installed:
        layer.set_num_regions(num_regions)
    return installed


def _attention_parameters(design, d_model, num_heads, num_domains):
    if design == "vanilla":
        return 4 * d_model**2
    if design == "pa":
        return num_domains * 4 * d_model**2
    # Multi-query: shared Q and O, one per-domain K and V head of d_model / num_heads.
    return 2 * d_model**2 + num_domains * 2 * d_model * (d_model // num_heads)


def _ffn_parameters(design, d_model, ffn_dim, num_domains, d_inner):
    if design == "df":
        inner = d_model * d_inner + num_domains * d_inner * ffn_dim
        outer = ffn_dim * d_inner + num_domains * d_inner * d_model
        return inner + outer
    parameters = 2 * d_model * ffn_dim
    if design == "sf":
        parameters += num_domains * d_model**2
    return parameters


def _embedding_parameters(design, vocab_size, d_model, num_domains, d_inner):
    if design == "df":
        return vocab_size * d_inner + num_domains * d_inner * d_model
    return vocab_size * d_model


def parameter_count(
    design,
    vocab_size=50000,
    d_model=512,
    ffn_dim=2048,
    num_heads=8,
    encoder_layers=6,
    decoder_layers=6,
    num_domains=5,
    d_inner=280,
):
    """Counts the kernel and embedding parameters of a design (the paper's #P).

    Biases and layer norms are left out, a source table and one target table tied
    with the output layer are counted, and no general copy is counted (the paper's
    convention; the layers here keep one more copy of each per-domain block).

    Args:
      design: One of :data:`COUNTED_DESIGNS` (``"df"`` includes the factorized
        embeddings F1/F4).
      vocab_size: The vocabulary size of each side.
      d_model: The model size.
      ffn_dim: The FFN inner size.
      num_heads: The number of attention heads.
      encoder_layers: The number of encoder layers.
      decoder_layers: The number of decoder layers.
      num_domains: The number of domains.
      d_inner: The factorization size of DF.

    Returns:
      The number of parameters.

    Raises:
      UserError: for an unknown design or a non-positive :obj:`d_inner` with DF.
    """
    if design not in COUNTED_DESIGNS:
        raise UserError(
            "unknown design %r (expected one of: %s)" % (design, ", ".join(COUNTED_DESIGNS))
        )
    if design == "df" and (d_inner is None or d_inner <= 0):
        raise UserError("the df design needs d_inner > 0, got %s" % d_inner)
    attention = _attention_parameters(design, d_model, num_heads, num_domains)
    ffn = _ffn_parameters(design, d_model, ffn_dim, num_domains, d_inner)
    embeddings = _embedding_parameters(design, vocab_size, d_model, num_domains, d_inner)
    return (
        2 * embeddings + encoder_layers * (attention + ffn) + decoder_layers * (2 * attention + ffn)
    )


def parameter_ratio(design, **sizes):
    """The size of :obj:`design` relative to the vanilla Transformer (the paper's #P).

    Args:
      design: One of :data:`COUNTED_DESIGNS`.
      **sizes: The keyword arguments of :func:`parameter_count`.
    """
    return parameter_count(design, **sizes) / parameter_count("vanilla", **sizes)
