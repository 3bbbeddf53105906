"""``ldr-export ctranslate2`` on a checkpoint, and CTranslate2's own converter refused."""

import json
import os
import subprocess
import sys
import types
from unittest import mock

import ctranslate2
import opennmt
import pytest
import tensorflow as tf
import yaml

from ldr_opennmt.cli import export as cli
from ldr_opennmt.errors import UserError
from ldr_opennmt.export import ct2_export
from ldr_opennmt.serving import manifest as manifest_lib
from tests import helpers

SOURCES = ["the big cell", "a host is here", "spirit", "cell host spirit now"]
MAX_LENGTH = 10
DEFINITION = """from ldr_opennmt import models, upstream

upstream.install()


def model():
    return models.%s(%s)
"""


def _ldr():
    return helpers.FAMILIES["ldr_transformer"]()


def _write_model_dir(directory, family, definition_args, seed):
    """A model directory with a definition, a checkpoint (step 3) and a run config.

    Returns:
      (the model with the checkpoint's weights, the run configuration's path, the
      model directory).
    """
    model, paths = helpers.build_model(
        types.SimpleNamespace(get_temp_dir=lambda: directory),
        family,
        params={"maximum_decoding_length": MAX_LENGTH},
        seed=seed,
    )
    model_dir = os.path.join(directory, family)
    os.makedirs(model_dir)
    with open(os.path.join(model_dir, "model_description.py"), "w") as f:
        f.write(DEFINITION % (family, definition_args))
    opennmt.utils.checkpoint.Checkpoint(model, model_dir=model_dir).save(step=3)
    config = {
        "model_dir": model_dir,
        "data": {
            "domains": list(model.domains),
            "source_vocabulary": paths["src_vocab"],
            "target_vocabulary": paths["tgt_vocab"],
        },
        "params": {"beam_width": 1, "maximum_decoding_length": MAX_LENGTH},
    }
    config_path = os.path.join(directory, family + ".yml")
    with open(config_path, "w") as f:
        yaml.safe_dump(config, f)
    return model, config_path, model_dir


def _greedy(model, domain):
    outputs = model.infer(helpers.source_features(model, SOURCES, [domain] * len(SOURCES)))
    return [
        [t.decode() for t in hypotheses[0][: lengths[0]]]
        for hypotheses, lengths in zip(outputs["tokens"].numpy(), outputs["length"].numpy())
    ]


def _run(argv):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    return subprocess.run(argv, capture_output=True, text=True, env=env, check=False)


