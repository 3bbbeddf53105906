"""Per-domain building blocks: weights with one copy per domain region.

A multi-domain method keeps some weights once per domain and lets each sentence use its
domain's copy. The pieces here do that for any Keras layer, so a new method is a new
layer, not new plumbing:

* :class:`DomainCopies` (mixin of a Keras layer): :meth:`~DomainCopies.add_copies`
  creates a weight's *general copy* (what the ``generic`` label selects: a shared
  variable, or a constant such as 0 or 1 for "no domain effect") and one copy per
  domain region (``domain_<k>_<name>``, filed under region ``k`` for Procedure 1, the
  optimizer and the Runner); :meth:`~DomainCopies.project` multiplies each sentence by
  its domain's copy of a kernel, :meth:`~DomainCopies.per_sentence` gathers each
  sentence's copy of a small weight (a scale, a bias), :meth:`~DomainCopies.copy_for`
  gives one domain's copy (to fold), :meth:`~DomainCopies.unfold` copies the general
  copy into every region, :meth:`~DomainCopies.set_num_regions` sets the region count
  before build.
* :func:`domain_matmul`: the selection itself (``inputs [batch, ..., n]`` times the copy
  each sentence's domain selects), with a training path, an inference path and an XLA
  path chosen by measurement; :func:`mixed_matmul`: its variant for methods that weigh
  every domain's copy by per-word proportions (domain mixing) instead of selecting one.
* :class:`DomainLinear` and :class:`DomainDense`: a per-domain ``opennmt.layers.Dense``
  (general copy, regions, fold), which :func:`ldr_opennmt.layers.replace.replace_dense`
  puts into OpenNMT-tf's stock attention and feed-forward layers.

The domain of each sentence comes from the domain scope
(:func:`ldr_opennmt.layers.context.domain_scope`), which the multi-domain model opens
around every forward pass (beam search included): a layer never takes it as an argument.

A per-domain layer in a few lines, here a per-domain scale (``generic``: 1, no effect):

.. code-block:: python

    import tensorflow as tf
    from ldr_opennmt.layers import DomainCopies, domain_scope

    class DomainScale(tf.keras.layers.Layer, DomainCopies):
        def __init__(self, num_regions=None, **kwargs):
            super().__init__(**kwargs)
            self.init_copies(num_regions)  # or set_num_regions() before build

        def build(self, input_shape):
            self.add_copies("scale", [input_shape[-1]], "ones", generic_value=1)
            super().build(input_shape)

        def call(self, inputs):
            return inputs * self.per_sentence("scale", inputs.shape.rank)

    layer = DomainScale(num_regions=3)
    with domain_scope([0, 2, -1]):  # one domain id per sentence, -1 for generic
        outputs = layer(tf.ones([3, 5, 8]))

A model built with :class:`~ldr_opennmt.models.MultiDomainModel` finds such a layer
among its ``domain_layers()`` (it is a
:class:`~ldr_opennmt.layers.context.DomainSpecificLayer`), sets its regions from the
data configuration with ``set_layer_regions`` and routes its ``domain_<k>_*`` variables
in Procedure 1. A per-domain linear projection is
``DomainDense(units, num_regions=...)``; a layer that equals a plain layer for a fixed
domain defines ``fold(domain_id)`` (see :meth:`DomainDense.fold`), which CTranslate2
exports use.
"""

import tensorflow as tf
from opennmt.utils.misc import shape_list

from ldr_opennmt import domains as domains_lib
from ldr_opennmt.errors import UserError
from ldr_opennmt.layers.context import DomainSpecificLayer, current_domain


def _constant_initializer(value):
    """An initializer returning a fixed tensor (the general copy's initial value)."""

    def _initializer(shape, dtype=None, **kwargs):
        return tf.cast(value, dtype) if dtype is not None else value

    return _initializer


def fresh_initializer(initializer):
    """A new instance of :obj:`initializer` (an unseeded Keras initializer instance
    returns the same values at each call: never call one twice)."""
    if isinstance(initializer, tf.keras.initializers.Initializer):
        return initializer.__class__.from_config(initializer.get_config())
    return tf.keras.initializers.get(initializer)


