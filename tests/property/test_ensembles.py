"""Ensemble labels and weights: the Python readers, and the SavedModel's domain input.

The SavedModel reads its ``domain`` input with the graph of
:meth:`ldr_opennmt.inputters.DomainInputter.make_features`; it is checked here on a bare
inputter, without a model: it must accept exactly the labels the Python readers accept
(``ldr-translate`` checks labels with those before it calls the SavedModel), with the same
weights, and refuse the others with its own assertion, never another error.
"""

import json
import math
import os
import shutil
import tempfile
import unittest

import numpy as np
import tensorflow as tf
from hypothesis import assume, example, given
from hypothesis import strategies as st

from ldr_opennmt import domains, ensembles
from ldr_opennmt.inputters import DomainInputter
from tests.property.common import read, tricky_text, yaml_scalars, yaml_values

DOMAINS = ["a", "b"]
VIEWS = ensembles.view_names(DOMAINS)
LEARNED = [0.25, 0.25, 0.5]

weights = st.one_of(
    st.floats(0, 1.5).map(repr),
    st.floats(0, 1).map(lambda w: "%.6f" % w),
    st.sampled_from(
        ["0.5", "1", "1.", ".5", "+.5", "-0", "-0.5", "1e0", "5E-1", "1e400", "1e39", "1e-50"]
        + ["nan", "inf", "0x1", "", "1_0", "½", "0.5" + "0" * 40, "0." + "0" * 40 + "1"]
    ),
)
view_names = st.one_of(st.sampled_from(VIEWS + ["c", "", "a:b", "ens-uniform"]), tricky_text)
separators = st.sampled_from([" ", "  ", "\t", "\x0b", "\x0c", "\r", "\n", "\u2028", "\xa0"])


@st.composite
def valid_mixtures(draw):
    """``NAME:WEIGHT ...`` labels over declared views, weights that sum to one."""
    chosen = draw(st.lists(st.sampled_from(VIEWS), min_size=1, max_size=3, unique=True))
    raw = draw(st.lists(st.integers(1, 1000), min_size=len(chosen), max_size=len(chosen)))
    parts = ["%s:%.6f" % (name, value / sum(raw)) for name, value in zip(chosen, raw)]
    return draw(separators.filter(str.isspace)).join(parts)


@st.composite
def mixtures(draw):
    """Anything shaped like ``NAME:WEIGHT NAME:WEIGHT ...``, valid or not."""
    parts = draw(
        st.lists(st.tuples(view_names, st.sampled_from([":", "::", ""]), weights), max_size=4)
    )
    text = ""
    for name, colon, weight in parts:
        text += draw(separators) + name + colon + weight
    return text + draw(st.sampled_from(["", " ", "\t"]))


labels = st.one_of(
    valid_mixtures(),
    mixtures(),
    st.sampled_from(
        VIEWS + ["ens-uniform", "ens-learned", " a ", "c", "", "a:1", "a:0.5 b:0.5", "generic:1"]
    ),
    tricky_text,
)


def python_view_weights(label, learned):
    """What the Python readers make of a label of the SavedModel's input: ``(domain id,
    view weights)``, or ``None`` if they refuse it."""
    label = label.strip(domains.ASCII_SPACE)
    if ensembles.is_ensemble_label(label):
        result, error = read(ensembles.parse_label, label, DOMAINS, learned)
        if error is not None:
            return None
        result = np.array(result)
        top = int(np.argmax(result))
        return ensembles.view_ids(DOMAINS)[top], result
    domain, error = read(domains.label_id, label, DOMAINS, "test")
    if error is not None:
        return None
    one_hot = np.zeros(len(VIEWS))
    one_hot[ensembles.view_ids(DOMAINS).index(domain)] = 1
    return domain, one_hot


def near_the_tolerance(label):
    """Whether the weights of :obj:`label` sum to 1 +/- SUM_TOLERANCE, give or take
    float32's rounding."""
    total = 0.0
    for part in label.split():
        try:
            total += float(part.rpartition(":")[2])
        except ValueError:
            pass
    return abs(abs(total - 1) - ensembles.SUM_TOLERANCE) < 1e-5


class EnsembleLabelTest(unittest.TestCase):
    @given(labels, st.sampled_from([None, LEARNED]))
    @example("a:0.5\u2028b:0.5", None)
    @example("a:" + "9" * 5000, None)
    @example(" a:0.0\u2028a:0.0\u2028a0.0", None)
    def test_parse_label(self, label, learned):
        result, error = read(ensembles.parse_label, label, DOMAINS, learned, where="f:1")
        if error is None:
            self.assertEqual(len(result), len(VIEWS))
            self.assertTrue(all(math.isfinite(w) and w >= 0 for w in result), result)
            self.assertAlmostEqual(sum(result), 1.0, places=6)

    @given(
        st.one_of(
            st.lists(st.one_of(st.floats(0, 1), yaml_scalars), min_size=3, max_size=3),
            st.dictionaries(
                st.sampled_from(VIEWS + ["c"]), st.one_of(st.floats(0, 1), yaml_scalars)
            ),
            yaml_values(),
        )
    )
    @example([10**400, 0, 0])
    @example({"a": 10**400})
    def test_learned_from_config(self, value):
        data = {ensembles.CONFIG_KEY: value}
        result, error = read(ensembles.learned_from_config, data, DOMAINS)
        if error is None and value is not None:
            self.assertAlmostEqual(sum(result), 1.0, places=6)