@pytest.mark.e2e
class ExportCommandTest(helpers.SharedDirTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        tiny = ", ".join("%s=%r" % item for item in helpers.TINY.items())
        cls.model, cls.config, cls.model_dir = _write_model_dir(
            cls.dir, "ldr_transformer", "domain_region_size=2, " + tiny, seed=5
        )

    def _output_dir(self, name):
        return os.path.join(self.dir, "out", name)

    def test_exports_every_domain_from_the_latest_checkpoint(self):
        output_dir = self._output_dir("all")
        self.assertEqual(
            cli.main(["ctranslate2", "--config", self.config, "--output_dir", output_dir]), 0
        )
        manifest = ct2_export.read_manifest(output_dir)
        self.assertEqual(manifest["checkpoint"]["name"], "ckpt-3")
        self.assertEqual(manifest["checkpoint"]["step"], 3)
        self.assertRegex(manifest["checkpoint"]["sha256"], "^[0-9a-f]{64}$")
        self.assertEqual(list(manifest["domains"]), ["medical", "religious", "software", "generic"])
        for domain, directory in manifest["domains"].items():
            translator = ctranslate2.Translator(
                os.path.join(output_dir, directory), device="cpu", intra_threads=1
            )
            results = translator.translate_batch(
                [s.split() for s in SOURCES], beam_size=1, max_decoding_length=MAX_LENGTH
            )
            self.assertEqual([r.hypotheses[0] for r in results], _greedy(self.model, domain))

    def test_selected_domains_quantized(self):
        output_dir = self._output_dir("int8")
        checkpoint = tf.train.latest_checkpoint(self.model_dir)
        argv = ["ctranslate2", "--config", self.config, "--output_dir", output_dir]
        argv += ["--domains", "software", "generic", "--quantization", "int8"]
        argv += ["--checkpoint_path", checkpoint]
        self.assertEqual(cli.main(argv), 0)
        manifest = ct2_export.read_manifest(output_dir)
        self.assertEqual(manifest["domains"], {"software": "software", "generic": "generic"})
        self.assertEqual(manifest["quantization"], "int8")
        self.assertEqual(manifest["checkpoint"]["name"], os.path.basename(checkpoint))
        helpers.assert_cli_error(self, cli.main, argv, "already exists")
        self.assertEqual(cli.main(argv + ["--force"]), 0)

    def test_checkpoint_exported_is_printed_and_recorded(self):
        # Issue 43 item 10: a training writing checkpoints meanwhile; which one is exported.
        output_dir = self._output_dir("step")
        status, stderr = helpers.run_cli(
            cli.main, ["ctranslate2", "--config", self.config, "--output_dir", output_dir]
        )
        self.assertEqual(status, 0, stderr)
        checkpoint = os.path.join(self.model_dir, "ckpt-3")
        self.assertIn("exporting checkpoint %s (step 3)" % checkpoint, stderr)
        manifest = ct2_export.read_manifest(output_dir)
        self.assertEqual(manifest["checkpoint"], ct2_export.checkpoint_info(checkpoint))
        # Nothing absolute (issue 44 item 1): the export can be served from another machine.
        text = json.dumps(manifest)
        self.assertNotIn(self.dir, text)
        self.assertNotIn(os.sep + "tmp", text)
        self.assertEqual(manifest["source_vocabulary"], "src.vocab")
        for domain, directory in manifest["domains"].items():
            self.assertEqual(
                manifest["sha256"][domain],
                manifest_lib.directory_sha256(os.path.join(output_dir, directory)),
            )
            self.assertIn("model.bin", manifest["sha256"][domain])

    def test_existing_output_refused_before_loading(self):
        # Issue 47 item 6: refused at once, not after loading the model.
        output_dir = self._output_dir("existing")
        os.makedirs(output_dir)
        argv = ["ctranslate2", "--config", self.config, "--output_dir", output_dir]
        with mock.patch.object(cli.Runner, "from_files", side_effect=AssertionError("loaded")):
            helpers.assert_cli_error(self, cli.main, argv, "already exists")
            helpers.assert_cli_error(self, cli.main, argv + ["--force"], "replaces only")

    def test_an_output_that_cannot_be_written_is_refused_before_loading(self):
        # Issue 71 (7): a traceback after the model was loaded and folded.
        locked = helpers.unwritable_directory(self, self.dir)
        output_dir = os.path.join(locked, "ct2")
        argv = ["ctranslate2", "--config", self.config, "--output_dir", output_dir]
        with mock.patch.object(cli.Runner, "from_files", side_effect=AssertionError("loaded")):
            helpers.assert_cli_error(
                self, cli.main, argv, "^--output_dir %s: cannot write in " % output_dir
            )

    def test_unknown_domain(self):
        output_dir = self._output_dir("legal")
        helpers.assert_cli_error(
            self,
            cli.main,
            ["ctranslate2", "--config", self.config, "--output_dir", output_dir]
            + ["--domains", "medical", "legal"],
            r"^unknown domain 'legal' \(declared: medical, religious, software, generic\)$",
        )
        self.assertFalse(os.path.exists(output_dir))

    def test_rnn_is_refused(self):
        tiny = ", ".join("%s=%r" % item for item in helpers.TINY_RNN.items())
        _, config, _ = _write_model_dir(self.dir, "dc_rnn", tiny, seed=1)
        output_dir = self._output_dir("rnn")
        helpers.assert_cli_error(
            self,
            cli.main,
            ["ctranslate2", "--config", config, "--output_dir", output_dir],
            "^MultiDomainRNN cannot be exported to CTranslate2: CTranslate2 3.x converts only",
        )
        self.assertFalse(os.path.exists(output_dir))

    def test_onmt_export_to_ctranslate2_is_refused(self):
        # onmt-main export --format ctranslate2: the model is not built when
        # MultiDomainModel.export() checks it; the converter itself is blocked.
        with open(self.config) as f:
            config = yaml.safe_load(f)
        runner = opennmt.Runner(_ldr, config)
        output_dir = self._output_dir("onmt")
        exporter = opennmt.utils.exporters.make_exporter("ctranslate2")
        with self.assertRaisesRegex(UserError, "use `ldr-export ctranslate2`"):
            runner.export(output_dir, exporter=exporter)
        self.assertFalse(os.path.exists(output_dir))

    def test_commands_print_one_line_errors(self):
        # CTranslate2's own converter on a multi-domain model directory.
        output_dir = self._output_dir("converter")
        converter = [sys.executable, "-m", "ctranslate2.converters.opennmt_tf"]
        result = _run(converter + ["--config", self.config, "--output_dir", output_dir])
        self.assertEqual(result.returncode, 2, result.stderr)
        last = result.stderr.strip().splitlines()[-1]
        self.assertRegex(
            last,
            r"^ldr-opennmt: error: CTranslate2's OpenNMT-tf converter cannot convert a "
            r"multi-domain model .*: use `ldr-export ctranslate2`",
        )
        self.assertFalse(os.path.exists(output_dir))
        # The ldr-export console script.
        script = os.path.join(os.path.dirname(sys.executable), "ldr-export")
        result = _run(
            [script, "ctranslate2", "--config", self.config, "--output_dir", output_dir]
            + ["--domains", "legal"]
        )
        self.assertEqual(result.returncode, 2, result.stderr)
        self.assertEqual(
            result.stderr.strip().splitlines()[-1],
            "ldr-export: error: unknown domain 'legal' "
            "(declared: medical, religious, software, generic)",
        )
        self.assertFalse(os.path.exists(output_dir))


if __name__ == "__main__":
    tf.test.main()
