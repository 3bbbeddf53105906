"""What OpenNMT-tf and the package take from ``tensorflow_addons.seq2seq``, written here.

* :func:`tile_batch`: beam search's copies of each batch entry (OpenNMT-tf's decoding, the
  package's ensembles and RNN families);
* :class:`BahdanauAttention` (additive, the LDR paper's RNN baseline) and
  :class:`LuongAttention` (multiplicative, OpenNMT-tf's default), and :class:`AttentionWrapper`,
  the RNN cell that attends after each step, as OpenNMT-tf's ``AttentionalRNNDecoder`` builds
  and calls them.

The computations, the state's fields and the attributes that name the variables
(``memory_layer``, ``query_layer``, ``attention_v``, ``_cell``, ``_attention_layers``,
``_attention_mechanisms``) are those of TensorFlow Addons 0.21, so that a checkpoint written on
one stack restores on the other and the outputs agree (tests/upstream/test_addons.py compares
them with TensorFlow Addons where it is installed); so are the assertions and identities of its
graph, since TensorFlow's graph optimizer fuses operations by the graph's shape, which changes
the rounding of the gradients (without them a training drifted by 1e-6 within 30 steps;
docs/installation.md). Left out, since nothing here uses them: monotonic attention, normalized
Bahdanau and scaled Luong energies, several attention mechanisms in one wrapper, alignment
history.
"""

import collections

import tensorflow as tf


def _tile(tensor, multiplier):
    tensor = tf.convert_to_tensor(tensor)
    if tensor.shape.ndims is None or tensor.shape.ndims < 1:
        raise ValueError("tile_batch needs tensors of rank >= 1, not %s" % tensor.shape)
    shape = tf.shape(tensor)
    # [batch, ...] -> [batch, multiplier, ...] -> [batch * multiplier, ...]: each entry's copies
    # side by side, as beam search lays out its hypotheses.
    tiling = [1] * (tensor.shape.ndims + 1)
    tiling[1] = multiplier
    tiled = tf.tile(tf.expand_dims(tensor, 1), tiling)
    tiled = tf.reshape(tiled, tf.concat(([shape[0] * multiplier], shape[1:]), 0))
    static_batch = None
    if tensor.shape[0] is not None and isinstance(multiplier, int):
        static_batch = tensor.shape[0] * multiplier
    tiled.set_shape(tf.TensorShape([static_batch]).concatenate(tensor.shape[1:]))
    return tiled


def tile_batch(t, multiplier, name=None):
    """Repeats each batch entry of every tensor of :obj:`t` :obj:`multiplier` times in a row.

    Args:
      t: A tensor or a nested structure of tensors, batch first.
      multiplier: How many copies of each entry.
      name: The name scope of the operations.

    Returns:
      The same structure, each tensor ``[batch * multiplier, ...]``.
    """
    with tf.name_scope(name or "tile_batch"):
        return tf.nest.map_structure(lambda tensor: _tile(tensor, multiplier), t)


def _masked_memory(memory, memory_sequence_length):
    memory = tf.convert_to_tensor(memory)
    if not memory.shape[2:].is_fully_defined():
        raise ValueError("the attention's memory needs a known depth, not %s" % memory.shape)
    if memory_sequence_length is None:
        return memory
    mask = tf.sequence_mask(memory_sequence_length, maxlen=tf.shape(memory)[1], dtype=memory.dtype)
    return memory * tf.expand_dims(mask, -1)


class AttentionMechanism(tf.keras.layers.Layer):
    """An attention over a memory (the encoder's outputs) set by :meth:`setup_memory`.

    Called with ``[query, state]``, it returns ``(alignments, next_state)``: a probability per
    memory position (0 past each entry's length).
    """

    def __init__(self, units, query_layer=None, memory_layer=None, **kwargs):
        self.query_layer = query_layer
        self.memory_layer = memory_layer
        super().__init__(**kwargs)
        self.units = units
        self.values = None
        self.keys = None
        self.batch_size = None
        self._memory_sequence_length = None
        self._alignments_size = None

    @property
    def memory_initialized(self):
        """Whether :meth:`setup_memory` was called."""
        return self.values is not None

    def setup_memory(self, memory, memory_sequence_length=None, memory_mask=None):
        """Sets the memory to attend to.

        Args:
          memory: The encoder's outputs, ``[batch, time, depth]``.
          memory_sequence_length: Each entry's length (positions past it get no attention).
          memory_mask: Not supported (the lengths are); must be ``None``.
        """
        if memory_mask is not None:
            raise ValueError("memory_mask is not supported by the package's attention")
        with tf.name_scope(self.name or "AttentionMechanismInit"):
            self.values = _masked_memory(memory, memory_sequence_length)
            self.keys = self.memory_layer(self.values) if self.memory_layer else self.values
            self.batch_size = self.keys.shape[0] or tf.shape(self.keys)[0]
            self._alignments_size = self.keys.shape[1] or tf.shape(self.keys)[1]
            self._memory_sequence_length = memory_sequence_length

    def build(self, input_shape):
        if self.query_layer is not None and not self.query_layer.built:
            self.query_layer.build(input_shape[0])
        super().build(input_shape)

    def call(self, inputs):
        if not self.memory_initialized:
            raise ValueError("the attention was queried before its memory was set")
        query = inputs[0]  # inputs[1], the previous alignments: unused by these energies.
        score = self._score(query)
        if self._memory_sequence_length is not None:
            positive = tf.debugging.assert_positive(
                self._memory_sequence_length, message="every memory length must be > 0"
            )
            with tf.control_dependencies([positive]):
                mask = tf.sequence_mask(self._memory_sequence_length, maxlen=tf.shape(score)[1])
            score = tf.where(mask, score, score.dtype.min * tf.ones_like(score))
        alignments = tf.nn.softmax(score)
        return alignments, alignments

    def _score(self, query):
        raise NotImplementedError()

    @property
    def alignments_size(self):
        """The memory's length (static where known)."""
        if isinstance(self._alignments_size, int):
            return self._alignments_size
        return tf.TensorShape([None])

    @property
    def state_size(self):
        """The size of the state carried from step to step: the alignments."""
        return self.alignments_size

    def initial_alignments(self, batch_size, dtype):
        """Zeros, ``[batch_size, memory length]``."""
        return tf.zeros([batch_size, self._alignments_size], dtype=dtype)

    def initial_state(self, batch_size, dtype):
        """The state before the first step (:meth:`initial_alignments`)."""
        return self.initial_alignments(batch_size, dtype)

    def get_config(self):
        return dict(super().get_config(), units=self.units)