class WeightsFileTest(unittest.TestCase):
    def setUp(self):
        super().setUp()
        self.dir = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.dir, ignore_errors=True)

    json_values = yaml_values(
        st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), tricky_text), max_leaves=8
    )

    @given(
        st.one_of(
            st.fixed_dictionaries(
                {},
                optional={
                    "weights": st.one_of(
                        st.lists(st.floats(0, 1), min_size=3, max_size=3), json_values
                    ),
                    "views": st.one_of(st.just(VIEWS), json_values),
                },
            ).map(lambda record: json.dumps(record).encode("utf-8")),
            json_values.map(lambda value: json.dumps(value).encode("utf-8")),
            st.binary(max_size=20),
        )
    )
    @example(b"[" * 5000)
    @example(('{"views": ["a", "b", "generic"], "weights": [1%s, 0, 0]}' % ("0" * 400)).encode())
    @example(b'{"views": ["a", "b", "generic"], "weights": [1' + b"0" * 5000 + b", 0, 0]}")
    def test_read_weights_file(self, data):
        with open(os.path.join(self.dir, ensembles.WEIGHTS_FILE), "wb") as f:
            f.write(data)
        result, error = read(ensembles.read_weights_file, self.dir, DOMAINS)
        if error is None:
            self.assertAlmostEqual(sum(result), 1.0, places=6)


class ServingInputTest(tf.test.TestCase):
    """The graph that reads the SavedModel's ``domain`` input agrees with the Python readers."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.features = {}
        for learned in (None, LEARNED):
            inputter = DomainInputter()
            data = {"domains": DOMAINS}
            if learned is not None:
                data[ensembles.CONFIG_KEY] = learned
            inputter.initialize(data)
            inputter.ensemble_refusal = None
            function = tf.function(
                lambda labels, inputter=inputter: inputter.make_features(
                    features={"domain": labels}, training=False
                ),
                input_signature=[tf.TensorSpec([None], tf.string)],
            )
            function(tf.constant(["a"]))  # Traced once, before the deadline counts.
            cls.features[learned is not None] = function

    def serve(self, label, learned):
        """``(domain id, view weights)`` of the graph, or ``None`` if its check refused."""
        try:
            features = self.features[learned is not None](tf.constant([label]))
        except tf.errors.InvalidArgumentError as e:
            # The graph's own check, naming the label; never another failure.
            self.assertRegex(
                e.message, "assertion failed: \\[(Invalid ensemble|Unknown domain) label"
            )
            return None
        return int(features["domain"][0]), features[ensembles.WEIGHTS_FEATURE][0].numpy()

    @given(labels, st.sampled_from([None, LEARNED]))
    @example("a:0.5\nb:0.5", None)
    @example("a:0.5000000000000000000000000000000000 b:0.5", None)
    @example("a:" + "1" * 40, None)
    @example(" a:1\x0b", None)
    def test_graph_agrees_with_python(self, label, learned):
        # float32 in the graph, float64 in Python: not at the edge of the tolerance.
        assume(not near_the_tolerance(label))
        expected = python_view_weights(label, learned)
        served = self.serve(label.encode("utf-8"), learned)
        if expected is None:
            self.assertIsNone(served, "the graph accepts %r, Python refuses it" % label)
            return
        self.assertIsNotNone(served, "the graph refuses %r, Python accepts it" % label)
        self.assertAllClose(served[1], expected[1], atol=1e-5)
        top = sorted(expected[1])
        if len(top) < 2 or top[-1] - top[-2] > 1e-5:  # No tie for the largest weight.
            self.assertEqual(served[0], expected[0])

    def test_a_label_that_is_not_utf8_is_refused_by_the_check(self):
        # The assertion of domains.lookup_domain_ids transcodes the label in its message:
        # raw bytes there made a SavedModel called from Python raise UnicodeDecodeError.
        # (ldr-translate never sends such a label: it reads its labels as UTF-8 first.)
        for label in (b"\xff", b"c\xe9", b"\xff:1", b"a:0.5 b:0.5\xff"):
            for learned in (None, LEARNED):
                with self.subTest(label=label, learned=learned):
                    self.assertIsNone(self.serve(label, learned))

    @given(st.binary(max_size=12), st.sampled_from([None, LEARNED]))
    @example(b"a:1\xc3", None)
    def test_any_bytes_are_served_or_refused_by_the_check(self, label, learned):
        served = self.serve(label, learned)
        try:
            label.decode("utf-8")
        except UnicodeDecodeError:
            self.assertIsNone(served, "the graph accepts %r, not UTF-8" % label)


if __name__ == "__main__":
    unittest.main()
