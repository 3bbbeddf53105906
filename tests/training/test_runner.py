"""The multi-domain Runner: per-domain corpora and evaluation, fine-tuning, ldr-main."""

import copy
import hashlib
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
import yaml

from ldr_opennmt import domains, models
from ldr_opennmt.errors import UserError
from ldr_opennmt.training.runner import Runner
from tests import corpus, helpers

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SIZES = {"medical": 30, "religious": 60, "software": 20}


def _ldr():
    return models.ldr_transformer(domain_region_size=2, **helpers.TINY)


def _config(directory, model_dir, **train):
    paths = corpus.write_corpus(os.path.join(directory, "data"), count=20)
    config = {
        "model_dir": model_dir,
        "data": {
            "source_vocabulary": paths["src_vocab"],
            "target_vocabulary": paths["tgt_vocab"],
            "train_corpora": corpus.write_domain_corpora(os.path.join(directory, "data"), SIZES),
            "eval_corpora": corpus.write_domain_corpora(
                os.path.join(directory, "data"), {d: 4 for d in SIZES}, seed=1, split="dev"
            ),
        },
        "params": {
            "optimizer": "Adam",
            "learning_rate": 0.01,
            "beam_width": 1,
            "maximum_decoding_length": 8,
            "domain_training": "procedure1",
        },
        "train": dict(
            {
                "batch_size": 8,
                "max_step": 6,
                "save_checkpoints_steps": 3,
                "sample_buffer_size": 100,
                "domain_sampling_alpha": 0.5,
            },
            **train,
        ),
        "eval": {"steps": 3, "scorers": "bleu", "batch_size": 8},
    }
    return config


def _digest(directory):
    digest = hashlib.sha256()
    for name in sorted(os.listdir(directory)):
        path = os.path.join(directory, name)
        if os.path.isfile(path):
            with open(path, "rb") as f:
                digest.update(name.encode() + f.read())
    return digest.hexdigest()


