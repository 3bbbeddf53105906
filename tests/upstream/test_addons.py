"""The package's replacement for TensorFlow Addons (ldr_opennmt/upstream/addons): the same
outputs, updates and checkpoint names as TensorFlow Addons 0.21 where that is installed (the
Python 3.11 stack), and the import hook that puts it in place where it is not (issue 78)."""

import importlib.util
import os
import subprocess
import sys
import textwrap
import unittest

import numpy as np
import tensorflow as tf

from ldr_opennmt.upstream import addons_hook
from ldr_opennmt.upstream.addons import missing, optimizers, seq2seq

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TFA = importlib.util.find_spec("tensorflow_addons") is not None and not addons_hook.active()
if TFA:
    import tensorflow_addons as tfa


def _memory(batch=3, time=5, depth=6, seed=0):
    rng = np.random.default_rng(seed)
    memory = tf.constant(rng.normal(size=(batch, time, depth)), tf.float32)
    return memory, tf.constant([5, 2, 3])


def _wrapper(module, mechanism_class, units=6):
    """An LSTM cell wrapped with :obj:`mechanism_class` as OpenNMT-tf's AttentionalRNNDecoder
    builds it (a tanh attention layer without bias), inside a Module named as the decoder."""
    holder = tf.Module()
    holder.attention_mechanism = mechanism_class(units)
    holder.cell = module.AttentionWrapper(
        tf.keras.layers.LSTMCell(units),
        holder.attention_mechanism,
        attention_layer=tf.keras.layers.Dense(units, use_bias=False, activation=tf.math.tanh),
    )
    return holder


def _run(holder, memory, lengths, steps=4, seed=1):
    holder.attention_mechanism.setup_memory(memory, memory_sequence_length=lengths)
    state = holder.cell.get_initial_state(batch_size=memory.shape[0], dtype=tf.float32)
    rng = np.random.default_rng(seed)
    outputs = []
    for _ in range(steps):
        inputs = tf.constant(rng.normal(size=(memory.shape[0], 4)), tf.float32)
        output, state = holder.cell(inputs, state)
        outputs.append(output.numpy())
    return np.stack(outputs), state


class TileBatchTest(unittest.TestCase):
    def test_copies_each_entry_in_a_row(self):
        t = {"a": tf.constant([[1, 2], [3, 4]]), "b": tf.constant([7, 8])}
        tiled = seq2seq.tile_batch(t, 3)
        self.assertEqual(tiled["a"].numpy().tolist(), [[1, 2]] * 3 + [[3, 4]] * 3)
        self.assertEqual(tiled["b"].numpy().tolist(), [7, 7, 7, 8, 8, 8])
        self.assertEqual(tiled["a"].shape.as_list(), [6, 2])

    @unittest.skipUnless(TFA, "TensorFlow Addons is not installed (the Python 3.12 stack)")
    def test_equals_tensorflow_addons(self):
        t = tf.random.normal([2, 3, 4])
        np.testing.assert_array_equal(seq2seq.tile_batch(t, 5), tfa.seq2seq.tile_batch(t, 5))


