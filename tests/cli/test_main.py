"""``ldr-main`` in process: configuration errors write nothing; infer and export write
atomically; infer counts the translations stopped at ``maximum_decoding_length``."""

import os
import re
import sys
from unittest import mock

import opennmt
import pytest
import tensorflow as tf
import yaml

from ldr_opennmt import errors, models
from ldr_opennmt.cli import main as cli
from ldr_opennmt.cli import translate
from ldr_opennmt.models import procedure
from ldr_opennmt.training.runner import Runner
from tests import corpus, helpers

MAX_LENGTH = 5
DEFINITION = """from ldr_opennmt import errors, models


def model():
    return models.%s(%s)
"""
LDR = ("ldr_transformer", "domain_region_size=2, num_layers=1, num_units=16, num_heads=2, "
       "ffn_inner_dim=32, dropout=0.0")  # fmt: skip


_write = corpus.write_lines
_read = corpus.read_lines


def _tree(directory):
    """Every path under :obj:`directory` (relative), or ``None`` if it does not exist."""
    if not os.path.exists(directory):
        return None
    return sorted(
        os.path.relpath(os.path.join(root, name), directory)
        for root, dirs, files in os.walk(directory)
        for name in dirs + files
    )


def _write_config(path, config):
    with open(path, "w") as f:
        yaml.safe_dump(config, f)
    return path


class ConfigurationErrorTest(helpers.SharedDirTestCase):
    """A configuration error: one line, exit 2, nothing written to model_dir."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.paths = corpus.write_corpus(os.path.join(cls.dir, "data"), count=10)
        cls.definition = _write(
            os.path.join(cls.dir, "ldr_def.py"), (DEFINITION % LDR).splitlines()
        )

    def _config(self, name, **data):
        config = {
            "model_dir": os.path.join(self.dir, name),
            "data": dict(corpus.data_config(self.paths), **data),
            "params": {"optimizer": "Adam", "learning_rate": 0.01, "beam_width": 1},
            "train": {"batch_size": 4, "max_step": 2, "save_checkpoints_steps": 1},
        }
        return config

    def _fails(self, config, regex, *run_args, existing=False):
        """Runs ``ldr-main --model ... --config CONFIG train RUN_ARGS``: exit 2, one error
        line matching :obj:`regex`, and model_dir as it was (absent, or one old file)."""
        model_dir = config["model_dir"]
        if existing:
            os.makedirs(model_dir)
            _write(os.path.join(model_dir, "notes.txt"), ["kept"])
        before = _tree(model_dir)
        path = _write_config(model_dir + ".yml", config)
        argv = ["--model", self.definition, "--config", path, "train", *run_args]
        status, stderr = helpers.run_cli(cli.main, argv)
        self.assertNotIn("Traceback", stderr)
        helpers.assert_cli_error(self, cli.main, argv, regex)
        self.assertEqual(_tree(model_dir), before)

    def test_missing_vocabulary(self):
        missing = os.path.join(self.dir, "none.vocab")
        self._fails(
            self._config("vocab", source_vocabulary=missing),
            "^data: source_vocabulary: file not found: %s$" % re.escape(missing),
        )

    def test_missing_vocabulary_in_an_existing_model_dir(self):
        # onmt-main would copy the model definition there before any check.
        missing = os.path.join(self.dir, "none.vocab")
        self._fails(
            self._config("vocab_existing", target_vocabulary=missing),
            "^data: target_vocabulary: file not found: ",
            existing=True,
        )

    def test_missing_tokenization_file(self):
        missing = os.path.join(self.dir, "none.yml")
        self._fails(
            self._config("tokenization", source_tokenization=missing),
            "^data: source_tokenization: file not found: %s$" % re.escape(missing),
        )

    def test_invalid_domain_training(self):
        config = self._config("mode")
        config["params"]["domain_training"] = "both"
        self._fails(
            config,
            r"^params: domain_training must be one of %s, got 'both'$" % ", ".join(procedure.MODES),
            existing=True,
        )

    def test_unknown_label_in_the_training_files(self):
        # Checked before domains.json, the model description and the summaries.
        labels = _read(self.paths["train_domain"])
        bad = _write(os.path.join(self.dir, "bad.domain"), labels[:4] + ["legal"] + labels[5:])
        self._fails(
            self._config("label", train_features_file=[self.paths["train_src"], bad]),
            "^%s:5: unknown domain label 'legal'" % re.escape(bad),
        )

    def test_target_not_utf8_in_plain_training_files(self):
        # Checked with the other training files, before anything is written.
        with open(self.paths["train_tgt"], "rb") as f:
            lines = f.read().split(b"\n")
        bad = os.path.join(self.dir, "bad.tgt")
        with open(bad, "wb") as f:
            f.write(b"\n".join(lines[:2] + [b"caf\xe9"] + lines[3:]))
        self._fails(
            self._config("utf8", train_labels_file=bad),
            r"^%s:3: not UTF-8 \(byte 0xe9 at byte 4 of the line\)$" % re.escape(bad),
        )

    def test_missing_training_and_evaluation_files(self):
        missing = os.path.join(self.dir, "none.tgt")
        self._fails(
            self._config("train_file", train_labels_file=missing),
            "^data: train_labels_file: file not found: %s$" % re.escape(missing),
        )
        config = self._config(
            "eval_file",
            eval_features_file=[self.paths["test_src"], self.paths["test_domain"]],
            eval_labels_file=missing,
        )
        self._fails(config, "^data: eval_labels_file: file not found: ", "--with_eval")

    def test_missing_configuration_file(self):
        missing = os.path.join(self.dir, "none.yml")
        helpers.assert_cli_error(
            self,
            cli.main,
            ["--model", self.definition, "--config", missing, "train"],
            "^%s: no such configuration file$" % re.escape(missing),
        )


def _model_dir(directory, paths):
    """A model directory with a random-weight tiny LDR Transformer (checkpoint at step 3)
    and its run configuration; returns the configuration's path."""
    model = helpers.FAMILIES["ldr_transformer"]()
    params = {"beam_width": 1, "maximum_decoding_length": MAX_LENGTH}
    model.initialize(corpus.data_config(paths), params=params)
    model.create_variables()
    helpers.randomize_weights(model, 5)
    model_dir = os.path.join(directory, "ldr")
    os.makedirs(model_dir)
    _write(os.path.join(model_dir, "model_description.py"), (DEFINITION % LDR).splitlines())
    opennmt.utils.checkpoint.Checkpoint(model, model_dir=model_dir).save(step=3)
    config = {
        "model_dir": model_dir,
        "data": corpus.data_config(paths),
        "params": params,
        "infer": {"batch_size": 4},
    }
    return _write_config(os.path.join(directory, "ldr.yml"), config)