def _initial_value(initializer, shape, dtype):
    """Draws an initial value once, outside any function being traced."""
    with tf.init_scope():
        return tf.convert_to_tensor(fresh_initializer(initializer)(shape, dtype=dtype))


def _row_index(index, shape):
    """Per-row copy index of the flattened inputs: ``index [B]`` -> ``[prod(shape[:-1])]``."""
    rank = len(shape)
    index = tf.reshape(index, [-1] + [1] * (rank - 2))
    return tf.reshape(tf.broadcast_to(index, shape[:-1]), [-1])


def domain_matmul(
    inputs, kernels, biases, domain, branch_free=False, training=False, transpose=False
):
    """Projects each sentence with the copy its domain selects.

    Three paths, the same result (to float32 rounding), chosen by measurement (Factorized
    PA/SF/DF at 2 layers x 256 units on CPU, ``run/bench.sh --families factorized``):

    * training (:obj:`training` true): the positions of the batch are partitioned by the
      copy their sentence selects (``tf.dynamic_partition``), each part is multiplied by
      its copy and the results are put back in place (``tf.dynamic_stitch``): one set of
      weights' FLOPs whatever the mix of domains (a copy no sentence uses multiplies an
      empty part and gets an exact zero gradient), and no conditional. A ``tf.cond`` per
      projection here (one kernel if the batch has one domain, else every copy) cost PA
      1.42x / SF 1.42x / DF 1.84x a vanilla step and 1.6-1.7x its memory (cond_v2 keeps
      the intermediates of its branches for the gradient); partitioning: 0.93-1.21x,
      0.80-0.98x, 0.74-0.87x and 1.22-1.37x;
    * inference: a batch of one domain is multiplied by that domain's kernel, selected by
      index; a batch mixing domains by every copy, the rows then selected (``tf.cond``
      between the two). Beam search multiplies a few rows per step, where partitioning
      costs more than the matmuls (mixed batches: PA 1.75x, SF 1.61x vanilla's time,
      against 0.9-1.1x this way);
    * :obj:`branch_free` (XLA, ``--jit_compile``: static shapes, no ``tf.cond`` gradient
      in TensorFlow 2.13): every copy on every row, the rows selected.

    A per-sentence kernel ``[batch, n, m]`` is never gathered.

    Args:
      inputs: A tensor ``[batch, ..., n]``.
      kernels: The copies ``[n, m]`` (``[m, n]`` with :obj:`transpose`): the general
        copy first, then region 0, 1, ...
      biases: The matching ``[m]`` bias copies, or ``None``.
      domain: The domain ids ``[batch]`` (-1: the general copy).
      branch_free: Take the static-shape path (XLA).
      training: Whether this is a training step (Keras' ``training`` flag).
      transpose: Multiply by the transpose of each kernel (without materializing it).

    Returns:
      A tensor ``[batch, ..., m]``.
    """
    shape = shape_list(inputs)
    flat = tf.reshape(inputs, [-1, shape[-1]])

    def _project(rows, kernel, bias):
        outputs = tf.matmul(rows, kernel, transpose_b=transpose)
        return outputs if bias is None else tf.nn.bias_add(outputs, bias)

    def _copy(copy):
        return kernels[copy], biases[copy] if biases else None

    def _every_copy(index):
        units = kernels[0].shape[0 if transpose else -1]
        outputs = tf.zeros([tf.shape(flat)[0], units], flat.dtype)
        for copy in range(len(kernels)):
            selected = tf.expand_dims(tf.equal(index, copy), -1)
            outputs = tf.where(selected, _project(flat, *_copy(copy)), outputs)
        return outputs

    def _partitioned(index):
        count = len(kernels)
        parts = tf.dynamic_partition(flat, index, count)
        positions = tf.dynamic_partition(tf.range(tf.shape(flat)[0]), index, count)
        return tf.dynamic_stitch(positions, [_project(p, *_copy(c)) for c, p in enumerate(parts)])

    def _selected(index):
        first, last = tf.reduce_min(index), tf.reduce_max(index)  # Empty batch: mixed.

        def _single():
            bias = tf.gather(tf.stack(biases), last) if biases else None
            return _project(flat, tf.gather(tf.stack(kernels), last), bias)

        return tf.cond(tf.equal(first, last), _single, lambda: _every_copy(index))

    if len(kernels) == 1:
        outputs = _project(flat, *_copy(0))
    else:
        index = _row_index(tf.cast(domain, tf.int32) + 1, shape)  # 0 is the general copy.
        if branch_free:
            outputs = _every_copy(index)
        elif training:
            outputs = _partitioned(index)
        else:
            outputs = _selected(index)
    return tf.reshape(outputs, shape[:-1] + [outputs.shape[-1] or tf.shape(outputs)[-1]])


