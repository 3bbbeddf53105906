"""``ldr-main check-family``: the package's families and the examples pass it, and each
broken family fails the check that names its defect."""

import contextlib
import io
import os
import shutil
import sys
import tempfile

import opennmt
import tensorflow as tf
from parameterized import parameterized

from ldr_opennmt import registry
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


class _Broken(MultiDomainTransformer):
    layer_class = _ScaledDense
    default_domain_training = procedure.PROCEDURE1

    def __init__(self, **sizes):
        super().__init__(
            opennmt.inputters.WordEmbedder(sizes["num_units"]),
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


class _AlwaysJoint(_Broken):
    """Overrides compute_gradients: every mode trains as joint."""

    def compute_gradients(self, features, labels, optimizer, **kwargs):
        return procedure.compute_gradients(self, features, labels, optimizer, "joint", **kwargs)


def _register(name, model_class):
    registry.register(
        registry.Family(
            name=name,
            builder=lambda **sizes: model_class(**sizes),
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
        self.assertEqual(
            modes, ["mode %s" % m for m in registry.capabilities(name).domain_training]
        )


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
        skip = ("label", "ensembles", "generic", "modes", "ctranslate2", "checkpoint")
        results = _check(self, "ml_transformer", skip=skip)
        self.assertEqual(_failures(results), [])
        self.assertRegex(
            [r.line() for r in results if r.name == "savedmodel"][0],
            r"^pass  savedmodel: no domain input \(its translation reads no label\)",
        )


class BrokenFamiliesTest(tf.test.TestCase):
    """Each defect fails the check that is about it, saying why."""

    FAST = ("ensembles", "savedmodel", "checkpoint")

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


class CommandTest(tf.test.TestCase):
    def _run(self, argv):
        stdout, stderr = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            status = cli.main(argv)
        return status, stdout.getvalue(), stderr.getvalue()

    def test_one_line_per_check_and_exit_1_on_a_failure(self):
        _register("deaf", _Deaf)
        skip = ["modes", "ensembles", "savedmodel", "ctranslate2", "checkpoint"]
        status, stdout, _ = self._run(["check-family", "deaf", "--skip"] + skip)
        self.assertEqual(status, 1, stdout)
        lines = stdout.splitlines()
        self.assertEqual(lines[0], "check-family deaf")
        self.assertRegex(lines[1], r"^pass  build: _Deaf: ")
        self.assertRegex(lines[2], r"^fail  label: the family needs labels, but d0 and d1 give")
        self.assertRegex(lines[-1], r"^deaf: FAILED label \(8 checks, \d+ s\)$")

    def test_a_user_module_family_passes(self):
        name, path = EXAMPLES[1]
        skip = ["modes", "savedmodel"]
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
