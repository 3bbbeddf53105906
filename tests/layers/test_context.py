import threading

import tensorflow as tf

from ldr_opennmt.layers import context, mixing


class ContextTest(tf.test.TestCase):
    def test_outside_scope_raises(self):
        with self.assertRaisesRegex(RuntimeError, "outside a domain scope"):
            context.current_domain()

    def test_nested_scopes_restore(self):
        with context.domain_scope([0, 1]):
            with context.domain_scope([2, 2, 2]):
                self.assertAllEqual(context.current_domain(), [2, 2, 2])
            self.assertAllEqual(context.current_domain(), [0, 1])
        with self.assertRaises(RuntimeError):
            context.current_domain()

    def test_scope_restored_on_error(self):
        with self.assertRaises(ValueError):
            with context.domain_scope([0]):
                raise ValueError()
        with self.assertRaises(RuntimeError):
            context.current_domain()

    def test_one_stack_carries_every_kind_of_frame(self):
        recorder = context.Recorder()
        with context.domain_scope([0]), recorder.collect() as records:
            with mixing.mixing_scope(tf.ones([1, 3])):
                keys = [key for key, _ in context.open_frames()]
                self.assertEqual(keys, [context.DOMAIN, recorder, mixing.MIXING])
                recorder.record("a")
                with context.domain_scope([1, 1]):
                    # Another kind on top: each reads its innermost frame.
                    self.assertAllEqual(context.current_domain(), [1, 1])
                    self.assertAllEqual(mixing.current_mixing().proportions, [[1, 1, 1]])
                    recorder.record("b")
        self.assertEqual(records, ["a", "b"])
        self.assertEqual(context.open_frames(), [])

    def test_every_scope_is_restored_on_error(self):
        recorder = context.Recorder()
        with self.assertRaises(ValueError):
            with context.domain_scope([0]), recorder.collect():
                with mixing.mixing_scope(tf.ones([1, 3])), recorder.pause():
                    raise ValueError()
        self.assertEqual(context.open_frames(), [])
        with self.assertRaisesRegex(RuntimeError, "outside a mixing scope"):
            mixing.current_mixing()
        recorder.record("nothing open: dropped")

    def test_scopes_exited_out_of_order_remove_their_own_frame(self):
        outer, inner = context.push_frame("a", 1), context.push_frame("b", 2)
        outer.__enter__()
        inner.__enter__()
        outer.__exit__(None, None, None)
        self.assertEqual(context.open_frames(), [("b", 2)])
        inner.__exit__(None, None, None)
        self.assertEqual(context.open_frames(), [])

    def test_innermost_frame(self):
        with self.assertRaises(LookupError):
            context.innermost_frame("mine")
        self.assertIsNone(context.innermost_frame("mine", None))
        with context.push_frame("mine", 1), context.push_frame("other", 2):
            with context.push_frame("mine", 3) as value:
                self.assertEqual(value, 3)
                self.assertEqual(context.innermost_frame("mine"), 3)
            self.assertEqual(context.innermost_frame("mine"), 1)

    def test_frames_are_per_thread(self):
        # MirroredStrategy traces its replicas in parallel threads: each sees its own.
        recorder = context.Recorder()
        seen = {}
        entered, release = threading.Event(), threading.Event()

        def _replica():
            with context.domain_scope([7]), recorder.collect() as records:
                entered.set()
                release.wait(10)
                recorder.record("replica")
                seen["domain"] = context.current_domain().numpy().tolist()
            seen["records"] = records

        with context.domain_scope([1]), recorder.collect() as records:
            thread = threading.Thread(target=_replica)
            thread.start()
            self.assertTrue(entered.wait(10))
            self.assertAllEqual(context.current_domain(), [1])
            self.assertEqual([key for key, _ in context.open_frames()], [context.DOMAIN, recorder])
            recorder.record("main")
            release.set()
            thread.join(10)
        self.assertEqual(seen, {"domain": [7], "records": ["replica"]})
        self.assertEqual(records, ["main"])

    def test_one_hot_follows_dtype_and_rank(self):
        with context.domain_scope([1, -1]):
            mask = context.domain_one_hot(3, tf.float16, rank=3)
        self.assertEqual(mask.dtype, tf.float16)
        self.assertAllEqual(mask, [[[0, 1, 0]], [[0, 0, 0]]])


if __name__ == "__main__":
    tf.test.main()