def mixed_matmul(inputs, kernel, bias, proportions):
    """``sum_j proportions_j (inputs W_j + b_j)`` for each position, in one matmul.

    The variant of :func:`domain_matmul` for methods that weigh every domain's copy
    (domain mixing, :class:`ldr_opennmt.layers.mixing.MixedDense`) instead of selecting
    one per sentence. The copies are stored in one kernel ``[n, k, m]``; one matmul
    computes every domain's projection, either ``[n, k*m]`` then a weighted sum over
    ``k``, or, when the output is wider than the input, the equivalent
    ``[D_1 x, ..., D_k x] [W_1; ...; W_k]`` whose intermediate is ``[N, k*n]``; no
    per-position kernel is gathered.

    Args:
      inputs: ``[..., n]``.
      kernel: ``[n, k, m]``: ``kernel[:, j, :]`` is domain ``j``'s ``W_j``.
      bias: ``[k, m]`` or ``None``.
      proportions: ``[..., k]``, the weights of each position (a one-hot row selects
        one copy).

    Returns:
      ``[..., m]``.
    """
    shape = shape_list(inputs)
    n, k, m = kernel.shape
    flat = tf.reshape(inputs, [-1, n])
    weights = tf.reshape(tf.cast(proportions, inputs.dtype), [-1, k])
    if n < m:
        # [x D_1, ..., x D_k] interleaved as (n, k) rows of the kernel: intermediate [N, n*k].
        expanded = tf.reshape(flat[:, :, tf.newaxis] * weights[:, tf.newaxis, :], [-1, n * k])
        outputs = tf.matmul(expanded, tf.reshape(kernel, [n * k, m]))
    else:
        # Every domain's projection [N, k*m], then the weighted sum over k.
        projected = tf.reshape(tf.matmul(flat, tf.reshape(kernel, [n, k * m])), [-1, k, m])
        outputs = tf.reduce_sum(projected * weights[:, :, tf.newaxis], axis=1)
    if bias is not None:
        outputs += tf.matmul(weights, bias)
    return tf.reshape(outputs, shape[:-1] + [m])


class _GenericConstant:
    """A general copy that is a constant, not a variable (see :meth:`DomainCopies.add_copies`)."""

    def __init__(self, value, shape, dtype):
        self.value = value
        self.shape = tf.TensorShape(shape)
        self.dtype = tf.as_dtype(dtype)

    def tensor(self, dtype=None):
        """The constant, filled in :obj:`dtype` (default: the variables' dtype)."""
        return tf.fill(self.shape, tf.constant(self.value, dtype or self.dtype))


def copy_optimizer_slots(optimizer, source, targets):
    """Sets the optimizer slots (e.g. Adam's ``m`` and ``v``) of :obj:`targets` to those
    of :obj:`source`.

    Args:
      optimizer: A Keras (legacy) optimizer, possibly wrapped in a loss-scale optimizer,
        whose slots exist (``create_variables(optimizer=...)``), or ``None`` (no-op).
      source: A variable.
      targets: Variables of the same shape.
    """
    inner = getattr(optimizer, "inner_optimizer", optimizer)
    if inner is None or not hasattr(inner, "get_slot_names"):
        return
    for name in inner.get_slot_names():
        try:
            value = tf.convert_to_tensor(inner.get_slot(source, name))
        except KeyError:  # No slot for this variable (not trainable in the optimizer).
            continue
        for target in targets:
            inner.get_slot(target, name).assign(value)


