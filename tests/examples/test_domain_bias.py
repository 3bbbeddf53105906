"""The worked example of a method added from outside the package (examples/domain_bias).

In process: the family registers from its file, its layer reads the domain in training
and in beam search. End to end (marked ``e2e``): stock ``onmt-main`` trains it with
Procedure 1, ``onmt-main export`` writes the SavedModel, ``ldr-translate`` translates with
a label, and the CTranslate2 export is refused in one line.
"""

import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
import yaml

from ldr_opennmt import probe, registry
from ldr_opennmt.analysis import parameters
from ldr_opennmt.evaluation import systems
from ldr_opennmt.layers import domain_scope
from ldr_opennmt.serving import savedmodel_translate
from ldr_opennmt.training.runner import Runner
from tests import corpus, helpers
from tests.upstream.test_onmt_main import ROOT, _checkpoints, _onmt_main, _write_config

EXAMPLE = os.path.join(ROOT, "examples", "domain_bias", "domain_bias.py")
FAMILY = "domain_bias_transformer"
BIN = os.path.dirname(sys.executable)


def _load():
    return registry.load_user_module(EXAMPLE)


def _run(command, *args):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONWARNINGS="ignore")
    return subprocess.run(
        [os.path.join(BIN, command), *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=900,
    )


class DomainBiasFamilyTest(tf.test.TestCase):
    def test_registers_from_its_file(self):
        _load()
        family = registry.get(FAMILY)
        self.assertEqual(family.title, "Domain output bias")
        self.assertIn("domain_bias.py", family.module)
        # Loading the file again is a no-op, not a second registration.
        self.assertEqual(_load(), [])
        caps = probe.capabilities(FAMILY)
        self.assertEqual(caps.labels, probe.LABEL_NEEDED)
        self.assertIn("procedure1", caps.domain_training)
        self.assertIn("output bias", caps.ctranslate2)
        self.assertIsNone(caps.ensembles)

    def test_parameter_row(self):
        _load()
        self.assertIn(FAMILY, parameters.systems())
        vanilla = parameters.parameter_count("vanilla")
        # The paper's sizes: 5 domains, a 50,000-word target vocabulary.
        self.assertEqual(parameters.parameter_count(FAMILY) - vanilla, 5 * 50000)
        self.assertTrue(any("Domain output bias" in line for line in parameters.parameter_table()))

    def test_the_label_selects_the_bias_in_beam_search(self):
        _load()
        model, paths = helpers.build_model(self, FAMILY, params={"beam_width": 2})
        layer = model.decoder.output_layer
        self.assertEqual(sorted(model.domain_weights()), list(range(len(corpus.DOMAINS))))
        # Domain 1 (religious): its bias strongly prefers one target word; only its
        # sentences say it.
        vocabulary = corpus.read_lines(paths["tgt_vocab"])
        favourite = vocabulary[-1]
        bias = np.zeros([layer.units], np.float32)
        bias[len(vocabulary) - 1] = 100.0  # Its id: its line (the unknown word comes after).
        layer.copies("output_bias")[2].assign(bias)  # General copy first.
        features = helpers.source_features(
            model, ["a b c", "a b c", "a b c"], ["medical", "religious", "generic"]
        )
        predictions = model.infer(features)
        said = []
        for i in range(3):
            length = int(predictions["length"][i, 0])
            words = [t.decode() for t in predictions["tokens"][i, 0, :length].numpy()]
            said.append(favourite in words)
        self.assertEqual(said, [False, True, False])

    def test_the_layer_needs_a_domain_scope(self):
        _load()
        model, _ = helpers.build_model(self, FAMILY)
        units = registry.TINY_TRANSFORMER["num_units"]
        with self.assertRaisesRegex(RuntimeError, "outside a domain scope"):
            model.decoder.output_layer(tf.zeros([1, units]))
        with domain_scope(tf.constant([1])):
            self.assertEqual(model.decoder.output_layer(tf.zeros([1, units])).shape[0], 1)

    def test_ldr_eval_reads_the_labels_of_the_loaded_model(self):
        # Its domain layer is made in initialize: ldr-eval reads the capabilities of the
        # model initialized with the system's configuration, as the registry does. The
        # configuration names the module by a path relative to its own directory.
        directory = self.get_temp_dir()
        paths = corpus.write_corpus(os.path.join(directory, "data"), count=4)
        model_dir = os.path.join(directory, "model")
        os.makedirs(model_dir)
        with open(os.path.join(model_dir, "model_description.py"), "w") as f:
            f.write(
                "from ldr_opennmt import registry\n\n\ndef model():\n"
                "    return registry.get(%r).build_tiny()\n" % FAMILY
            )
        config = os.path.join(directory, "bias.yml")
        with open(config, "w") as f:
            yaml.safe_dump(
                {
                    "user_modules": [os.path.relpath(EXAMPLE, directory)],
                    "model_dir": model_dir,
                    "data": corpus.data_config(paths),
                },
                f,
            )
        system = systems.System("Bias", [config])
        self.assertTrue(system.uses_domains)
        self.assertIsNone(system.ensemble_refusal)
        self.assertEqual(system.capabilities, probe.capabilities(FAMILY))

    def test_trains_jointly_with_the_multi_domain_runner(self):
        # ldr-main's Runner (per-domain corpora, domain sampling) in joint mode: the shared
        # weights and every domain's bias are updated together.
        _load()
        config = helpers.corpora_config(
            self.get_temp_dir(), os.path.join(self.get_temp_dir(), "joint"), domain_training="joint"
        )
        with self.assertLogs("tensorflow", "INFO") as logs:
            Runner(registry.get(FAMILY).build_tiny, config, seed=1).train()
        # The mode is said once, when the training starts.
        said = [line for line in logs.output if "Training mode:" in line]
        self.assertEqual(len(said), 1, said)
        self.assertIn("params: domain_training: joint (configured)", said[0])
        values = helpers.checkpoint_values(config["model_dir"])
        biases = [v for name, v in values.items() if "output_bias" in name]
        self.assertLen(biases, len(corpus.DOMAINS))
        self.assertTrue(any(np.abs(v).max() > 0 for v in biases))


@pytest.mark.e2e
class DomainBiasEndToEndTest(helpers.SharedDirTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.paths = corpus.write_corpus(os.path.join(cls.dir, "data"), count=40)
        cls.model_dir = os.path.join(cls.dir, "bias")
        cls.config = _write_config(
            os.path.join(cls.dir, "bias.yml"),
            cls.model_dir,
            corpus.data_config(cls.paths),
            max_step=30,
            domain_training="procedure1",
        )
        cls.train = _onmt_main("--model", EXAMPLE, "--config", cls.config, "train")

    def test_lists_the_family(self):
        result = _run("ldr-main", "--list-families", "--user_module", EXAMPLE)
        self.assertEqual(result.returncode, 0, msg=result.stderr[-2000:])
        self.assertIn("| %s | Domain output bias |" % FAMILY, result.stdout)
        self.assertIn("| ldr_transformer | LDR |", result.stdout)

    def test_trains_with_procedure1_under_stock_onmt_main(self):
        self.assertEqual(self.train.returncode, 0, msg=self.train.stderr[-3000:])
        # Stock onmt-main's log says which mode trains, once.
        said = [line for line in self.train.stderr.splitlines() if "Training mode:" in line]
        self.assertEqual(len(said), 1, said)
        self.assertIn("params: domain_training: procedure1 (configured)", said[0])
        self.assertIn("ckpt-30.index", os.listdir(self.model_dir))
        names = [name for name, _ in tf.train.list_variables(self.model_dir)]
        biases = [name for name in names if "domain_" in name and "output_bias" in name]
        values = [n for n in biases if "OPTIMIZER_SLOT" not in n]
        self.assertLen(values, len(corpus.DOMAINS), msg=biases)
        # Procedure 1's domain pass moved the biases away from their zero start.
        reader = tf.train.load_checkpoint(self.model_dir)
        values = [reader.get_tensor(n) for n in values]
        self.assertTrue(all(np.abs(v).max() > 0 for v in values))

    # The example's SavedModel is checked in process by tests/checks/test_family.py (every
    # check, the savedmodel one included), and ldr-translate by tests/serving/.
    @helpers.skip_unless_full("about 30 s: the example exported by onmt-main, ldr-translate twice")
    def test_exports_and_translates_with_a_label(self):
        self.assertEqual(self.train.returncode, 0, msg=self.train.stderr[-3000:])
        self.export_dir = os.path.join(self.dir, "export")
        export = _onmt_main("--config", self.config, "export", "--output_dir", self.export_dir)
        self.assertEqual(export.returncode, 0, msg=export.stderr[-3000:])
        outputs = {}
        for label in ("medical", "generic"):
            output = os.path.join(self.dir, "out.%s" % label)
            result = _run(
                "ldr-translate",
                "--export",
                self.export_dir,
                "--domain",
                label,
                "--tokenized",
                "--input",
                self.paths["test_src"],
                "--output",
                output,
            )
            self.assertEqual(result.returncode, 0, msg=result.stderr[-2000:])
            outputs[label] = corpus.read_lines(output)
        sources = corpus.read_lines(self.paths["test_src"])
        self.assertLen(outputs["medical"], len(sources))
        # The label matters: the medical bias (moved from zero by training) changes the
        # translations or, where the words are the same, their log-probabilities, which
        # the SavedModel returns (generic adds no bias).
        translator = savedmodel_translate.SignatureRunner(self.export_dir)
        tokens = [line.split() for line in sources]
        scored = {
            label: translator.translate_batch(tokens, [label] * len(tokens))
            for label in ("medical", "generic")
        }
        self.assertEqual(
            [" ".join(hypotheses[0]) for hypotheses, _ in scored["medical"]], outputs["medical"]
        )
        differences = [
            abs(medical[1][0] - generic[1][0]) if medical[0][0] == generic[0][0] else np.inf
            for medical, generic in zip(scored["medical"], scored["generic"])
        ]
        self.assertGreater(max(differences), 1e-4)

    def test_ctranslate2_is_refused_in_one_line(self):
        out = os.path.join(self.dir, "ct2")
        result = _run("ldr-export", "ctranslate2", "--config", self.config, "--output_dir", out)
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("output bias", result.stderr)
        self.assertFalse(os.path.exists(out))
        self.assertTrue(_checkpoints(self.model_dir))


if __name__ == "__main__":
    tf.test.main()