@pytest.mark.slow
class RunnerTest(helpers.SharedDirTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.config = _config(cls.dir, os.path.join(cls.dir, "base"))
        cls.runner = Runner(_ldr, cls.config, seed=3)
        cls.runner.train(with_eval=True)

    def test_training_data_from_corpora(self):
        data = self.runner.config["data"]
        self.assertEqual(data["domains"], list(SIZES))
        self.assertTrue(data["domain_batches"])
        # |C_i|^(alpha - 1): OpenNMT-tf multiplies by the sizes.
        self.assertAllClose(data["train_files_weights"], [s**-0.5 for s in SIZES.values()])
        self.assertEqual(tf.train.latest_checkpoint(self.config["model_dir"])[-6:], "ckpt-6")

    def test_a_finished_training_run_again_says_so_and_writes_nothing(self):
        # Round six: OpenNMT-tf raised a 33-line "RuntimeError: The training already reached
        # max_step". The base model is at its max_step 6.
        before = _digest(self.config["model_dir"])
        with self.assertLogs(level="WARNING") as logs:
            result = Runner(_ldr, copy.deepcopy(self.config), seed=3).train()
        self.assertEqual(result, self.config["model_dir"])
        said = [line for line in logs.output if "is trained" in line]
        self.assertLen(said, 1)
        self.assertIn(
            "is trained: its last checkpoint (ckpt-6) reached train: max_step 6; nothing to"
            " train (raise max_step to continue the training)",
            said[0],
        )
        self.assertEqual(_digest(self.config["model_dir"]), before)

    def test_per_domain_evaluation(self):
        eval_dir = os.path.join(self.config["model_dir"], "eval")
        for step in (3, 6):
            for domain in SIZES:
                path = os.path.join(eval_dir, "predictions.%s.txt.%d" % (domain, step))
                self.assertEqual(domains.count_lines(path), 4)
        metrics = self.runner.evaluate()
        for domain in SIZES:
            for name in ("loss", "perplexity", "bleu"):
                self.assertIn("%s/%s" % (domain, name), metrics)
        self.assertAllClose(metrics["bleu"], np.mean([metrics[d + "/bleu"] for d in SIZES]))
        losses = [metrics[d + "/loss"] for d in SIZES]
        self.assertBetween(metrics["loss"], min(losses), max(losses))
        # The per-domain values also go to TensorBoard summaries.
        self.assertTrue(any(n.startswith("events") for n in os.listdir(eval_dir)), eval_dir)

    def test_summed_corpus_share_reads_the_corpora(self):
        # ldr-main's corpora are constant label specifications, one per weighted file: the
        # generic loss of each sentence is weighted by its domain's share of the lines.
        config = copy.deepcopy(self.config)
        config["model_dir"] = os.path.join(self.dir, "summed")
        config["params"].update(domain_training="summed", summed_generic_weight="corpus_share")
        config["train"]["max_step"] = 2
        with self.assertLogs("tensorflow", level="INFO") as logs:
            Runner(_ldr, config, seed=3).train()
        total = sum(SIZES.values())
        expected = ", ".join(
            ["generic 0.0000"] + ["%s %.4f" % (d, n / total) for d, n in SIZES.items()]
        )
        self.assertTrue(any(expected in line for line in logs.output), logs.output)
        self.assertEqual(tf.train.latest_checkpoint(config["model_dir"])[-6:], "ckpt-2")

    def test_resuming_with_another_model_is_refused_before_anything_is_written(self):
        # A model definition changed between two runs on one model_dir: the checkpoint is
        # compared with the new model before training (it was restored in part, then the
        # first step failed on a shape, or trained on another model's weights).
        import shutil

        config = copy.deepcopy(self.config)
        config["model_dir"] = os.path.join(self.dir, "changed")
        shutil.copytree(self.config["model_dir"], config["model_dir"])
        config["train"]["max_step"] = 9
        before = _digest(config["model_dir"])

        def other():
            return models.ldr_transformer(domain_region_size=3, **helpers.TINY)

        with self.assertRaisesRegex(UserError, "ckpt-6: not a checkpoint of this model"):
            Runner(other, config, seed=3).train()
        self.assertEqual(_digest(config["model_dir"]), before)

    def test_finetune_keeps_the_base_model(self):
        base_dir = self.config["model_dir"]
        before = _digest(base_dir)
        config = copy.deepcopy(self.config)
        config["model_dir"] = os.path.join(self.dir, "ft_software")
        config["finetune"] = {"base": base_dir, "domain": "software", "steps": 4}
        config["train"]["save_checkpoints_steps"] = 2
        Runner(_ldr, config, seed=3).train()
        self.assertEqual(_digest(base_dir), before)
        fine_tuned = tf.train.latest_checkpoint(config["model_dir"])
        self.assertTrue(fine_tuned.endswith("ckpt-10"), fine_tuned)
        with open(os.path.join(config["model_dir"], "finetune.json")) as f:
            self.assertEqual(json.load(f)["base_step"], 6)
        base = tf.train.load_checkpoint(base_dir)
        tuned = tf.train.load_checkpoint(config["model_dir"])
        prefix = "model/examples_inputter/features_inputter/word_inputter/"
        suffix = "/.ATTRIBUTES/VARIABLE_VALUE"
        # Only the software data was seen: the other domains' regions are untouched.
        for name, moved in (
            ("domain_0_embedding", False),
            ("domain_1_embedding", False),
            ("domain_2_embedding", True),
            ("embedding", True),
        ):
            key = prefix + name + suffix
            self.assertEqual(
                not np.array_equal(base.get_tensor(key), tuned.get_tensor(key)), moved, name
            )
        # Rerunning resumes the fine-tuning from its own checkpoint: nothing left to do.
        Runner(_ldr, config, seed=3).train()
        self.assertEqual(tf.train.latest_checkpoint(config["model_dir"]), fine_tuned)
        self.assertEqual(_digest(base_dir), before)

    def test_finetune_bad_input(self):
        config = copy.deepcopy(self.config)
        config["model_dir"] = os.path.join(self.dir, "ft_bad")
        config["finetune"] = {"base": self.config["model_dir"], "domain": "legal", "steps": 4}
        with self.assertRaisesRegex(
            UserError, r"finetune: domain 'legal' is not declared \(declared: medical"
        ):
            Runner(_ldr, config)
        config["finetune"]["domain"] = "medical"
        config["model_dir"] = self.config["model_dir"]
        with self.assertRaisesRegex(UserError, "base model stays intact"):
            Runner(_ldr, config).train()
        config["model_dir"] = os.path.join(self.dir, "ft_bad")
        config["finetune"]["base"] = os.path.join(self.dir, "nothing")
        os.makedirs(config["finetune"]["base"], exist_ok=True)
        with self.assertRaisesRegex(UserError, "finetune: base: no checkpoint found"):
            Runner(_ldr, config).train()

    def test_mixed_batches_get_a_full_shuffle_buffer(self):
        config = copy.deepcopy(self.config)
        config["data"]["domain_batches"] = False
        config["train"]["sample_buffer_size"] = -1
        runner = Runner(_ldr, config)
        self.assertNotIn("domain_batches", [k for k, v in runner.config["data"].items() if v])
        # OpenNMT-tf refuses -1 for weighted datasets: all corpora together instead.
        finalized = runner.finalized_config(training=True)
        self.assertEqual(finalized["train"]["sample_buffer_size"], sum(SIZES.values()))

    def test_domain_batches_has_one_place(self):
        config = copy.deepcopy(self.config)
        config["train"]["domain_batches"] = False
        with self.assertRaisesRegex(UserError, "^train: domain_batches .* write data: domain_b"):
            Runner(_ldr, config)

    def test_corpora_and_file_lists_are_exclusive(self):
        config = copy.deepcopy(self.config)
        config["data"]["train_features_file"] = ["a", "b"]
        with self.assertRaisesRegex(UserError, "either train_corpora or"):
            Runner(_ldr, config)


class ValidationTest(helpers.SharedDirTestCase):
    """Configuration errors stop ``train`` before it writes anything."""

    def _config(self, name):
        config = _config(os.path.join(self.dir, name), os.path.join(self.dir, name, "run"))
        return config

    def _train_fails(self, config, regex):
        with self.assertRaisesRegex(UserError, regex):
            Runner(_ldr, config).train(with_eval=True)
        self.assertFalse(os.path.exists(config["model_dir"]))

    def test_missing_vocabulary_names_the_key(self):
        config = self._config("vocab")
        missing = os.path.join(self.dir, "none.vocab")
        config["data"]["target_vocabulary"] = missing
        with self.assertRaisesRegex(
            UserError, "^data: target_vocabulary: file not found: %s$" % missing
        ):
            Runner(_ldr, config)

    def test_vocabulary_contents_are_checked_with_the_configuration(self):
        # OpenNMT-tf failed on each with an error that named neither the key nor the file
        # (ValueError, UnicodeDecodeError, FailedPreconditionError from the lookup table).
        config = self._config("vocab_contents")
        cases = [
            ("empty.vocab", b"", "^data: source_vocabulary: empty vocabulary file: {}$"),
            (
                "latin1.vocab",
                b"a\ncaf\xe9\n",
                r"^{}:2: not UTF-8 \(byte 0xe9 at byte 4 of the line\)$",
            ),
            ("dup.vocab", b"a\nb\r\nb\n<unk>\n", "^{}:3: token 'b' repeats line 2$"),
            (
                "blank.vocab",
                b"a\n\r\nb\n",
                r"^{}:2: empty line \(a vocabulary has one token per line\)$",
            ),
        ]
        for name, data, regex in cases:
            with self.subTest(name=name):
                path = os.path.join(self.dir, name)
                with open(path, "wb") as f:
                    f.write(data)
                config["data"]["source_vocabulary"] = path
                with self.assertRaisesRegex(UserError, regex.format(re.escape(path))):
                    Runner(_ldr, copy.deepcopy(config))
        self.assertFalse(os.path.exists(config["model_dir"]))

    def test_vocabulary_paths_are_one_line(self):
        config = self._config("vocab_paths")
        for path, regex in [
            ("zz://host/vocab", r"^data: source_vocabulary: cannot read zz://host/vocab \(File "),
            ("none\n.vocab", r"^data: source_vocabulary: file not found: 'none\\n\.vocab'$"),
        ]:
            with self.subTest(path=path):
                config["data"]["source_vocabulary"] = path
                with self.assertRaisesRegex(UserError, regex):
                    Runner(_ldr, copy.deepcopy(config))

    def test_bad_label_file_writes_no_domain_record(self):
        config = self._config("labels")
        directory = os.path.dirname(config["model_dir"])
        paths = corpus.write_corpus(os.path.join(directory, "flat"), count=5)
        labels = domains.count_lines(paths["train_domain"])
        bad = os.path.join(directory, "bad.domain")
        corpus.write_lines(bad, ["medical"] * (labels - 1) + ["legal"])
        del config["data"]["train_corpora"]
        config["data"]["domains"] = corpus.DOMAINS
        config["data"]["train_features_file"] = [paths["train_src"], bad]
        config["data"]["train_labels_file"] = paths["train_tgt"]
        self._train_fails(config, "^%s:%d: unknown domain label 'legal'" % (bad, labels))

    def test_missing_eval_file(self):
        config = self._config("eval")
        del config["data"]["eval_corpora"]
        missing = os.path.join(self.dir, "none.src")
        config["data"]["eval_features_file"] = [missing, "domain:medical"]
        config["data"]["eval_labels_file"] = missing
        self._train_fails(config, "^data: eval_features_file: file not found: %s$" % missing)


@pytest.mark.e2e
class LdrMainTest(tf.test.TestCase):
    """The console script: onmt-main's command line with the multi-domain Runner."""

    def _run(self, config, *args):
        directory = self.get_temp_dir()
        path = os.path.join(directory, "config.yml")
        with open(path, "w") as f:
            yaml.safe_dump(config, f)
        command = [os.path.join(os.path.dirname(sys.executable), "ldr-main")]
        command += ["--model", "model_defs/small/ldr_transformer.py", "--config", path, *args]
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONWARNINGS="ignore")
        return subprocess.run(command, capture_output=True, text=True, cwd=ROOT, env=env)

    # ldr-main's per-domain evaluation is tested in process (RunnerTest.
    # test_per_domain_evaluation), ldr-main's training as a command by tests/training/
    # test_interrupt.py (kill -9, then resume).
    @helpers.skip_unless_full("about 50 s: ldr-main train --with_eval, then onmt-main infer")
    def test_train_with_eval_reports_each_domain(self):
        directory = self.get_temp_dir()
        config = _config(directory, os.path.join(directory, "run"), max_step=3)
        result = self._run(config, "train", "--with_eval")
        self.assertEqual(result.returncode, 0, result.stderr[-3000:])
        for domain in SIZES:
            self.assertIn(
                "Evaluation result for domain %s at step 3: loss =" % domain, result.stderr
            )
        self.assertIn(
            "Domain batches: a batch comes from medical (30 examples) with p=", result.stderr
        )
        self.assertTrue(os.path.exists(os.path.join(directory, "run", "ckpt-3.index")))
        # Stock onmt-main uses the same model directory (same checkpoint layout).
        stock = dict(config)
        stock["data"] = {
            "domains": list(SIZES),
            "source_vocabulary": config["data"]["source_vocabulary"],
            "target_vocabulary": config["data"]["target_vocabulary"],
        }
        path = os.path.join(directory, "stock.yml")
        with open(path, "w") as f:
            yaml.safe_dump(stock, f)
        data = os.path.join(directory, "data")
        result = subprocess.run(
            [os.path.join(os.path.dirname(sys.executable), "onmt-main"), "--config", path]
            + ["infer", "--features_file", data + "/test.src", data + "/test.domain"],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONWARNINGS="ignore"),
        )
        self.assertEqual(result.returncode, 0, result.stderr[-3000:])
        self.assertIn("Restored checkpoint", result.stderr)
        self.assertLen(result.stdout.splitlines(), domains.count_lines(data + "/test.src"))

    @helpers.skip_unless_full("about 2 minutes of OpenNMT-tf's batch size trials")
    def test_batch_size_autotuning_with_corpora(self):
        """OpenNMT-tf's auto-tuning (batch_size: 0) re-reads the expanded configuration
        with yaml.safe_load in child processes running stock opennmt.bin.main."""
        directory = self.get_temp_dir()
        config = _config(directory, os.path.join(directory, "auto"), max_step=2)
        # effective_batch_size caps the search at 40 examples: two child trainings.
        config["train"].update(
            batch_size=0,
            batch_type="examples",
            effective_batch_size=40,
            batch_size_autotune_timeout=600,
            # Auto-tuning pads every batch to these (set by --auto_config otherwise).
            maximum_features_length=20,
            maximum_labels_length=20,
        )
        result = self._run(config, "train")
        self.assertEqual(result.returncode, 0, result.stderr[-3000:])
        self.assertIn("succeeded, continue until the search range", result.stderr)
        self.assertRegex(result.stderr, r"Batch size auto tuned to \d+")
        self.assertTrue(os.path.exists(os.path.join(directory, "auto", "ckpt-2.index")))

    def test_negative_alpha_is_one_line(self):
        directory = self.get_temp_dir()
        config = _config(directory, os.path.join(directory, "bad"), domain_sampling_alpha=-1)
        result = self._run(config, "train")
        self.assertEqual(result.returncode, 2)
        self.assertEqual(
            result.stderr.strip().splitlines()[-1],
            "ldr-opennmt: error: train: domain_sampling_alpha must be >= 0, got -1.0",
        )
        self.assertFalse(os.path.exists(os.path.join(directory, "bad", "checkpoint")))


if __name__ == "__main__":
    tf.test.main()
