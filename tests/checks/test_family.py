"""``ldr-main check-family``: the package's families and the examples pass it, and each
broken family fails the check that names its defect."""

import contextlib
import io
import os
import shutil
import sys
import tempfile
from unittest import mock

import opennmt
import tensorflow as tf
from parameterized import parameterized

from ldr_opennmt import probe, registry
from ldr_opennmt.checks import data
from ldr_opennmt.checks import family as family_check
from ldr_opennmt.cli import main as cli
from ldr_opennmt.layers import DomainCopies, domain_one_hot, replace_dense
from ldr_opennmt.layers.context import DomainSpecificLayer
from ldr_opennmt.layers.replace import dense_slots
from ldr_opennmt.models import MultiDomainTransformer, procedure
from ldr_opennmt.models.sequence_to_sequence import transformer_arguments
from tests import helpers

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLES = [
    ("domain_bias_transformer", os.path.join(ROOT, "examples", "domain_bias", "domain_bias.py")),
    (
        "domain_scale_transformer",
        os.path.join(ROOT, "examples", "domain_scale", "domain_scale.py"),
    ),
]
#: The package's Transformer families, checked in this one process. Their SavedModels are
#: checked per family by tests/models/test_export.py (the savedmodel check traces beam
#: search, 10-20 s a family); the examples get every check. The RNN families (20-40 s each
#: on 2 cores, eager RNN steps) are checked by hand: ldr-main check-family ldr_rnn.
PACKAGE = [
    (f.name,)
    for f in registry.families()
    if f.module.startswith("ldr_opennmt") and f.architecture == "transformer"
]


def _check(test, name, skip=("savedmodel",)):
    directory = tempfile.mkdtemp(dir=test.get_temp_dir())
    try:
        return family_check.FamilyCheck(registry.get(name), directory, skip=skip).run()
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _statuses(results):
    return {result.name: result.status for result in results}


def _failures(results):
    return [result.line() for result in results if result.status == family_check.FAIL]


class _ScaledDense(opennmt.layers.Dense, DomainCopies):
    """The domain_scale example's layer, with knobs that break it."""

    reads_domain = True
    wrong_fold = False

    def __init__(self, units, **kwargs):
        super().__init__(units, **kwargs)
        self.init_copies()

    def build(self, input_shape):
        super().build(input_shape)
        self.add_copies("output_scale", [self.units], "ones", generic_value=1)

    def call(self, inputs):
        outputs = super().call(inputs)
        if not self.reads_domain:
            return outputs
        return outputs * self.per_sentence("output_scale", outputs.shape.rank, outputs.dtype)

    def fold(self, domain_id):
        scale = 1.0 if self.wrong_fold else self.copy_for("output_scale", domain_id)
        return {"kernel": self.kernel * scale, "bias": self.bias * scale}


class _DeafDense(_ScaledDense):
    reads_domain = False  # Its domain weights exist, but call never reads the domain.


class _WrongFoldDense(_ScaledDense):
    wrong_fold = True  # Its fold drops the scale.


class _UndeclaredDense(opennmt.layers.Dense, DomainSpecificLayer):
    """Per-domain scales created with plain add_weight: not filed as domain weights."""

    num_regions = 2

    def build(self, input_shape):
        super().build(input_shape)
        self.scales = self.add_weight("scales", [2, self.units], initializer="ones")

    def call(self, inputs):
        outputs = super().call(inputs)
        one_hot = domain_one_hot(2, outputs.dtype, outputs.shape.rank)
        return outputs * (1 + tf.tensordot(one_hot, self.scales - 1, 1))


class _ShortEmbedder(opennmt.inputters.WordEmbedder):
    """A word embedding one row short of its vocabulary (no row for <unk>), whose lookup
    reads zeros past the table, as a GPU's does (on a CPU, the lookup of <unk> fails: the
    build check fails on the placeholder batch, whose words are unknown)."""

    def build(self, input_shape):
        self.vocabulary_size -= 1
        super().build(input_shape)
        self.vocabulary_size += 1

    def call(self, features, training=None):
        ids = features["ids"]
        inside = ids < tf.shape(self.embedding, out_type=ids.dtype)[0]
        outputs = tf.nn.embedding_lookup(self.embedding, tf.where(inside, ids, 0))
        return outputs * tf.cast(inside, outputs.dtype)[..., tf.newaxis]


