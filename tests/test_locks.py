"""One training per model directory (ldr_opennmt.locks) under ldr-main and onmt-main."""

import os
import signal
import subprocess
import sys
import textwrap

import opennmt
import pytest
import tensorflow as tf
import yaml

from ldr_opennmt import locks
from ldr_opennmt.cli import main as ldr_main
from ldr_opennmt.errors import UserError
from tests import helpers

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ONMT_MAIN = os.path.join(os.path.dirname(sys.executable), "onmt-main")

# Another process holding the lock as the package takes it (flock on the lock file),
# without importing TensorFlow: prints "locked" once it holds it.
_HOLDER = textwrap.dedent("""
    import fcntl, os, sys, time
    fd = os.open(os.path.join(sys.argv[1], %r), os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX)
    os.write(fd, b"pid %%d: the holder\\n" %% os.getpid())
    print("locked", flush=True)
    time.sleep(600)
    """ % locks.LOCK_FILE)


class _Holder:
    """A process that holds the training lock of a directory until killed."""

    def __init__(self, model_dir):
        os.makedirs(model_dir, exist_ok=True)
        self.process = subprocess.Popen(
            [sys.executable, "-c", _HOLDER, model_dir], stdout=subprocess.PIPE, text=True
        )
        assert self.process.stdout.readline().strip() == "locked"

    def kill(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()
        self.process.stdout.close()


class LockTest(tf.test.TestCase):
    def test_second_holder_is_refused_naming_the_first_and_kill_9_frees_it(self):
        model_dir = os.path.join(self.get_temp_dir(), "busy")
        holder = _Holder(model_dir)
        try:
            with self.assertRaisesRegex(
                UserError,
                r"^%s: another training uses this model_dir \(pid %d: the holder\)"
                % (model_dir, holder.process.pid),
            ):
                locks.acquire(model_dir)
            self.assertFalse(locks.is_held(model_dir))
        finally:
            holder.kill()  # kill -9: the OS releases the lock, no stale lock is left.
        with locks.model_dir_lock(model_dir):
            self.assertTrue(locks.is_held(model_dir))
            with open(os.path.join(model_dir, locks.LOCK_FILE)) as f:
                self.assertEqual(f.read(), "pid %d: %s\n" % (os.getpid(), " ".join(sys.argv)))
        self.assertFalse(locks.is_held(model_dir))

    def test_reentrant_in_one_process(self):
        model_dir = os.path.join(self.get_temp_dir(), "reentrant")
        with locks.model_dir_lock(model_dir):
            with locks.model_dir_lock(model_dir):
                self.assertTrue(locks.is_held(model_dir))
            self.assertTrue(locks.is_held(model_dir))  # Still held by the outer block.
        self.assertFalse(locks.is_held(model_dir))

    def test_planted_link_is_not_followed(self):
        model_dir = os.path.join(self.get_temp_dir(), "linked")
        os.makedirs(model_dir)
        target = os.path.join(self.get_temp_dir(), "outside.txt")
        with open(target, "w") as f:
            f.write("keep me\n")
        os.symlink(target, os.path.join(model_dir, locks.LOCK_FILE))
        with self.assertRaisesRegex(UserError, "cannot open the training lock"):
            locks.acquire(model_dir)
        with open(target) as f:
            self.assertEqual(f.read(), "keep me\n")


class TrainingLockTest(helpers.SharedDirTestCase):
    """Trainings refused on a model_dir that another training holds, before any write."""

    def _config(self, name):
        model_dir = os.path.join(self.dir, name)
        config = helpers.corpora_config(os.path.join(self.dir, name + "_data"), model_dir)
        path = os.path.join(self.dir, name + ".yml")
        with open(path, "w") as f:
            yaml.safe_dump(config, f)
        return path, model_dir, config

    def test_ldr_main_train_is_refused_before_copying_the_model_definition(self):
        path, model_dir, _ = self._config("ldr_main")
        holder = _Holder(model_dir)
        try:
            helpers.assert_cli_error(
                self,
                ldr_main.main,
                ["--model", "model_defs/small/ldr_transformer.py", "--config", path, "train"],
                r"another training uses this model_dir \(pid %d: " % holder.process.pid,
            )
        finally:
            holder.kill()
        # Neither the model definition nor domains.json of a second training is written.
        self.assertEqual(os.listdir(model_dir), [locks.LOCK_FILE])

    def test_stock_runner_train_takes_the_lock(self):
        _, model_dir, config = self._config("stock")
        holder = _Holder(model_dir)
        try:
            runner = opennmt.Runner(helpers.FAMILIES["mixed_transformer"](), config)
            with self.assertRaisesRegex(UserError, "another training uses this model_dir"):
                runner.train()
        finally:
            holder.kill()
        self.assertEqual(os.listdir(model_dir), [locks.LOCK_FILE])

    @pytest.mark.e2e
    def test_stock_onmt_main_train_is_refused_before_copying_the_model_definition(self):
        path, model_dir, _ = self._config("onmt_main")
        holder = _Holder(model_dir)
        description = os.path.join(model_dir, "model_description.py")
        with open(description, "w") as f:
            f.write("# the first training's model\n")
        try:
            result = subprocess.run(
                [ONMT_MAIN, "--model", "model_defs/small/mixed_transformer.py", "--config",
                 path, "train"],
                capture_output=True, text=True, cwd=ROOT, timeout=600,
                env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONWARNINGS="ignore"),
            )  # fmt: skip
        finally:
            holder.kill()
        self.assertEqual(result.returncode, 2, result.stderr[-2000:])
        self.assertRegex(
            result.stderr.strip().splitlines()[-1],
            r"^ldr-opennmt: error: .*another training uses this model_dir",
        )
        with open(description) as f:
            self.assertEqual(f.read(), "# the first training's model\n")


if __name__ == "__main__":
    tf.test.main()