class LuongAttention(AttentionMechanism):
    """Multiplicative attention (Luong et al., 2015): the score is ``query . W memory``."""

    def __init__(
        self,
        units,
        memory=None,
        memory_sequence_length=None,
        name="LuongAttention",
        dtype=None,
        **kwargs
    ):
        memory_layer = tf.keras.layers.Dense(
            units, name="memory_layer", use_bias=False, dtype=dtype
        )
        super().__init__(units, memory_layer=memory_layer, name=name, dtype=dtype, **kwargs)
        if memory is not None:
            self.setup_memory(memory, memory_sequence_length)

    def _score(self, query):
        if query.shape[-1] != self.keys.shape[-1]:
            raise ValueError(
                "LuongAttention: the query has %s units and the keys %s"
                % (query.shape[-1], self.keys.shape[-1])
            )
        return tf.squeeze(tf.matmul(tf.expand_dims(query, 1), self.keys, transpose_b=True), [1])


class BahdanauAttention(AttentionMechanism):
    """Additive attention (Bahdanau et al., 2015): the score is
    ``v . tanh(W_query query + W_memory memory)``."""

    def __init__(
        self,
        units,
        memory=None,
        memory_sequence_length=None,
        kernel_initializer="glorot_uniform",
        name="BahdanauAttention",
        dtype=None,
        **kwargs
    ):
        query_layer = tf.keras.layers.Dense(units, name="query_layer", use_bias=False, dtype=dtype)
        memory_layer = tf.keras.layers.Dense(
            units, name="memory_layer", use_bias=False, dtype=dtype
        )
        super().__init__(
            units,
            query_layer=query_layer,
            memory_layer=memory_layer,
            name=name,
            dtype=dtype,
            **kwargs
        )
        self.kernel_initializer = tf.keras.initializers.get(kernel_initializer)
        self.attention_v = None
        if memory is not None:
            self.setup_memory(memory, memory_sequence_length)

    def build(self, input_shape):
        super().build(input_shape)
        if self.attention_v is None:
            self.attention_v = self.add_weight(
                "attention_v", [self.units], dtype=self.dtype, initializer=self.kernel_initializer
            )

    def _score(self, query):
        processed = tf.expand_dims(self.query_layer(query), 1)
        return tf.reduce_sum(self.attention_v * tf.tanh(self.keys + processed), [2])


class AttentionWrapperState(
    collections.namedtuple(
        "AttentionWrapperState",
        ("cell_state", "attention", "alignments", "alignment_history", "attention_state"),
    )
):
    """The state of an :class:`AttentionWrapper`: the wrapped cell's state, the last attention
    output, the last alignments, (no) alignment history, the mechanism's state."""

    def clone(self, **kwargs):
        """This state with the fields of :obj:`kwargs` replaced (each of the same shape)."""

        def same_shape(old, new):
            if isinstance(old, tf.Tensor) and isinstance(new, tf.Tensor):
                if tf.executing_eagerly():
                    if old.shape.as_list() != new.shape.as_list():
                        raise ValueError(
                            "AttentionWrapperState.clone: shape %s replaced by %s"
                            % (old.shape, new.shape)
                        )
                    return new
                check = tf.debugging.assert_equal(tf.shape(new), tf.shape(old))
                with tf.control_dependencies([check]):
                    return tf.identity(new)
            return new

        return tf.nest.map_structure(same_shape, self, super()._replace(**kwargs))


