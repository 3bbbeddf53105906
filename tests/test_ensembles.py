"""Ensemble labels (Python and in graph), their checks, and the fit of learned weights."""

import os

import numpy as np
import tensorflow as tf
from parameterized import parameterized

from ldr_opennmt import domains as domains_lib
from ldr_opennmt import ensembles
from ldr_opennmt.errors import UserError

DOMAINS = ["medical", "religious", "software"]
LEARNED = [0.1, 0.2, 0.3, 0.4]


class EnsembleLabelTest(tf.test.TestCase):
    @parameterized.expand(
        [
            ("ens-uniform", [0.25, 0.25, 0.25, 0.25]),
            ("ens-learned", LEARNED),
            ("medical:0.5 generic:0.5", [0.5, 0, 0, 0.5]),
            ("  software:1 ", [0, 0, 1, 0]),
            ("religious:0.3333 software:0.3333 medical:0.3334", [0.3334, 0.3333, 0.3333, 0]),
            ("medical:2e-1 religious:.8", [0.2, 0.8, 0, 0]),
        ]
    )
    def test_python_and_graph_agree(self, label, expected):
        weights = ensembles.parse_label(label, DOMAINS, LEARNED)
        self.assertAllClose(weights, expected, atol=1e-6)
        self.assertAllClose(sum(weights), 1.0)
        ids, graph = ensembles.label_weights(tf.constant([label, label]), DOMAINS, LEARNED)
        self.assertAllClose(graph, [expected, expected], atol=1e-6)
        top = int(np.argmax(expected))
        self.assertAllEqual(ids, [top if top < 3 else domains_lib.GENERIC_ID] * 2)

    @parameterized.expand(
        [
            ("medical:0.7 generic:0.5", r"sum to 1\.2, not 1"),
            ("medical:-0.5 generic:1.5", "negative or invalid ensemble weight -0.5 for medical"),
            ("legal:0.5 generic:0.5", "unknown view 'legal'"),
            ("medical:0.5 medical:0.5", "view 'medical' appears twice"),
            ("medical:half generic:0.5", "weight 'half' of medical is not a number"),
            ("medical generic:1", "malformed ensemble label"),
        ]
    )
    def test_bad_labels(self, label, message):
        with self.assertRaisesRegex(UserError, "^test.domain:4: .*" + message):
            ensembles.parse_label(label, DOMAINS, LEARNED, where="test.domain:4")
        with self.assertRaisesRegex(
            tf.errors.InvalidArgumentError, "Invalid ensemble label '%s'" % label
        ):
            ensembles.label_weights(tf.constant(["ens-uniform", label]), DOMAINS, LEARNED)

    def test_learned_weights_must_be_fitted(self):
        with self.assertRaisesRegex(UserError, "^x:1: ens-learned: the model has no fitted"):
            ensembles.parse_label("ens-learned", DOMAINS, None, where="x:1")
        with self.assertRaisesRegex(tf.errors.InvalidArgumentError, "not fitted for this model"):
            ensembles.label_weights(tf.constant(["ens-learned"]), DOMAINS, None)

    def test_weight_vectors_are_checked(self):
        self.assertAllClose(ensembles.check_weights({"medical": 1}, DOMAINS, "w"), [1, 0, 0, 0])
        for weights, message in (
            ([0.5, 0.5], r"one value per view \(4: medical, religious, software, generic\)"),
            ([0.5, 0.5, 0.5, -0.5], "negative"),
            ([0.2, 0.2, 0.2, 0.2], "sum to 0.8"),
            ({"legal": 1}, "unknown view"),
        ):
            with self.assertRaisesRegex(UserError, "^data: ensemble_weights: .*" + message):
                ensembles.check_weights(weights, DOMAINS, "data: ensemble_weights")

    def test_format_round_trip(self):
        label = ensembles.format_label([0.2, 0, 0.3, 0.5], DOMAINS)
        self.assertEqual(label, "medical:0.200000 software:0.300000 generic:0.500000")
        self.assertAllClose(ensembles.parse_label(label, DOMAINS), [0.2, 0, 0.3, 0.5])

    def test_reserved_domain_names(self):
        for name in ("ens-x", "a:b"):
            with self.assertRaisesRegex(UserError, "reserved for ensemble labels"):
                domains_lib.validate_domain_names(["medical", name])

    def test_label_files_accept_ensembles_only_when_asked(self):
        path = os.path.join(self.get_temp_dir(), "labels")
        with open(path, "w") as f:
            f.write("medical\nens-uniform\nmedical:0.4 generic:0.6\n")

        def _reader(label, where):
            if not ensembles.is_ensemble_label(label):
                return False
            ensembles.parse_label(label, DOMAINS, None, where)
            return True

        ids = domains_lib.read_label_file(path, DOMAINS, ensemble=_reader)
        self.assertEqual(ids, [0, domains_lib.GENERIC_ID, domains_lib.GENERIC_ID])
        with self.assertRaisesRegex(UserError, "labels:2: unknown domain label 'ens-uniform'"):
            domains_lib.read_label_file(path, DOMAINS)


class FitWeightsTest(tf.test.TestCase):
    def test_recovers_the_mixture_that_generated_the_tokens(self):
        # Each token is drawn from one of three views chosen with probabilities TRUE; view
        # k draws word k with probability 0.9, each other word with 0.05. EM finds TRUE back.
        rng = np.random.RandomState(0)
        true = np.array([0.6, 0.3, 0.1])
        views = rng.choice(3, size=20000, p=true)
        other = (views + rng.randint(1, 3, size=20000)) % 3
        words = np.where(rng.rand(20000) < 0.9, views, other)
        probs = np.full((20000, 3), 0.05)
        probs[np.arange(20000), words] = 0.9
        weights, likelihood = ensembles.fit_weights(np.log(probs))
        self.assertAllClose(weights, true, atol=0.02)
        self.assertTrue(all(w >= 0 for w in weights))
        self.assertAllClose(sum(weights), 1.0)
        uniform = np.mean(np.log(probs.mean(axis=1)))
        self.assertGreater(likelihood, uniform)

    def test_a_view_that_explains_everything_takes_all_the_weight(self):
        log_probs = np.log([[0.9, 0.1], [0.8, 0.2], [0.7, 0.3]])
        weights, _ = ensembles.fit_weights(log_probs, iterations=2000, tolerance=0)
        self.assertGreater(weights[0], 0.99)


if __name__ == "__main__":
    tf.test.main()