class DomainCopies(DomainSpecificLayer):
    """Mixin of the Keras layers that keep per-domain copies of some weights.

    Each such weight has a *general copy*, which the ``generic`` label (``GENERIC_ID``)
    selects, and one copy per domain region, created by :meth:`add_copies`. The
    general copy is either shared (a variable, plain ``add_weight``: the Factorized
    Transformer's general copy, which every region starts equal to) or a constant
    (``generic_value``: e.g. 0 for a residual adapter's projections, 1 for a scale;
    generic then means "no domain effect" and each region is initialized on its own).

    :meth:`project` multiplies each sentence by its domain's copy of a kernel (and
    bias), :meth:`per_sentence` gathers each sentence's copy of a small weight,
    :meth:`copy_for` gives one domain's copy (to fold), :meth:`unfold` copies the
    general copies into every region. The layer calls :meth:`init_copies` in
    ``__init__`` and :meth:`add_copies` in ``build``.
    """

    def init_copies(self, num_regions=None):
        """Initializes the copy registry (call it in ``__init__``).

        Args:
          num_regions: The number of domain regions, or ``None`` to set it later
            with :meth:`set_num_regions`.
        """
        self.num_regions = None
        #: Set for XLA: see :func:`domain_matmul`.
        self.branch_free = False
        object.__setattr__(self, "_copies", {})  # Untracked: add_weight tracks the variables.
        if num_regions is not None:
            self.set_num_regions(num_regions)

    def set_num_regions(self, num_regions):
        """Sets the number of domain regions; call it before the layer is built.

        Args:
          num_regions: The number of regions (declared domains plus reserved ones).

        Raises:
          UserError: if the count is negative, or differs from the built one.
        """
        if num_regions < 0:
            raise UserError("num_regions must be >= 0, got %d" % num_regions)
        if self.built and num_regions != self.num_regions:
            raise UserError(
                "%s is built with %d domain regions: cannot set %d"
                % (self.name, self.num_regions, num_regions)
            )
        self.num_regions = num_regions

    def add_copies(self, name, shape, initializer, trainable=True, generic_value=None):
        """Creates the general copy of weight ``name`` and one ``domain_<k>_<name>`` per region.

        Args:
          name: The weight name.
          shape: The weight shape.
          initializer: The general copy's initializer (with :obj:`generic_value`: the
            initializer of each region).
          trainable: Whether the general copy is trainable (regions always are).
          generic_value: ``None``: the general copy is a shared variable ``name``, and
            every region starts equal to it (a new domain starts as generic). A
            number: the general copy is that constant (no variable), and each region
            is drawn from :obj:`initializer` on its own.

        Returns:
          The general copy (a variable), or ``None`` with :obj:`generic_value`.

        Raises:
          UserError: if the number of regions is not set.
        """
        if self.num_regions is None:
            raise UserError(
                "%s: the number of domain regions is not set: the model's initialize must call "
                "set_layer_regions() once the layer is in place (or call set_num_regions()) "
                "before building it" % self.name
            )
        if generic_value is None:
            initializer = _constant_initializer(_initial_value(initializer, shape, self.dtype))
            general = self.add_weight(name, shape, initializer=initializer, trainable=trainable)
        else:
            general = _GenericConstant(generic_value, shape, self.dtype)
        regions = [
            self.add_domain_weight(
                region,
                name,
                shape,
                initializer=(
                    initializer if generic_value is None else fresh_initializer(initializer)
                ),
            )
            for region in range(self.num_regions)
        ]
        self._copies[name] = [general] + regions
        return None if generic_value is not None else general

    def fixed_general_copies(self):
        """The general copies that are variables but not trainable (the F6 identity): a
        plain Transformer has no counterpart to restore them from."""
        return [
            v[0]
            for v in self._copies.values()
            if not isinstance(v[0], _GenericConstant) and not v[0].trainable
        ]

    def copies(self, name):
        """The weight ``name``: general copy first (a variable, or a constant tensor),
        then region 0, 1, ..."""
        general, *regions = self._copies[name]
        if isinstance(general, _GenericConstant):
            general = general.tensor()
        return [general] + regions

    def _tensor(self, copy, dtype=None):
        if isinstance(copy, _GenericConstant):
            return copy.tensor(dtype)
        return tf.cast(copy, dtype) if dtype is not None else tf.convert_to_tensor(copy)

    def _values(self, name, dtype):
        """Every copy of weight ``name`` (general first), in :obj:`dtype`."""
        return [self._tensor(v, dtype) for v in self._copies[name]]

    def copy_for(self, name, domain_id):
        """The copy of weight ``name`` that :obj:`domain_id` uses (-1: the general copy)."""
        if domain_id != domains_lib.GENERIC_ID and not 0 <= domain_id < self.num_regions:
            raise UserError(
                "domain id %d, but %s has %d regions" % (domain_id, self.name, self.num_regions)
            )
        return self._tensor(self._copies[name][domain_id + 1])

    def unfold(self, optimizer=None):
        """Copies every general copy into all regions (the curriculum's unfold step).

        Weights whose general copy is a constant (``generic_value``) are left as they are.

        Args:
          optimizer: The optimizer of the next stage (its slots created), or ``None``. Its
            slots of each general copy (Adam's moments) are copied into the regions' slots
            too: a region then continues exactly where its general copy was. Left at zero
            while the step count goes on (no bias correction left), Adam's first updates
            of a region would be several times the nominal learning rate (about 2x at the
            first step, up to about 5x after ten, still 1.7x after two hundred with the
            OpenNMT-tf betas 0.9 and 0.998).
        """
        for variables in self._copies.values():
            general = variables[0]
            if isinstance(general, _GenericConstant):
                continue
            for region in variables[1:]:
                region.assign(tf.convert_to_tensor(general))
            copy_optimizer_slots(optimizer, general, variables[1:])

    def project(
        self, inputs, kernel_name, bias_name=None, transpose=False, dtype=None, training=None
    ):
        """Projects :obj:`inputs` with each sentence's copy of a kernel (and bias).

        Args:
          inputs: A tensor ``[batch, ..., n]``.
          kernel_name: The kernel, ``[n, m]`` (``[m, n]`` with :obj:`transpose`).
          bias_name: The bias ``[m]``, or ``None``.
          transpose: Multiply by the transposed kernels.
          dtype: The computation dtype (default: the layer's compute dtype).
          training: Keras' ``training`` flag (see :func:`domain_matmul`).

        Returns:
          A tensor ``[batch, ..., m]``.
        """
        dtype = dtype or self.compute_dtype
        kernels = self._values(kernel_name, dtype)
        biases = self._values(bias_name, dtype) if bias_name else None
        return domain_matmul(
            inputs,
            kernels,
            biases,
            current_domain(),
            branch_free=self.branch_free,
            training=bool(training),
            transpose=transpose,
        )

    def per_sentence(self, name, rank, dtype=None):
        """Each sentence's copy of weight ``name``, ready to broadcast over its positions.

        For small weights (a scale, an offset, a bias vector): the copies are gathered
        per sentence. Project with :meth:`project` instead of gathering a kernel.

        Args:
          name: The weight, of shape ``S``.
          rank: The rank of the inputs the result combines with (``[batch, ..., d]``).
          dtype: The computation dtype (default: the layer's compute dtype).

        Returns:
          A tensor ``[batch] + [1] * (rank - 1 - len(S)) + S``.
        """
        dtype = dtype or self.compute_dtype
        value = tf.gather(tf.stack(self._values(name, dtype)), current_domain() + 1)
        for _ in range(rank - 1 - len(self._copies[name][0].shape)):
            value = tf.expand_dims(value, 1)
        return value


