"""Two Horovod workers on CPU: Procedure 1, update skipping, sampling and who writes.

The tests that launch ``horovodrun -np 2 -H localhost:2`` are skipped where Horovod is not
installed (it is an optional build: bash run/install_horovod.sh); the helpers of
:mod:`ldr_opennmt.training.horovod` are also tested with a stand-in for Horovod, everywhere.
"""

import collections
import importlib.util
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
import yaml

from ldr_opennmt.errors import UserError
from ldr_opennmt.training import horovod
from tests import corpus, helpers

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.dirname(sys.executable)
HOROVODRUN = os.path.join(BIN, "horovodrun")
HAS_HOROVOD = importlib.util.find_spec("horovod") is not None and os.path.exists(HOROVODRUN)

requires_horovod = pytest.mark.skipif(
    not HAS_HOROVOD, reason="Horovod is not installed (optional: bash run/install_horovod.sh)"
)


class _Worker:
    """A stand-in for ``horovod.tensorflow`` on worker :obj:`rank`, whose broadcasts
    return :obj:`master` (worker 0's object) and :obj:`value` (worker 0's tensors)."""

    def __init__(self, rank, master=None, value=5.0):
        self._rank = rank
        self.master = master
        self.value = value
        self.names = []

    def rank(self):
        return self._rank

    def broadcast_object(self, obj, root_rank=0, name=None):
        self.names.append(name)
        return obj if self.master is None else self.master

    def broadcast(self, tensor, root_rank=0, name=None):
        self.names.append(name)
        return tf.fill(tf.shape(tensor), tf.constant(self.value, tensor.dtype))


class HorovodHelpersTest(tf.test.TestCase):
    def test_check_same(self):
        value = (["medical", "religious"], 3)
        horovod.check_same(None, value, "(domains, domain regions)")
        horovod.check_same(_Worker(1), value, "(domains, domain regions)")
        with self.assertRaisesRegex(
            UserError,
            r"^worker 1: \(domains, domain regions\) is \(\['medical', 'religious'\], 3\) but "
            r"worker 0 has \(\['medical', 'religious'\], 4\) \(with Horovod, every worker",
        ):
            horovod.check_same(
                _Worker(1, master=(["medical", "religious"], 4)), value, "(domains, domain regions)"
            )

    def test_from_master(self):
        self.assertEqual(horovod.from_master(None, 3, "x"), 3)
        self.assertEqual(horovod.from_master(_Worker(1, master=7), 3, "x"), 7)

    def test_broadcast_by_position(self):
        variables = [tf.Variable([1.0, 2.0]), tf.Variable([[3.0]])]
        worker = _Worker(1)
        horovod.broadcast_by_position(worker, variables, "b")
        self.assertAllEqual(variables[0], [5.0, 5.0])
        self.assertAllEqual(variables[1], [[5.0]])
        self.assertEqual(worker.names, ["b_signature", "b_0", "b_1"])  # By position.
        worker = _Worker(1, master=[((2,), "float32"), ((1, 1), "float32"), ((4,), "float32")])
        with self.assertRaisesRegex(
            UserError,
            r"^worker 1 built a different model than worker 0: 2 variables against 3, first "
            r"difference at variable 2 \(missing\)",
        ):
            horovod.broadcast_by_position(worker, variables, "b")
        self.assertAllEqual(variables[0], [5.0, 5.0])  # Nothing assigned.

    def test_optimizer_variables_do_not_depend_on_creation_order(self):
        variables = [tf.Variable(tf.ones([2]), name="a"), tf.Variable(tf.ones([3]), name="b")]
        created, listed = [], []
        for order in (variables, variables[::-1]):
            optimizer = tf.keras.optimizers.legacy.Adam()
            optimizer._create_all_weights(order)
            created.append([v.name for v in optimizer.variables()])
            listed.append([v.name for v in horovod.optimizer_variables(optimizer, variables)])
        self.assertNotEqual(created[0], created[1])
        self.assertEqual(listed[0], ["iter:0", "a/m:0", "a/v:0", "b/m:0", "b/v:0"])
        self.assertEqual(listed[1], listed[0])


