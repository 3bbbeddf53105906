"""End to end with stock ``onmt-main``: train, resume, infer, and bad input."""

import json
import os
import shutil
import subprocess
import sys

import pytest
import tensorflow as tf
import yaml

from tests import corpus, helpers

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ONMT_MAIN = os.path.join(os.path.dirname(sys.executable), "onmt-main")


def _onmt_main(*args):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONWARNINGS="ignore")
    return subprocess.run(
        [ONMT_MAIN, *args], capture_output=True, text=True, env=env, cwd=ROOT, timeout=900
    )


def _write_config(path, model_dir, data, max_step=60, **params):
    config = {
        "model_dir": model_dir,
        "data": data,
        "params": dict(
            {"optimizer": "Adam", "learning_rate": 0.003, "decay_type": None, "beam_width": 2},
            **params,
        ),
        "train": {
            "batch_size": 24,
            "batch_type": "examples",
            "effective_batch_size": None,
            "max_step": max_step,
            "save_checkpoints_steps": 30,
            "keep_checkpoint_max": 3,
            "average_last_checkpoints": 0,
            "sample_buffer_size": 0,
            "save_summary_steps": 20,
        },
        "infer": {"batch_size": 8},
    }
    with open(path, "w") as f:
        yaml.safe_dump(config, f)
    return path


def _checkpoints(model_dir):
    if not os.path.isdir(model_dir):
        return []
    return [name for name in os.listdir(model_dir) if name.startswith("ckpt-")]