class AttentionTest(unittest.TestCase):
    def test_alignments_are_probabilities_within_each_length(self):
        for mechanism_class in (seq2seq.BahdanauAttention, seq2seq.LuongAttention):
            holder = _wrapper(seq2seq, mechanism_class)
            memory, lengths = _memory()
            outputs, state = _run(holder, memory, lengths)
            alignments = state.alignments.numpy()
            np.testing.assert_allclose(alignments.sum(axis=1), 1.0, rtol=1e-5)
            self.assertEqual(alignments[1, 2:].tolist(), [0.0] * 3)  # Past length 2.
            self.assertEqual(outputs.shape, (4, 3, 6))
            self.assertTrue(np.all(np.abs(outputs) <= 1.0))  # The tanh attention layer.

    def test_refuses_what_it_leaves_out(self):
        mechanism = seq2seq.BahdanauAttention(4)
        cell = tf.keras.layers.LSTMCell(4)
        with self.assertRaisesRegex(ValueError, "alignment history"):
            seq2seq.AttentionWrapper(cell, mechanism, alignment_history=True)
        with self.assertRaisesRegex(ValueError, "one attention mechanism"):
            seq2seq.AttentionWrapper(cell, [mechanism, mechanism])
        with self.assertRaisesRegex(AttributeError, "tensorflow_addons.LayerNormLSTMCell.*3.11"):
            missing.LayerNormLSTMCell

    @unittest.skipUnless(TFA, "TensorFlow Addons is not installed (the Python 3.12 stack)")
    def test_equals_tensorflow_addons_and_restores_its_checkpoint(self):
        for ours, theirs in (
            (seq2seq.BahdanauAttention, tfa.seq2seq.BahdanauAttention),
            (seq2seq.LuongAttention, tfa.seq2seq.LuongAttention),
        ):
            with self.subTest(ours.__name__):
                memory, lengths = _memory()
                reference = _wrapper(tfa.seq2seq, theirs)
                expected, expected_state = _run(reference, memory, lengths)
                path = tf.train.Checkpoint(decoder=reference).write(
                    os.path.join(self.enterContext(_tmp()), "ckpt")
                )
                holder = _wrapper(seq2seq, ours)
                _run(holder, memory, lengths, steps=1)  # Builds the variables.
                # Every variable of TensorFlow Addons' wrapper restores into ours by name.
                tf.train.Checkpoint(decoder=holder).read(path).assert_consumed()
                outputs, state = _run(holder, memory, lengths)
                np.testing.assert_allclose(outputs, expected, rtol=1e-6, atol=1e-6)
                np.testing.assert_allclose(state.alignments, expected_state.alignments, atol=1e-6)
                np.testing.assert_allclose(
                    state.cell_state[0], expected_state.cell_state[0], atol=1e-6
                )

    @unittest.skipUnless(TFA, "TensorFlow Addons is not installed (the Python 3.12 stack)")
    def test_trains_bit_for_bit_as_tensorflow_addons(self):
        # A compiled training step of the wrapper from the same weights: the same updates to
        # the last bit. (Whole models are compared by ldr-experiments stack-parity.)
        memory, lengths = _memory()
        trained = []
        for module, mechanism_class in (
            (tfa.seq2seq, tfa.seq2seq.BahdanauAttention),
            (seq2seq, seq2seq.BahdanauAttention),
        ):
            holder = _wrapper(module, mechanism_class)
            _run(holder, memory, lengths, steps=1)
            found = holder.cell.trainable_variables + holder.attention_mechanism.variables
            variables = sorted({v.ref(): v for v in found}.values(), key=lambda v: v.name)
            rng = np.random.default_rng(3)
            for variable in variables:
                variable.assign(rng.normal(scale=0.3, size=variable.shape).astype(np.float32))
            optimizer = tf.keras.optimizers.legacy.Adam(0.01)
            inputs = tf.constant(rng.normal(size=(4, 3, 4)), tf.float32)

            @tf.function
            def step():
                with tf.GradientTape() as tape:
                    holder.attention_mechanism.setup_memory(memory, lengths)
                    state = holder.cell.get_initial_state(batch_size=3, dtype=tf.float32)
                    loss = 0.0
                    for t in range(4):
                        output, state = holder.cell(inputs[t], state)
                        loss += tf.reduce_sum(tf.square(output - 0.5))
                gradients = tape.gradient(loss, variables)
                optimizer.apply_gradients(zip(gradients, variables))
                return loss

            for _ in range(5):
                step()
            trained.append([v.numpy() for v in variables])
        for theirs, ours in zip(*trained):
            np.testing.assert_array_equal(ours, theirs)


class _tmp:
    def __enter__(self):
        import tempfile

        self._dir = tempfile.TemporaryDirectory()
        return self._dir.name

    def __exit__(self, *exc):
        self._dir.cleanup()


def _updates(optimizer, sparse, steps=3):
    """The variable after :obj:`steps` updates of :obj:`optimizer` with fixed gradients."""
    var = tf.Variable(np.arange(12, dtype=np.float32).reshape(4, 3) / 10)
    for step in range(steps):
        values = tf.constant(np.full((2, 3), 0.5 + step, np.float32))
        if sparse:
            grad = tf.IndexedSlices(values, tf.constant([0, 2]), tf.constant([4, 3]))
        else:
            grad = tf.concat([values, -values], 0)
        optimizer.apply_gradients([(grad, var)])
    return var.numpy()


