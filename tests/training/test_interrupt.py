"""``kill -9`` in the middle of ``ldr-main train``: the next run resumes from the last
complete checkpoint, with Procedure 1 and per-domain corpora, whatever a kill inside a
checkpoint's write left."""

import glob
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import pytest
import tensorflow as tf
import yaml

from tests import corpus

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _latest_step(model_dir):
    path = os.path.join(model_dir, "checkpoint")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        match = re.search(r'^model_checkpoint_path: "ckpt-(\d+)"', f.read(), re.MULTILINE)
    return int(match.group(1)) if match else None


@pytest.mark.e2e
class KillResumeTest(tf.test.TestCase):
    def test_kill_9_then_resume(self):
        directory = self.get_temp_dir()
        paths = corpus.write_corpus(os.path.join(directory, "data"), count=20)
        model_dir = os.path.join(directory, "run")
        config = {
            "model_dir": model_dir,
            "data": {
                "source_vocabulary": paths["src_vocab"],
                "target_vocabulary": paths["tgt_vocab"],
                "train_corpora": corpus.write_domain_corpora(
                    os.path.join(directory, "data"), {"medical": 20, "religious": 30}
                ),
            },
            "params": {"optimizer": "Adam", "learning_rate": 0.01},
            "train": {"batch_size": 8, "max_step": 100000, "save_checkpoints_steps": 2},
        }
        path = os.path.join(directory, "run.yml")

        def _start(max_step):
            config["train"]["max_step"] = max_step
            with open(path, "w") as f:
                yaml.safe_dump(config, f)
            command = [os.path.join(os.path.dirname(sys.executable), "ldr-main")]
            command += ["--model", "model_defs/small/ldr_transformer.py", "--config", path]
            env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONWARNINGS="ignore")
            return subprocess.Popen(
                command + ["train"],
                cwd=ROOT,
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )

        process = _start(100000)
        deadline = time.time() + 300
        while (_latest_step(model_dir) or 0) < 4 and time.time() < deadline:
            self.assertIsNone(process.poll(), "training stopped before it was killed")
            time.sleep(0.5)
        os.kill(process.pid, signal.SIGKILL)
        process.communicate()
        killed_at = _latest_step(model_dir)
        self.assertGreaterEqual(killed_at, 4)

        # What a kill inside the next checkpoint's write leaves (killed there with strace's
        # syscall injection, 2026-11-27): TensorFlow writes ckpt-N_temp/ (a data shard under a
        # .tempstate name, then the shard and its index), moves the shard to ckpt-N.data-*,
        # writes ckpt-N.index, removes ckpt-N_temp/, and only then names ckpt-N in
        # `checkpoint`. Here both: a half-written temporary shard, and a ckpt-N (a copy of an
        # older one) that `checkpoint` does not name.
        prefix = os.path.join(model_dir, "ckpt-%d")
        following = killed_at + 2
        temp = prefix % following + "_temp"
        os.makedirs(temp, exist_ok=True)
        with open(
            os.path.join(temp, "part-00000-of-00001.data-00000-of-00001.tempstate1"), "wb"
        ) as f:
            f.write(b"\0" * 100)
        for name in glob.glob(prefix % killed_at + ".*"):
            shutil.copy(name, prefix % following + name[len(prefix % killed_at) :])

        process = _start(following)
        _, stderr = process.communicate(timeout=600)
        self.assertEqual(process.returncode, 0, stderr[-3000:])
        self.assertIn("Restored checkpoint %s/ckpt-%d" % (model_dir, killed_at), stderr)
        self.assertEqual(_latest_step(model_dir), following)
        # The checkpoint named is the one this run wrote, over the leftover.
        step = tf.train.load_variable(
            prefix % following, "optimizer/iter/.ATTRIBUTES/VARIABLE_VALUE"
        )
        self.assertEqual(step, following)


if __name__ == "__main__":
    tf.test.main()