class _Broken(MultiDomainTransformer):
    layer_class = _ScaledDense
    source_embedder = opennmt.inputters.WordEmbedder
    default_domain_training = procedure.PROCEDURE1

    def __init__(self, **sizes):
        super().__init__(
            self.source_embedder(sizes["num_units"]),
            opennmt.inputters.WordEmbedder(sizes["num_units"]),
            **transformer_arguments(**sizes),
        )
        for stack in (self.encoder, self.decoder):
            for parent, attribute in dense_slots(stack):
                if attribute == "outer":
                    replace_dense(parent, attribute, self.layer_class, "broken")

    def initialize(self, data_config, params=None):
        super().initialize(data_config, params=params)
        if self.layer_class is not _UndeclaredDense:
            self.set_layer_regions(data_config, 0, "broken")


class _Deaf(_Broken):
    layer_class = _DeafDense


class _WrongFold(_Broken):
    layer_class = _WrongFoldDense


class _Undeclared(_Broken):
    layer_class = _UndeclaredDense


class _ShortSourceEmbedding(_Broken):
    source_embedder = _ShortEmbedder


class _OneMode(_Broken):
    """Trains in one mode only (one mode line: a shorter test)."""

    domain_training_modes = (procedure.PROCEDURE1,)
    domain_training_reason = "a test family trains with Procedure 1"


class _HostileDense(opennmt.layers.Dense):
    """The output layer of :class:`_Hostile`: drops the last vocabulary entry when its
    model's defect says so."""

    def call(self, inputs):
        logits = super().call(inputs)
        step = inputs.shape.rank == 2  # One decoding step: [batch, depth].
        if _Hostile.defect == "vocabulary" or (_Hostile.defect == "step" and step):
            logits = logits[..., :-1]
        return logits


class _Hostile(_Broken):
    """A family whose outputs break as :attr:`defect` says, after it is built (one
    built model for every defect)."""

    defect = None

    def __init__(self, **sizes):
        if _Hostile.defect == "fixed_dropout":  # It ignores its dropout argument.
            sizes = dict(sizes, dropout=0.0)
        super().__init__(**sizes)

    def initialize(self, data_config, params=None):
        super().initialize(data_config, params=params)
        plain = self.decoder.output_layer
        self.decoder.output_layer = _HostileDense(plain.units, use_bias=plain.use_bias)

    def call(self, features, labels=None, training=None, step=None):
        outputs, predictions = super().call(features, labels, training=training, step=step)
        if outputs is not None:
            logits = outputs["logits"]
            outputs = {
                "time": dict(outputs, logits=logits[:, :-1]),
                "dtype": dict(outputs, logits=tf.cast(logits, tf.int32)),
                "no_logits": {"scores": logits},
                "noise": dict(outputs, logits=logits + tf.random.normal(tf.shape(logits))),
            }.get(self.defect if training else None, outputs)
        if predictions is not None and self.defect == "predictions":
            predictions = {("scores" if k == "log_probs" else k): v for k, v in predictions.items()}
        return outputs, predictions


class _AlwaysJoint(_Broken):
    """Overrides compute_gradients: every mode trains as joint."""

    def compute_gradients(self, features, labels, optimizer, **kwargs):
        return procedure.compute_gradients(self, features, labels, optimizer, "joint", **kwargs)


def _register(name, model_class, **fixed):
    """Registers :obj:`model_class` as the family :obj:`name`, its builder giving it the
    :obj:`fixed` arguments whatever it is asked for (a builder that drops them)."""
    registry.register(
        registry.Family(
            name=name,
            builder=lambda **sizes: model_class(**dict(sizes, **fixed)),
            title=name,
            paper="tests",
            summary="A broken family.",
            module="tests.checks.test_family",
        )
    )
    return name


