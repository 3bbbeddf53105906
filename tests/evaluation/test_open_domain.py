"""The weights of ensembles of domain views (their end-to-end tests are ``ldr-eval``'s, in
test_evaluate.py, and the classifier's)."""

import ast
import inspect

import tensorflow as tf

from ldr_opennmt.evaluation import open_domain


class ImportsTest(tf.test.TestCase):
    def test_no_import_circle_with_evaluate(self):
        # evaluate imports this module: it takes System from systems, not from evaluate.
        tree = ast.parse(inspect.getsource(open_domain))
        imported = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                imported.add(node.module)
                imported.update("%s.%s" % (node.module, alias.name) for alias in node.names)
            elif isinstance(node, ast.Import):
                imported.update(alias.name for alias in node.names)
        self.assertNotIn("ldr_opennmt.evaluation.evaluate", imported)
        self.assertIn("ldr_opennmt.evaluation.systems", imported)


if __name__ == "__main__":
    tf.test.main()
