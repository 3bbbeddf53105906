import tensorflow as tf

from ldr_opennmt.layers import context


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

    def test_one_hot_follows_dtype_and_rank(self):
        with context.domain_scope([1, -1]):
            mask = context.domain_one_hot(3, tf.float16, rank=3)
        self.assertEqual(mask.dtype, tf.float16)
        self.assertAllEqual(mask, [[[0, 1, 0]], [[0, 0, 0]]])


if __name__ == "__main__":
    tf.test.main()