def _horovodrun(command, cwd=ROOT, timeout=600):
    """Runs :obj:`command` (a shell command line) on two local Horovod workers."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONWARNINGS="ignore")
    env["PATH"] = BIN + os.pathsep + env.get("PATH", "")
    return subprocess.run(
        [HOROVODRUN, "-np", "2", "-H", "localhost:2", "sh", "-c", command],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=timeout,
    )


def _in_worker_dir(directory, command):
    """A shell command line run by each worker in its own ``directory/rankN``: files a
    worker writes under a relative path show which worker wrote them."""
    return 'cd "%s/rank$HOROVOD_RANK" && exec %s' % (directory, command)


@pytest.mark.e2e
@requires_horovod
class HorovodCheckTest(helpers.SharedDirTestCase):
    """tests/training/horovod_check.py on two workers: the numbers of one run."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.process = _horovodrun(
            '"%s" -m tests.training.horovod_check "%s"' % (sys.executable, cls.dir)
        )
        cls.results = []
        for rank in (0, 1):
            path = os.path.join(cls.dir, "check.%d.json" % rank)
            if os.path.exists(path):
                with open(path) as f:
                    cls.results.append(json.load(f))

    def setUp(self):
        self.assertEqual(len(self.results), 2, msg=self.process.stdout[-4000:])
        self.assertEqual([r["size"] for r in self.results], [2, 2])

    def test_averaged_gradients_equal_one_process_on_both_batches(self):
        for mode in ("procedure1", "joint"):
            worker0, worker1 = self.results[0][mode], self.results[1][mode]
            # Each worker trained on its own batch; the reference on both at once.
            self.assertEqual(worker0["sentences"] + worker1["sentences"], 8)
            self.assertEqual(worker0["reference_sentences"], 8)
            self.assertGreater(worker0["max_update"], 1e-2)
            self.assertLess(worker0["max_update_difference"], 1e-5 * worker0["max_update"])
            # After the update both workers hold the same weights.
            self.assertEqual(worker0["checksum"], worker1["checksum"])

    def test_resumed_run_first_update_starts_from_worker_0_weights(self):
        # Worker 1 starts from other weights (worker 0 alone restores the checkpoint):
        # they are replaced by worker 0's before the first update.
        resumed = self.results[0]["resumed"]
        self.assertLess(resumed["max_update_difference"], 1e-5 * resumed["max_update"])
        self.assertEqual(resumed["checksum"], self.results[1]["resumed"]["checksum"])
        # OpenNMT-tf's own trainer broadcasts after the first update: that update mixes
        # in gradients taken at worker 1's weights (what the Runner's trainer fixes).
        stock = self.results[0]["resumed_stock_trainer"]
        self.assertGreater(stock["max_update_difference"], 1e-2 * stock["max_update"])

    def test_absent_domain_kept_present_domains_updated(self):
        for mode in ("procedure1", "joint"):
            for result in self.results:
                changed = result[mode]["region_changed"]
                self.assertTrue(all(changed["0"]))  # medical: on worker 0 only
                self.assertTrue(all(changed["1"]))  # religious: on worker 1 only
                self.assertFalse(any(changed["2"]))  # software: on no worker

    def test_workers_draw_different_batches_with_the_formula_proportions(self):
        batches = [r["sampling"]["batches"] for r in self.results]
        # Each batch comes from one domain (Procedure 1's domain batches).
        for worker in batches:
            self.assertTrue(all(len(batch["domains"]) == 1 for batch in worker))
        # Each worker reads its own shard of every corpus: no sentence is read by both.
        sentences = [{s for batch in worker for s in batch["sources"]} for worker in batches]
        self.assertFalse(sentences[0] & sentences[1])
        self.assertEqual(len(sentences[0] | sentences[1]), 84)
        # The workers draw their domains independently (the same --seed on both)...
        same = sum(a["domains"] == b["domains"] for a, b in zip(*batches))
        self.assertLess(same, 0.75 * len(batches[0]))
        # ...with |C_i| / sum_j |C_j| (alpha = 1) over both workers.
        counts = collections.Counter(batch["domains"][0] for worker in batches for batch in worker)
        total = sum(counts.values())
        for domain, expected in self.results[0]["sampling"]["expected"].items():
            self.assertAllClose(counts[domain] / total, expected, atol=0.07)


def _corpora_config(directory, model_dir, max_step):
    """helpers.corpora_config, with per-domain dev sets evaluated every 3 steps."""
    config = helpers.corpora_config(directory, model_dir)
    config["data"]["eval_corpora"] = corpus.write_domain_corpora(
        os.path.join(directory, "data"), {d: 4 for d in corpus.DOMAINS}, seed=1, split="dev"
    )
    config["train"].update(
        {"max_step": max_step, "save_checkpoints_steps": 3, "sample_buffer_size": 0}
    )
    config["eval"] = {"steps": 3, "scorers": "bleu", "save_eval_predictions": True}
    return config