@pytest.mark.e2e
class OnmtMainTest(helpers.SharedDirTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.paths = corpus.write_corpus(os.path.join(cls.dir, "data"), count=40)
        cls.model_dir = os.path.join(cls.dir, "ldr")
        cls.config = _write_config(
            os.path.join(cls.dir, "ldr.yml"), cls.model_dir, corpus.data_config(cls.paths)
        )
        cls.train = _onmt_main(
            "--model",
            "model_defs/small/ldr_transformer.py",
            "--config",
            cls.config,
            "--auto_config",
            "train",
        )

    def _bad_copy(self, name, lines):
        path = os.path.join(self.dir, name)
        with open(path, "w") as f:
            f.write("".join(line + "\n" for line in lines))
        return path

    def _infer(self, source, labels, output):
        return _onmt_main(
            "--config",
            self.config,
            "--auto_config",
            "infer",
            "--features_file",
            source,
            labels,
            "--predictions_file",
            output,
        )

    def test_train_runs_procedure1(self):
        self.assertEqual(self.train.returncode, 0, msg=self.train.stderr[-3000:])
        self.assertIn("Step = 60", self.train.stderr)
        self.assertIn("ckpt-60.index", os.listdir(self.model_dir))
        with open(os.path.join(self.model_dir, "model_description.py")) as f:
            self.assertIn("ldr_transformer", f.read())
        # Stock onmt-main records the domains as ldr-main does (issue 47 item 2): ldr-export
        # and ldr-eval then check the domain order instead of warning at every step.
        with open(os.path.join(self.model_dir, "domains.json")) as f:
            self.assertEqual(json.load(f), {"domains": corpus.DOMAINS, "regions": 3})

    def test_infer_oracle_and_generic(self):
        # One run (an onmt-main process is seconds of start-up): the true label on odd lines,
        # generic on even ones.
        self.assertEqual(self.train.returncode, 0)
        oracle = corpus.read_lines(self.paths["test_domain"])
        n = len(oracle)
        labels = self._bad_copy(
            "test.oracle_generic", [o if i % 2 else "generic" for i, o in enumerate(oracle)]
        )
        self.assertEqual(len(set(corpus.read_lines(labels))), len(corpus.DOMAINS) + 1)
        output = os.path.join(self.dir, "pred.oracle_generic")
        result = self._infer(self.paths["test_src"], labels, output)
        self.assertEqual(result.returncode, 0, msg=result.stderr[-3000:])
        with open(output) as f:
            lines = f.read().splitlines()
        self.assertLen(lines, n)
        self.assertTrue(all(line.strip() for line in lines))

    def test_infer_ensembles_of_domain_views(self):
        self.assertEqual(self.train.returncode, 0)
        n = sum(1 for _ in open(self.paths["test_src"]))
        cycle = ["ens-uniform", "medical:0.5 generic:0.5", "religious", "software:1"]
        labels = self._bad_copy("test.ens", [cycle[i % 4] for i in range(n)])
        for features, name in ((labels, "mixed"), ("domain:ens-uniform", "uniform")):
            output = os.path.join(self.dir, "pred.%s" % name)
            result = self._infer(self.paths["test_src"], features, output)
            self.assertEqual(result.returncode, 0, msg=result.stderr[-3000:])
            with open(output) as f:
                self.assertLen(f.read().splitlines(), n)
        bad = self._bad_copy("test.badens", ["medical"] * (n - 1) + ["medical:0.5 generic:0.6"])
        output = os.path.join(self.dir, "pred.badens")
        result = self._infer(self.paths["test_src"], bad, output)
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("test.badens:%d: " % n, result.stderr)
        self.assertIn("ensemble weights sum to 1.1, not 1", result.stderr)
        self.assertFalse(os.path.exists(output))

    def test_evaluate_with_domain_labels(self):
        # OpenNMT-tf regroups the flat file list [src, labels, tgt] for evaluation.
        self.assertEqual(self.train.returncode, 0)
        result = _onmt_main(
            "--config",
            self.config,
            "--auto_config",
            "eval",
            "--features_file",
            self.paths["test_src"],
            self.paths["test_domain"],
            "--labels_file",
            self.paths["test_tgt"],
        )
        self.assertEqual(result.returncode, 0, msg=result.stderr[-3000:])
        self.assertRegex(result.stderr, r"Evaluation result for step 60: loss = [0-9.]+")

    def test_resume_from_last_checkpoint(self):
        self.assertEqual(self.train.returncode, 0)
        # In a copy: the other tests read the shared model dir at step 60.
        model_dir = os.path.join(self.dir, "resumed")
        shutil.copytree(self.model_dir, model_dir)
        config = _write_config(
            os.path.join(self.dir, "resume.yml"),
            model_dir,
            corpus.data_config(self.paths),
            max_step=70,
        )
        result = _onmt_main(
            "--model",
            "model_defs/small/ldr_transformer.py",
            "--config",
            config,
            "--auto_config",
            "train",
        )
        self.assertEqual(result.returncode, 0, msg=result.stderr[-3000:])
        self.assertIn("Restored checkpoint %s/ckpt-60" % model_dir, result.stderr)
        self.assertIn("ckpt-70.index", os.listdir(model_dir))
        self.assertNotIn("ckpt-70.index", os.listdir(self.model_dir))

    def test_a_finished_training_run_again_says_so(self):
        # Round six: stock onmt-main raised a 33-line "RuntimeError: The training already
        # reached max_step". The shared model is at its max_step 60.
        self.assertEqual(self.train.returncode, 0)
        before = sorted(os.listdir(self.model_dir))
        result = _onmt_main(
            "--model", "model_defs/small/ldr_transformer.py", "--config", self.config,
            "--auto_config", "train",
        )  # fmt: skip
        self.assertEqual(result.returncode, 0, msg=result.stderr[-3000:])
        self.assertIn(
            "%s is trained: its last checkpoint (ckpt-60) reached train: max_step 60; nothing to"
            " train" % self.model_dir,
            result.stderr,
        )
        self.assertNotIn("Traceback", result.stderr)
        self.assertEqual(sorted(os.listdir(self.model_dir)), before)

    def test_infer_unknown_label_writes_nothing(self):
        labels = self._bad_copy("test.bad", ["medical", "medical", "legal"])
        source = self._bad_copy("test3.src", ["the cell", "a host", "spirit"])
        output = os.path.join(self.dir, "pred.bad")
        result = self._infer(source, labels, output)
        self.assertEqual(result.returncode, 2)
        self.assertEqual(
            result.stderr.strip().splitlines()[-1],
            "ldr-opennmt: error: %s:3: unknown domain label 'legal' "
            "(declared: medical, religious, software, or generic)" % labels,
        )
        self.assertFalse(os.path.exists(output))

    def _train_fails(self, data, message, model="model_defs/small/ldr_transformer.py"):
        model_dir = os.path.join(self.dir, "bad_%d" % len(os.listdir(self.dir)))
        config = _write_config(os.path.join(model_dir + ".yml"), model_dir, data, max_step=2)
        result = _onmt_main("--model", model, "--config", config, "--auto_config", "train")
        self.assertEqual(result.returncode, 2, msg=result.stderr[-2000:])
        last = result.stderr.strip().splitlines()[-1]
        self.assertRegex(last, "^ldr-opennmt: error: " + message)
        self.assertEqual(_checkpoints(model_dir), [])

    def test_train_bad_inputs(self):
        data = corpus.data_config(self.paths)
        labels = open(self.paths["train_domain"]).read().splitlines()
        n = len(labels)

        unknown = self._bad_copy("unknown.domain", labels[:4] + ["legal"] + labels[5:])
        self._train_fails(
            dict(data, train_features_file=[self.paths["train_src"], unknown]),
            r".*unknown\.domain:5: unknown domain label 'legal'",
        )
        short = self._bad_copy("short.domain", labels[:-2])
        self._train_fails(
            dict(data, train_features_file=[self.paths["train_src"], short]),
            r".*short\.domain:%d: missing domain label \(%d labels, but .*train\.src has %d lines\)"
            % (n - 1, n - 2, n),
        )
        empty = self._bad_copy("empty.domain", labels[:6] + [""] + labels[7:])
        self._train_fails(
            dict(data, train_features_file=[self.paths["train_src"], empty]),
            r".*empty\.domain:7: empty domain label",
        )
        no_domains = dict(data)
        del no_domains["domains"]
        self._train_fails(no_domains, r".*declares no domains")
        self._train_fails(
            dict(data, train_features_file=self.paths["train_src"]),
            r"expected a source file and an aligned domain label file",
        )
        # A repeated key (OpenNMT-tf's loader keeps the last one without a word): refused when
        # the model definition installs the package's patches, naming both lines.
        model_dir = os.path.join(self.dir, "repeated")
        path = _write_config(os.path.join(self.dir, "repeated.yml"), model_dir, data, max_step=2)
        with open(path, "a") as f:
            f.write("params:\n  learning_rate: 0.1\n")
        result = _onmt_main(
            "--model", "model_defs/small/ldr_transformer.py", "--config", path, "train"
        )  # fmt: skip
        self.assertEqual(result.returncode, 2, msg=result.stderr[-2000:])
        self.assertRegex(
            result.stderr.strip().splitlines()[-1],
            r"^ldr-opennmt: error: .*repeated\.yml:\d+: invalid YAML: key 'params' repeats the"
            r" one of line \d+",
        )
        # Stock onmt-main makes model_dir before it imports the definition: nothing in it.
        self.assertEqual(os.listdir(model_dir) if os.path.exists(model_dir) else [], [])

    def test_mixed_needs_no_domains(self):
        data = corpus.data_config(self.paths)
        del data["domains"]
        data["train_features_file"] = self.paths["train_src"]
        model_dir = os.path.join(self.dir, "mixed")
        config = _write_config(os.path.join(self.dir, "mixed.yml"), model_dir, data, max_step=3)
        result = _onmt_main(
            "--model",
            "model_defs/small/mixed_transformer.py",
            "--config",
            config,
            "--auto_config",
            "train",
        )
        self.assertEqual(result.returncode, 0, msg=result.stderr[-3000:])
        self.assertIn("ckpt-3.index", os.listdir(model_dir))


if __name__ == "__main__":
    tf.test.main()