@pytest.mark.slow
class InferExportTest(helpers.SharedDirTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.paths = corpus.write_corpus(os.path.join(cls.dir, "data"), count=10)
        cls.config = _model_dir(cls.dir, cls.paths)
        cls.features = [cls.paths["train_src"], cls.paths["train_domain"]]

    def _infer(self, output, *extra):
        argv = ["--config", self.config, "infer", "--features_file", *self.features]
        return helpers.run_cli(cli.main, argv + ["--predictions_file", output, *extra])

    def test_infer_counts_translations_stopped_at_the_limit(self):
        output = os.path.join(self.dir, "pred.txt")
        status, stderr = self._infer(output)
        self.assertEqual(status, None, stderr[-3000:])  # onmt-main's main() returns None.
        lines = _read(output)
        n = len(_read(self.paths["train_src"]))
        self.assertLen(lines, n)
        stopped = sum(1 for line in lines if len(line.split()) == MAX_LENGTH)
        self.assertGreater(stopped, 0)  # Random weights rarely produce the end token.
        warnings = [line for line in stderr.splitlines() if "translations stopped" in line]
        self.assertLen(warnings, 1)
        self.assertRegex(
            warnings[0],
            r" W .*\] %d of %d translations stopped at maximum_decoding_length \(%d\): they may "
            r"be cut short \(raise params: maximum_decoding_length\)$" % (stopped, n, MAX_LENGTH),
        )
        self.assertEqual(sorted(os.listdir(self.dir)).count("pred.txt"), 1)
        self.assertEqual([f for f in os.listdir(self.dir) if f.startswith(".pred.txt")], [])

    def test_runner_infer_warns_as_ldr_eval_sees_it(self):
        # ldr-eval translates through Runner.infer, without ldr-main.
        runner = Runner.from_files([self.config])
        output = os.path.join(self.dir, "runner_pred.txt")
        with self.assertLogs(tf.get_logger(), "WARNING") as logs:
            runner.infer(self.features, predictions_file=output)
        stopped = sum(1 for line in _read(output) if len(line.split()) == MAX_LENGTH)
        n = len(_read(self.paths["train_src"]))
        self.assertIn(
            "%d of %d translations stopped at maximum_decoding_length (%d)"
            % (stopped, n, MAX_LENGTH),
            "\n".join(logs.output),
        )

    def test_interrupted_infer_leaves_no_predictions_file(self):
        output = os.path.join(self.dir, "killed.txt")
        original = opennmt.models.SequenceToSequence.print_prediction
        calls = []

        def _print_then_die(model, prediction, params=None, stream=None):
            if len(calls) == 3:
                raise KeyboardInterrupt()  # What a kill in the middle of writing does.
            calls.append(prediction)
            return original(model, prediction, params=params, stream=stream)

        with mock.patch.object(
            opennmt.models.SequenceToSequence, "print_prediction", _print_then_die
        ):
            status, stderr = self._infer(output)
        # Ctrl-C: one line and 130 (issue 56), no traceback, no predictions file.
        self.assertEqual(status, errors.INTERRUPTED_STATUS, stderr[-3000:])
        self.assertEqual(stderr.strip().splitlines()[-1], "ldr-opennmt: interrupted")
        self.assertNotIn("Traceback", stderr)
        self.assertLen(calls, 3)
        self.assertEqual([f for f in os.listdir(self.dir) if "killed" in f], [])

    def test_infer_and_export_without_checkpoint_write_nothing(self):
        # OpenNMT-tf translates with random weights, or exports fail with an
        # AttributeError traceback.
        empty = os.path.join(self.dir, "no_checkpoint")
        os.makedirs(empty)
        _write(os.path.join(empty, "model_description.py"), (DEFINITION % LDR).splitlines())
        output = os.path.join(self.dir, "none.txt")
        argv = ["--config", self.config, "--model_dir", empty]
        infer = ["infer", "--features_file", *self.features, "--predictions_file", output]
        export = ["export", "--output_dir", output]
        for run in (infer, export):
            helpers.assert_cli_error(
                self, cli.main, argv + run, "^%s: no checkpoint found$" % re.escape(empty)
            )
            self.assertFalse(os.path.exists(output))
        self.assertEqual(os.listdir(empty), ["model_description.py"])

    def test_outputs_that_cannot_be_written_are_refused_before_any_work(self):
        # Issue 71 (7): infer translated everything, then failed on the read-only folder
        # with a traceback; export and a training's model_dir the same.
        locked = helpers.unwritable_directory(self, self.dir)
        output = os.path.join(locked, "pred.txt")
        with mock.patch.object(Runner, "infer", side_effect=AssertionError("translated")):
            helpers.assert_cli_error(
                self,
                cli.main,
                ["--config", self.config, "infer", "--features_file", *self.features,
                 "--predictions_file", output],  # fmt: skip
                r"^--predictions_file %s: cannot write in %s \(" % (re.escape(output), locked),
            )
            export_dir = os.path.join(locked, "export")
            helpers.assert_cli_error(
                self,
                cli.main,
                ["--config", self.config, "export", "--output_dir", export_dir],
                r"^--output_dir %s: cannot write in " % re.escape(export_dir),
            )
            model_dir = os.path.join(locked, "model")
            helpers.assert_cli_error(
                self,
                cli.main,
                ["--config", self.config, "--model_dir", model_dir, "train"],
                r"^model_dir %s: cannot write in " % re.escape(model_dir),
            )
        self.assertFalse(os.path.exists(output))

    def test_infer_into_a_missing_directory(self):
        output = os.path.join(self.dir, "none", "pred.txt")
        argv = ["--config", self.config, "infer", "--features_file", *self.features]
        helpers.assert_cli_error(
            self,
            cli.main,
            argv + ["--predictions_file", output],
            "^%s: directory %s not found$"
            % (re.escape(output), re.escape(os.path.dirname(output))),
        )

    def _export(self, export_dir):
        argv = ["--config", self.config, "export", "--output_dir", export_dir]
        return helpers.run_cli(cli.main, argv)

    def test_export_is_complete_or_absent(self):
        parent = os.path.join(self.dir, "exports")
        os.makedirs(parent)
        export_dir = os.path.join(parent, "ldr")
        # Killed after the SavedModel, before assets.extra/: nothing is left.
        with mock.patch.object(
            models.MultiDomainTransformer, "export_assets", side_effect=KeyboardInterrupt()
        ):
            status, stderr = self._export(export_dir)
        self.assertEqual(status, errors.INTERRUPTED_STATUS, stderr[-3000:])
        self.assertEqual(os.listdir(parent), [])
        status, stderr = self._export(export_dir)
        self.assertIsNone(status, stderr[-3000:])
        self.assertEqual(os.listdir(parent), ["ldr"])
        self.assertEqual(
            _read(os.path.join(export_dir, "assets.extra", "domains.txt")), corpus.DOMAINS
        )

        # ldr-translate refuses an export without its domains.txt (an interrupted one
        # made by another tool), naming the directory, before translating anything.
        source = _write(os.path.join(self.dir, "in.txt"), ["the big cell", "a host"])
        output = os.path.join(self.dir, "out.txt")
        argv = ["--export", export_dir, "--domain", "medical", "--tokenized"]
        argv += ["--input", source, "--output", output]
        status, stderr = helpers.run_cli(translate.main, argv)
        self.assertEqual(status, 0, stderr[-3000:])
        translations = _read(output)
        self.assertLen(translations, 2)
        # The export keeps maximum_decoding_length; ldr-translate counts the stops.
        stopped = sum(1 for line in translations if len(line.split()) == MAX_LENGTH)
        self.assertGreater(stopped, 0)
        self.assertEqual(
            stderr.strip().splitlines()[-1],
            "ldr-translate: warning: %d of 2 translations stopped at maximum_decoding_length "
            "(%d): they may be cut short (export the model again with a larger params: "
            "maximum_decoding_length)" % (stopped, MAX_LENGTH),
        )
        os.remove(output)
        os.remove(os.path.join(export_dir, "assets.extra", "domains.txt"))
        helpers.assert_cli_error(
            self,
            translate.main,
            argv,
            r"^%s: incomplete export \(no assets.extra/domains.txt: interrupted, or made by an "
            r"older version\): export the model again$" % re.escape(export_dir),
        )
        self.assertFalse(os.path.exists(output))

    def test_export_refuses_a_directory_that_is_not_an_export(self):
        directory = os.path.join(self.dir, "notes")
        os.makedirs(directory)
        _write(os.path.join(directory, "notes.txt"), ["keep me"])
        helpers.assert_cli_error(
            self,
            cli.main,
            ["--config", self.config, "export", "--output_dir", directory],
            "^%s: not empty and not an export made by ldr-opennmt" % re.escape(directory),
        )
        self.assertEqual(os.listdir(directory), ["notes.txt"])


class ListFamiliesTest(tf.test.TestCase):
    def test_a_user_module_that_fails_is_one_line(self):
        # A module name (not a file) that raises, or calls sys.exit, at import: one line
        # naming the module and the cause, exit 2 (it was a traceback, or a silent exit 3).
        directory = self.get_temp_dir()
        _write(os.path.join(directory, "raising_user_module.py"), ["import no_such_dependency"])
        _write(os.path.join(directory, "exiting_user_module.py"), ["import sys", "sys.exit(3)"])
        sys.path.insert(0, directory)
        try:
            for name, regex in (
                ("raising_user_module", "No module named 'no_such_dependency'"),
                ("exiting_user_module", r"it called sys.exit\(3\) while being imported"),
            ):
                helpers.assert_cli_error(
                    self,
                    cli.main,
                    ["--list-families", "--user_module", name],
                    "^user module %s: .*%s" % (name, regex),
                )
        finally:
            sys.path.remove(directory)


@pytest.mark.slow
class PredictDomainsTest(helpers.SharedDirTestCase):
    def test_predictions_do_not_follow_a_planted_link(self):
        paths = corpus.write_corpus(os.path.join(self.dir, "data"), count=4)
        model = models.domain_classifier(8, 8, dropout=0.0)
        data = {"source_vocabulary": paths["src_vocab"], "domains": list(corpus.DOMAINS)}
        model.initialize(data, params={})
        model.create_variables()
        model_dir = os.path.join(self.dir, "classifier")
        os.makedirs(model_dir)
        _write(
            os.path.join(model_dir, "model_description.py"),
            (DEFINITION % ("domain_classifier", "8, 8, dropout=0.0")).splitlines(),
        )
        opennmt.utils.checkpoint.Checkpoint(model, model_dir=model_dir).save(step=1)
        config = _write_config(
            os.path.join(self.dir, "classifier.yml"), {"model_dir": model_dir, "data": data}
        )
        out = os.path.join(self.dir, "pred")
        os.makedirs(out)
        victim = _write(os.path.join(self.dir, "victim.txt"), ["untouched"])
        # The name the command used to write to before renaming: a planted link there
        # must not redirect the predictions.
        os.symlink(victim, os.path.join(out, "test.pred.partial"))
        argv = ["--config", config, "predict_domains", "--output_dir", out]
        status, stderr = helpers.run_cli(cli.main, argv + ["--features_file", paths["test_src"]])
        self.assertEqual(status, 0, stderr[-3000:])
        self.assertEqual(_read(victim), ["untouched"])
        predictions = _read(os.path.join(out, "test.pred"))
        self.assertLen(predictions, len(_read(paths["test_src"])))
        self.assertContainsSubset(set(predictions), set(corpus.DOMAINS))
        self.assertEqual(sorted(os.listdir(out)), ["test.pred", "test.pred.partial"])


if __name__ == "__main__":
    tf.test.main()