class OptimizersTest(unittest.TestCase):
    def test_lazy_adam_leaves_rows_out_of_the_batch(self):
        var = _updates(optimizers.LazyAdam(0.1), sparse=True)
        initial = np.arange(12, dtype=np.float32).reshape(4, 3) / 10
        np.testing.assert_array_equal(var[[1, 3]], initial[[1, 3]])
        self.assertTrue(np.all(var[[0, 2]] < initial[[0, 2]]))
        # Dense gradients: Adam's update exactly.
        np.testing.assert_array_equal(
            _updates(optimizers.LazyAdam(0.1), sparse=False),
            _updates(tf.keras.optimizers.legacy.Adam(0.1), sparse=False),
        )

    def test_weight_decay_shrinks_before_the_update(self):
        sgd = optimizers.extend_with_decoupled_weight_decay(tf.keras.optimizers.legacy.SGD)
        var = tf.Variable([1.0, -2.0])
        sgd(weight_decay=0.1, learning_rate=0.5).apply_gradients([(tf.constant([1.0, 1.0]), var)])
        # (1 - 0.1) * w - 0.5 * g
        np.testing.assert_allclose(var.numpy(), [0.9 - 0.5, -1.8 - 0.5])
        excluded = optimizers.AdamW(0.1, learning_rate=0.0, exclude_from_weight_decay=["bias"])
        kept, decayed = tf.Variable([1.0], name="bias"), tf.Variable([1.0], name="kernel")
        excluded.apply_gradients([(tf.constant([1.0]), kept), (tf.constant([1.0]), decayed)])
        self.assertEqual((kept.numpy()[0], decayed.numpy()[0]), (1.0, np.float32(0.9)))

    @unittest.skipUnless(TFA, "TensorFlow Addons is not installed (the Python 3.12 stack)")
    def test_equal_tensorflow_addons(self):
        for sparse in (False, True):
            np.testing.assert_array_equal(
                _updates(optimizers.LazyAdam(0.1), sparse),
                _updates(tfa.optimizers.LazyAdam(0.1), sparse),
            )
            # (TensorFlow Addons' own LazyAdam cannot take weight decay on sparse gradients: its
            # sparse update lacks the apply_state argument the extension passes.)
            adam = tf.keras.optimizers.legacy.Adam
            theirs = tfa.optimizers.extend_with_decoupled_weight_decay(adam)
            ours = optimizers.extend_with_decoupled_weight_decay(adam)
            np.testing.assert_array_equal(
                _updates(ours(0.01, learning_rate=0.1), sparse),
                _updates(theirs(0.01, learning_rate=0.1), sparse),
            )


#: How many of the hook's importers a plain start of this Python installs (1 on the 3.12 stack,
#: whose venv has the .pth file; 0 elsewhere).
STARTUP_HOOKS = subprocess.run(
    [
        sys.executable,
        "-c",
        "import sys; print(sum(getattr(f, 'ldr_opennmt_addons', False)" " for f in sys.meta_path))",
    ],
    cwd="/",
    capture_output=True,
    text=True,
    check=True,
).stdout.strip()