class DomainLinear(tf.keras.layers.Layer, DomainCopies):
    """Base of the factorized layers: general copies, regions, unfold and selection.

    A subclass creates each per-domain weight with :meth:`add_copies` in ``build``
    and projects with :meth:`project` in ``call``.
    """

    def __init__(self, units, activation=None, num_regions=None, **kwargs):
        """Initializes the layer.

        Args:
          units: The output size.
          activation: The activation applied to the output (``None``: linear).
          num_regions: The number of domain regions, or ``None`` to set it later
            with :meth:`set_num_regions`.
          **kwargs: Additional layer keyword arguments (``name``, ``dtype``, ...).
        """
        super().__init__(**kwargs)
        if units <= 0:
            raise UserError("%s: units must be > 0, got %d" % (type(self).__name__, units))
        self.units = units
        self.activation = tf.keras.activations.get(activation)
        self.init_copies(num_regions)

    def activate(self, outputs):
        """Applies the activation, if any."""
        return self.activation(outputs) if self.activation is not None else outputs


class DomainDense(DomainLinear):
    """A per-domain ``opennmt.layers.Dense`` (schemes F5 and, tiled, F2).

    Weights: the general copy ``kernel`` ``[input_dim, units // tile]`` and ``bias``
    (so that the layer's plain view is its generic part) and, per region ``k``,
    ``domain_<k>_kernel`` and ``domain_<k>_bias``. With ``tile > 1`` the layer is a
    multi-query K/V projection: one head of ``units // tile`` outputs repeated
    ``tile`` times.
    """

    def __init__(
        self,
        units,
        use_bias=True,
        activation=None,
        tile=1,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        num_regions=None,
        **kwargs
    ):
        """Initializes the layer.

        Args:
          units: The output size (after tiling).
          use_bias: Whether the layer has a bias.
          activation: The activation applied to the output.
          tile: How many times the projection is repeated along the output axis
            (the number of heads for a multi-query K/V projection).
          kernel_initializer: The general copy's kernel initializer.
          bias_initializer: The general copy's bias initializer.
          num_regions: The number of domain regions (or :meth:`set_num_regions`).
          **kwargs: Additional layer keyword arguments.

        Raises:
          UserError: if :obj:`units` is not a multiple of :obj:`tile`.
        """
        super().__init__(units, activation=activation, num_regions=num_regions, **kwargs)
        if tile <= 0 or units % tile != 0:
            raise UserError(
                "DomainDense: units (%d) must be a multiple of tile (%d)" % (units, tile)
            )
        self.use_bias = use_bias
        self.tile = tile
        self.kernel_initializer = kernel_initializer
        self.bias_initializer = bias_initializer

    def build(self, input_shape):
        size = self.units // self.tile
        self.kernel = self.add_copies("kernel", [input_shape[-1], size], self.kernel_initializer)
        self.bias = None
        if self.use_bias:
            self.bias = self.add_copies("bias", [size], self.bias_initializer)
        super().build(input_shape)

    def call(self, inputs, training=None):
        outputs = self.project(
            inputs, "kernel", "bias" if self.use_bias else None, training=training
        )
        outputs = self.activate(outputs)
        if self.tile > 1:
            outputs = tf.tile(outputs, [1] * (outputs.shape.rank - 1) + [self.tile])
        return outputs

    def fold(self, domain_id):
        """The weights of the plain Dense this layer equals for :obj:`domain_id`.

        Returns:
          ``{"kernel": [input_dim, units], "bias": [units]}`` (no bias without
          ``use_bias``); a multi-query layer gives its tiled kernel.
        """
        weights = {"kernel": tf.tile(self.copy_for("kernel", domain_id), [1, self.tile])}
        if self.use_bias:
            weights["bias"] = tf.tile(self.copy_for("bias", domain_id), [self.tile])
        return weights