class AttentionWrapper(tf.keras.layers.AbstractRNNCell):
    """An RNN cell followed by an attention over a memory (one mechanism).

    Each step feeds ``[inputs, previous attention]`` to the cell, scores the cell's output
    against the memory, and outputs ``attention_layer([cell output, context])`` (or the context
    without an attention layer), which is also carried to the next step.
    """

    def __init__(
        self,
        cell,
        attention_mechanism,
        attention_layer_size=None,
        alignment_history=False,
        cell_input_fn=None,
        output_attention=True,
        initial_cell_state=None,
        name=None,
        attention_layer=None,
        **kwargs
    ):
        super().__init__(name=name, **kwargs)
        if isinstance(attention_mechanism, (list, tuple)):
            raise ValueError("the package's AttentionWrapper takes one attention mechanism")
        if alignment_history or initial_cell_state is not None:
            raise ValueError(
                "the package's AttentionWrapper keeps no alignment history and takes the"
                " initial cell state from get_initial_state"
            )
        if attention_layer_size is not None and attention_layer is not None:
            raise ValueError("give attention_layer_size or attention_layer, not both")
        if attention_layer_size is not None:
            attention_layer = tf.keras.layers.Dense(
                attention_layer_size,
                name="attention_layer",
                use_bias=False,
                dtype=kwargs.get("dtype"),
            )
        # In TensorFlow Addons' order: the layers' weights are listed (model.weights) in the
        # order the attributes were set.
        self._attention_layers = [attention_layer] if attention_layer is not None else None
        self._cell = cell
        self._attention_mechanisms = [attention_mechanism]
        self._cell_input_fn = cell_input_fn or (lambda inputs, att: tf.concat([inputs, att], -1))
        self._output_attention = output_attention
        self._attention_layer_size = None

    @property
    def _mechanism(self):
        return self._attention_mechanisms[0]

    def _get_attention_layer_size(self):
        if self._attention_layer_size is None:
            if not self._mechanism.memory_initialized:
                raise ValueError("the attention's memory must be set before the wrapper is used")
            depth = self._mechanism.values.shape[-1]
            if self._attention_layers is None:
                self._attention_layer_size = depth
            else:
                shape = self._attention_layers[0].compute_output_shape(
                    [None, self._cell.output_size + depth]
                )
                self._attention_layer_size = shape[-1]
        return self._attention_layer_size

    @property
    def output_size(self):
        if self._output_attention:
            return self._get_attention_layer_size()
        return self._cell.output_size

    @property
    def state_size(self):
        return AttentionWrapperState(
            cell_state=self._cell.state_size,
            attention=self._get_attention_layer_size(),
            alignments=self._mechanism.alignments_size,
            attention_state=self._mechanism.state_size,
            alignment_history=(),
        )

    def get_initial_state(self, inputs=None, batch_size=None, dtype=None):
        if inputs is not None:
            batch_size, dtype = tf.shape(inputs)[0], inputs.dtype
        with tf.name_scope(type(self).__name__ + "ZeroState"):
            cell_state = self._cell.get_initial_state(batch_size=batch_size, dtype=dtype)
            check = tf.debugging.assert_equal(
                batch_size,
                self._mechanism.batch_size,
                message="AttentionWrapper: the memory's batch size differs from the state's"
                " (beam search: tile the memory with tile_batch)",
            )
            with tf.control_dependencies([check]):
                cell_state = tf.nest.map_structure(tf.identity, cell_state)
            return AttentionWrapperState(
                cell_state=cell_state,
                attention=tf.zeros([batch_size, self._get_attention_layer_size()], dtype=dtype),
                alignments=self._mechanism.initial_alignments(batch_size, dtype),
                attention_state=self._mechanism.initial_state(batch_size, dtype),
                alignment_history=(),
            )

    def call(self, inputs, state, **kwargs):
        if not isinstance(state, AttentionWrapperState):
            state = AttentionWrapperState(*state)
        cell_state = state.cell_state
        cell_output, next_cell_state = self._cell(
            self._cell_input_fn(inputs, state.attention), cell_state, **kwargs
        )
        next_cell_state = tf.nest.pack_sequence_as(cell_state, tf.nest.flatten(next_cell_state))
        check = tf.debugging.assert_equal(
            cell_output.shape[0] or tf.shape(cell_output)[0],
            self._mechanism.batch_size,
            message="AttentionWrapper: the memory's batch size differs from the query's"
            " (beam search: tile the memory with tile_batch)",
        )
        with tf.control_dependencies([check]):
            cell_output = tf.identity(cell_output, name="checked_cell_output")
        alignments, next_attention_state = self._mechanism([cell_output, state.attention_state])
        context = tf.squeeze(tf.matmul(tf.expand_dims(alignments, 1), self._mechanism.values), [1])
        if self._attention_layers is not None:
            attention = self._attention_layers[0](tf.concat([cell_output, context], 1))
        else:
            attention = context
        next_state = AttentionWrapperState(
            cell_state=next_cell_state,
            attention=attention,
            alignments=alignments,
            attention_state=next_attention_state,
            alignment_history=(),
        )
        return (attention if self._output_attention else cell_output), next_state