class PackageFamiliesTest(tf.test.TestCase):
    @parameterized.expand(PACKAGE)
    def test_passes(self, name):
        results = _check(self, name)
        self.assertEqual(_failures(results), [])
        statuses = _statuses(results)
        for check in ("build", "label", "ctranslate2"):
            self.assertEqual(statuses[check], family_check.PASS, check)
        # Every declared mode has its line: the package's new modes are checked too.
        modes = [r.name for r in results if r.name.startswith("mode ")]
        self.assertEqual(modes, ["mode %s" % m for m in probe.capabilities(name).domain_training])


class ExamplesTest(tf.test.TestCase):
    @parameterized.expand(EXAMPLES)
    def test_passes_every_check(self, name, path):
        registry.load_user_module(path)
        results = _check(self, name, skip=())
        self.assertEqual(_failures(results), [])
        statuses = _statuses(results)
        for check in ("label", "generic", "ensembles", "savedmodel", "ctranslate2", "checkpoint"):
            self.assertEqual(statuses[check], family_check.PASS, check)
        self.assertEqual(statuses["mode procedure1"], family_check.PASS)

    def test_a_family_that_reads_no_label_serves_without_a_domain_input(self):
        # Labels for training only (ML, AdvL, domain mixing): no domain input is right.
        skip = ("outputs", "dropout", "label", "ensembles", "generic", "modes")
        results = _check(self, "ml_transformer", skip=skip + ("ctranslate2", "checkpoint"))
        self.assertEqual(_failures(results), [])
        self.assertRegex(
            [r.line() for r in results if r.name == "savedmodel"][0],
            r"^pass  savedmodel: no domain input \(its translation reads no label\)",
        )


class BrokenFamiliesTest(tf.test.TestCase):
    """Each defect fails the check that is about it, saying why."""

    FAST = ("outputs", "dropout", "ensembles", "savedmodel", "checkpoint")
    #: Every check but build.
    ALL = family_check.CHECKS[1:]

    def test_a_layer_that_does_not_read_the_domain(self):
        results = _check(self, _register("deaf", _Deaf), skip=self.FAST + ("modes",))
        self.assertEqual(_statuses(results)["label"], family_check.FAIL)
        self.assertIn("do not read the domain", _failures(results)[0])

    def test_per_domain_weights_not_filed_as_domain_weights(self):
        results = _check(self, _register("undeclared", _Undeclared), skip=self.FAST)
        self.assertEqual(_statuses(results)["generic"], family_check.FAIL)
        self.assertRegex(
            _failures(results)[0], "scales.* is moved by the label but not filed as a domain weight"
        )

    def test_a_mode_whose_gradients_go_elsewhere(self):
        results = _check(self, _register("always_joint", _AlwaysJoint), skip=self.FAST)
        statuses = _statuses(results)
        self.assertEqual(statuses["mode joint"], family_check.PASS)
        self.assertEqual(statuses["mode procedure1"], family_check.FAIL)
        line = [r.line() for r in results if r.name == "mode procedure1"][0]
        self.assertRegex(line, "shared variable .*: its gradient is not 0 x the true-label pass")

    def test_a_fold_that_does_not_equal_the_model(self):
        results = _check(self, _register("wrong_fold", _WrongFold), skip=self.FAST + ("modes",))
        self.assertEqual(_statuses(results)["ctranslate2"], family_check.FAIL)
        self.assertRegex(_failures(results)[0], "the d0 fold translates .* where the model gives")

    def test_logits_one_vocabulary_entry_short(self):
        # Issue 56 item 4: the example with an output layer one entry short passed every
        # check (the targets never hold <unk>, the last entry).
        name, path = EXAMPLES[0]
        registry.load_user_module(path)
        example = type(registry.get(name).build_tiny())

        class ShortLogits(example):
            def initialize(self, data_config, params=None):
                super().initialize(data_config, params=params)
                layer = self.decoder.output_layer
                self.decoder.output_layer = type(layer)(layer.units - 1)
                self.set_layer_regions(data_config, 0, "short")

        skip = set(self.ALL) - {"outputs"}
        results = _check(self, _register("short_logits", ShortLogits), skip=skip)
        self.assertEqual(len(_failures(results)), 1)
        self.assertRegex(
            _failures(results)[0],
            r"^fail  outputs: the training logits have 21 entries where the target vocabulary "
            r"has 22 \(OpenNMT-tf's size: .*\); the logits of a beam search step have 21 "
            r"entries where the target vocabulary has 22 \(",
        )

    def test_a_source_embedding_one_row_short(self):
        skip = set(self.ALL) - {"outputs"}
        results = _check(self, _register("short_embedding", _ShortSourceEmbedding), skip=skip)
        self.assertEqual([r.name for r in results if r.status == family_check.FAIL], ["outputs"])
        self.assertRegex(
            _failures(results)[0],
            r"^fail  outputs: the embedding .*embedding:0 has 21 rows where its vocabulary has "
            r"22 entries \(",
        )

    def test_a_builder_that_drops_dropout(self):
        # It ignores its dropout argument (dropout 0.1): the routing of the modes compared
        # noisy gradients and blamed them; the dropout check names the cause, and the
        # modes leave their routing unchecked.
        name = _register("noisy", _OneMode, dropout=0.1)
        results = _check(self, name, skip=set(self.ALL) - {"dropout", "modes"})
        self.assertEqual([r.name for r in results if r.status == family_check.FAIL], ["dropout"])
        self.assertRegex(
            _failures(results)[0],
            r"^fail  dropout: built with dropout=0, two training passes at the same weights "
            r"give different losses: its layers keep dropout \(dropout 0.1 in .*"
            r"MultiHeadAttention.*\): the builder does not pass its dropout argument on \(",
        )
        self.assertRegex(
            [r.line() for r in results if r.name == "mode procedure1"][0],
            r"^pass  mode procedure1: routing not checked: two training passes at the same "
            r"weights differ \(the dropout check says why\); 2 steps on d0",
        )