class HookTest(unittest.TestCase):
    def test_answers_tensorflow_addons_only_where_none_is_installed(self):
        # A process where no tensorflow_addons is installed (the path finder does not see it),
        # as on Python 3.12: OpenNMT-tf then imports the replacement, with Keras 2.
        script = textwrap.dedent("""
            import importlib.machinery, json, os, sys
            class Hidden(importlib.machinery.PathFinder):
                @classmethod
                def find_spec(cls, name, path=None, target=None):
                    if name.split(".")[0] == "tensorflow_addons":
                        return None
                    return super().find_spec(name, path, target)
            sys.meta_path = [Hidden if f is importlib.machinery.PathFinder else f
                             for f in sys.meta_path]
            os.environ.pop("TF_USE_LEGACY_KERAS", None)
            from ldr_opennmt.upstream import addons_hook
            addons_hook.install()
            from opennmt.decoders import rnn_decoder
            from opennmt.optimizers import utils
            print(json.dumps([rnn_decoder.tfa.__name__,
                              utils.DecoupledWeightDecayExtension.__module__,
                              utils.get_optimizer_class("LazyAdam").__module__,
                              os.environ["TF_USE_LEGACY_KERAS"], addons_hook.active()]))
            """)
        result = subprocess.run(
            [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=True
        )
        replacement = "ldr_opennmt.upstream.addons"
        self.assertEqual(
            result.stdout.strip().splitlines()[-1],
            '["%s", "%s.optimizers", "%s.optimizers", "1", true]'
            % (replacement, replacement, replacement),
        )

    def test_the_pth_file_installs_the_hook_at_start_and_tolerates_a_moved_checkout(self):
        with _tmp() as site:
            path = addons_hook.write_pth(site)
            script = (
                "import os, site, sys; os.environ.pop('TF_USE_LEGACY_KERAS', None);"
                " site.addsitedir(%r);"
                " print(sum(getattr(f, 'ldr_opennmt_addons', False) for f in sys.meta_path),"
                " os.environ.get('TF_USE_LEGACY_KERAS'), 'ldr_opennmt' in sys.modules)" % site
            )
            result = subprocess.run(
                [sys.executable, "-c", script], cwd="/", capture_output=True, text=True
            )
            # One importer, the Keras 2 switch, and the package itself not imported.
            self.assertEqual(result.stdout.split(), ["1", "1", "False"], result.stderr)
            with open(path, encoding="utf-8") as f:
                line = f.read()
            with open(path, "w", encoding="utf-8") as f:
                f.write(line.replace(os.path.join(ROOT, "ldr_opennmt"), "/nonexistent"))
            result = subprocess.run(
                [sys.executable, "-c", script], cwd="/", capture_output=True, text=True
            )
            # Nothing added, nothing said (on the 3.12 stack, the venv's own .pth installed it).
            self.assertEqual((result.stdout.split()[0], result.stderr), (STARTUP_HOOKS, ""))

    def test_start_up_lines_follow_the_log_level(self):
        # What TensorFlow 2.21 writes to the process's standard error while it imports: the
        # lines the level hides go, the others are written back in order.
        script = textwrap.dedent("""
            import os, sys
            from ldr_opennmt.upstream import addons_hook
            with addons_hook._start_up_lines_filtered():
                os.write(2, b"WARNING: All log messages before absl::InitializeLog() is called\\n")
                os.write(2, b"I0000 00:00:1.1 8 port.cc:153] oneDNN custom operations are on\\n")
                os.write(2, b"E0000 00:00:1.2 8 cuda_platform.cc:52] failed call to cuInit\\n")
                os.write(2, b"W0000 00:00:1.3 8 x.cc:1] a warning\\n")
                os.write(2, b"E0000 00:00:1.4 8 x.cc:2] an error\\n")
                sys.stderr.write("a Python warning\\n")
            """)
        seen = {}
        for level in ("0", "1", "2"):
            env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL=level)
            result = subprocess.run(
                [sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True
            )
            seen[level] = [line.split("] ")[-1] for line in result.stderr.splitlines()]
        self.assertEqual(len(seen["0"]), 6)
        self.assertEqual(seen["1"], ["a warning", "an error", "a Python warning"])
        self.assertEqual(seen["2"], ["an error", "a Python warning"])

    @unittest.skipUnless(TFA, "TensorFlow Addons is not installed (the Python 3.12 stack)")
    def test_never_shadows_an_installed_tensorflow_addons(self):
        script = (
            "from ldr_opennmt.upstream import addons_hook; addons_hook.install();"
            " import tensorflow_addons as t; print(t.__name__, addons_hook.active())"
        )
        result = subprocess.run(
            [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=True
        )
        self.assertEqual(result.stdout.split()[-2:], ["tensorflow_addons", "False"])


if __name__ == "__main__":
    unittest.main()