@pytest.mark.e2e
@requires_horovod
class HorovodCommandsTest(helpers.SharedDirTestCase):
    """``ldr-main`` and ``onmt-main`` with ``--horovod``: training, resuming, writing."""

    def _config(self, name, config):
        path = os.path.join(self.dir, name)
        with open(path, "w") as f:
            yaml.safe_dump(config, f)
        return path

    @classmethod
    def setUpClass(cls):
        super().setUpClass()

    def _workers(self, name):
        directory = os.path.join(self.dir, name)
        for rank in (0, 1):
            os.makedirs(os.path.join(directory, "rank%d" % rank), exist_ok=True)
        return directory

    def _train(self, workers, program, config_path, *train_args):
        """``PROGRAM ... train --horovod`` on two workers, each in its own directory."""
        command = "%s --model %s/model_defs/small/ldr_transformer.py --config %s train %s" % (
            program,
            ROOT,
            config_path,
            " ".join(train_args + ("--horovod",)),
        )
        process = _horovodrun(_in_worker_dir(workers, command))
        self.assertEqual(process.returncode, 0, msg=process.stdout[-4000:])
        return process

    def test_ldr_main_trains_resumes_and_only_worker_0_writes(self):
        workers = self._workers("ldr_main")
        # model_dir is relative: each worker resolves it in its own directory.
        config = _corpora_config(self.dir, "run", max_step=6)
        path = self._config("ldr_main.yml", config)
        process = self._train(workers, "ldr-main", path, "--with_eval")
        run0 = os.path.join(workers, "rank0", "run")
        self.assertFalse(os.path.exists(os.path.join(workers, "rank1", "run")))
        self.assertEqual(tf.train.latest_checkpoint(run0), os.path.join(run0, "ckpt-6"))
        with open(os.path.join(run0, "domains.json")) as f:
            self.assertEqual(json.load(f)["domains"], corpus.DOMAINS)
        self.assertTrue(os.path.exists(os.path.join(run0, "model_description.py")))
        predictions = os.listdir(os.path.join(run0, "eval"))
        self.assertTrue(any(name.endswith(".6") for name in predictions), msg=predictions)
        # Per-domain corpora: each worker draws one domain per batch.
        self.assertIn("Domain batches: a batch comes from medical", process.stdout)
        trained = helpers.checkpoint_values(run0)

        # Resumed: worker 0 restores step 6, the broadcast gives worker 1 its weights.
        config["train"]["max_step"] = 9
        self._config("ldr_main.yml", config)
        process = self._train(workers, "ldr-main", path, "--with_eval")
        self.assertIn("Restored checkpoint run/ckpt-6", process.stdout)
        self.assertEqual(tf.train.latest_checkpoint(run0), os.path.join(run0, "ckpt-9"))
        self.assertEqual(os.listdir(os.path.join(workers, "rank1")), [])
        resumed = helpers.checkpoint_values(run0)
        self.assertEqual(sorted(resumed), sorted(trained))
        self.assertTrue(any(not np.array_equal(resumed[k], trained[k]) for k in trained))

        # Fine-tuning on one domain: worker 0 writes finetune.json, both train 2 steps.
        config["model_dir"] = "finetuned"
        config["finetune"] = {"base": run0, "domain": "medical", "steps": 2}
        self._config("ldr_main.yml", config)
        process = self._train(workers, "ldr-main", path, "--with_eval")
        finetuned = os.path.join(workers, "rank0", "finetuned")
        self.assertEqual(tf.train.latest_checkpoint(finetuned), os.path.join(finetuned, "ckpt-11"))
        with open(os.path.join(finetuned, "finetune.json")) as f:
            self.assertEqual(json.load(f)["domain"], "medical")
        self.assertEqual(os.listdir(os.path.join(workers, "rank1")), [])

    def test_onmt_main_trains_procedure1_from_label_files(self):
        workers = self._workers("onmt_main")
        paths = corpus.write_corpus(os.path.join(self.dir, "labelled"), count=20)
        config = {
            "model_dir": "run",
            "data": corpus.data_config(paths),
            "params": {"optimizer": "Adam", "learning_rate": 0.01, "beam_width": 1},
            "train": {"batch_size": 8, "batch_type": "examples", "max_step": 4},
        }
        self._train(workers, "onmt-main", self._config("onmt_main.yml", config))
        run0 = os.path.join(workers, "rank0", "run")
        self.assertEqual(tf.train.latest_checkpoint(run0), os.path.join(run0, "ckpt-4"))
        self.assertFalse(os.path.exists(os.path.join(workers, "rank1", "run")))