class OneModelTest(tf.test.TestCase):
    """The outputs and dropout checks, on one built model whose outputs break after it is
    built (one build for every defect)."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.directory = tempfile.mkdtemp()
        name = _register("hostile", _Hostile)
        skip = set(family_check.CHECKS[1:]) - {"outputs", "dropout"}
        cls.check = family_check.FamilyCheck(registry.get(name), cls.directory, skip=skip)
        cls.results = cls.check.run()

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.directory, ignore_errors=True)
        super().tearDownClass()

    def test_unbroken(self):
        self.assertEqual(_failures(self.results), [])
        why = {r.name: r.why for r in self.results}
        self.assertEqual(
            why["outputs"],
            "training logits [6, 6, 22] (target vocabulary 22), as wide at each step of a beam "
            "search of 2; predictions tokens, length, log_probs; embeddings of the vocabulary "
            "sizes",
        )
        self.assertEqual(
            why["dropout"], "training is deterministic with dropout=0 and random with dropout=0.5"
        )

    @parameterized.expand(
        [
            (
                "vocabulary",
                r"^the training logits have 21 entries where the target vocabulary has 22 .*; "
                r"the logits of a beam search step have 21 entries where .* 22$",
            ),
            ("step", r"^the logits of a beam search step have 21 entries where the target .*22$"),
            ("time", r"^the training logits cover 5 target positions where the target has 6 "),
            ("dtype", r"^the training logits are int32, not floats$"),
            ("no_logits", r"^its training outputs have no logits \(compute_loss reads them\)$"),
            (
                "predictions",
                r"^its predictions have no log_probs \(translation and the SavedModel read "
                r"tokens, length, log_probs\)$",
            ),
        ]
    )
    def test_a_defect(self, defect, message):
        with mock.patch.object(_Hostile, "defect", defect):
            results = self.check.rerun("outputs")
        self.assertEqual([(r.name, r.status) for r in results], [("outputs", family_check.FAIL)])
        self.assertRegex(results[0].why, message)

    def test_a_builder_without_dropout(self):
        # Built with dropout=0.5, it has none (a second model: the build comes after).
        with mock.patch.object(_Hostile, "defect", "fixed_dropout"):
            results = self.check.rerun("dropout")
        self.assertEqual([(r.name, r.status) for r in results], [("dropout", family_check.FAIL)])
        self.assertRegex(
            results[0].why,
            r"^built with dropout=0.5, two training passes give the same loss: the builder "
            r"ignores its dropout argument \(training would never drop out\)$",
        )

    def test_a_random_op_in_training(self):
        # Random although no layer keeps a dropout rate: the check cannot name one.
        self.check.random_training = None
        try:
            with mock.patch.object(_Hostile, "defect", "noise"):
                results = self.check.rerun("dropout")
        finally:
            self.check.random_training = None
        self.assertEqual([(r.name, r.status) for r in results], [("dropout", family_check.FAIL)])
        self.assertRegex(
            results[0].why,
            r"^built with dropout=0, two training passes at the same weights give different "
            r"losses: a random op in training\? \(the gradient checks need dropout=0 to make "
            r"training deterministic\)$",
        )


class CommandTest(tf.test.TestCase):
    def _run(self, argv):
        stdout, stderr = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            status = cli.main(argv)
        return status, stdout.getvalue(), stderr.getvalue()

    def test_one_line_per_check_and_exit_1_on_a_failure(self):
        _register("deaf", _Deaf)
        skip = ["outputs", "dropout", "modes", "ensembles", "savedmodel", "ctranslate2"]
        status, stdout, _ = self._run(["check-family", "deaf", "--skip"] + skip + ["checkpoint"])
        self.assertEqual(status, 1, stdout)
        lines = stdout.splitlines()
        self.assertEqual(lines[0], "check-family deaf")
        self.assertRegex(lines[1], r"^pass  build: _Deaf: ")
        self.assertRegex(lines[2], r"^skip  outputs: not asked for ")
        self.assertRegex(lines[3], r"^skip  dropout: not asked for ")
        self.assertRegex(lines[4], r"^fail  label: the family needs labels, but d0 and d1 give")
        self.assertRegex(lines[-1], r"^deaf: FAILED label \(10 checks, \d+ s\)$")

    def test_a_user_module_family_passes(self):
        name, path = EXAMPLES[1]
        skip = ["outputs", "dropout", "modes", "savedmodel"]  # ExamplesTest runs them all.
        argv = ["check-family", name, "--user_module", path, "--skip"] + skip
        status, stdout, _ = self._run(argv)
        self.assertEqual(status, 0, stdout)
        self.assertRegex(stdout, r"pass  ctranslate2: the folds of d0, d1, generic translate")
        self.assertIn("%s: passed" % name, stdout)

    def test_user_errors(self):
        helpers.assert_cli_error(
            self, cli.main, ["check-family", "lora"], "^unknown model family 'lora'"
        )
        directory = self.get_temp_dir()
        with open(os.path.join(directory, "kept.txt"), "w") as f:
            f.write("x")
        helpers.assert_cli_error(
            self,
            cli.main,
            ["check-family", "ldr_transformer", "--work_dir", directory],
            "^--work_dir .*: not empty",
        )
        status, stderr = helpers.run_cli(cli.main, ["check-family", "ldr", "--skip", "nothing"])
        self.assertEqual(status, 2)
        self.assertIn("invalid choice: 'nothing'", stderr)


class DataTest(tf.test.TestCase):
    def test_generated_corpus(self):
        paths = data.write_corpus(self.get_temp_dir(), count=3, extra_target_tokens=["<d0>"])
        with open(paths["domain"]) as f:
            self.assertEqual(f.read().split(), ["d0"] * 3 + ["d1"] * 3)
        with open(paths["tgt_vocab"]) as f:
            vocabulary = f.read().split()
        self.assertEqual(vocabulary[:3], ["<blank>", "<s>", "</s>"])
        self.assertEqual(vocabulary[-1], "<d0>")
        self.assertEqual(data.make_pairs(1, 2), data.make_pairs(1, 2))


if __name__ == "__main__":
    sys.exit(tf.test.main())
