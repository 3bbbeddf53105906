"""GPUs on a machine without one: the GPU lock, setup_env.sh --gpu, the refusal of a silent
CPU fallback (ldr_opennmt.gpu) and run/gpu_check.sh's no-GPU path (docs/gpu.md).

The GPU itself is simulated: a fake ``nvidia-smi`` on ``PATH``, a fake venv (``LDR_VENV``)
whose ``site-packages/nvidia`` has the wheels' layout, callables that list no GPU. One slow
test, run only with ``LDR_TEST_GPU_INSTALL=1`` (it downloads about 1.7 GB), installs the
real wheels into a fresh venv.
"""

import ast
import ctypes
import glob
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import unittest
from unittest import mock

import pytest

from ldr_experiments import machine
from ldr_experiments.benchmarks import rows as bench_rows
from ldr_experiments.gpu_check import cli as gpu_cli
from ldr_experiments.gpu_check import plan
from ldr_experiments.gpu_check import probe as gpu_probe
from ldr_experiments.gpu_check import report as gpu_report
from ldr_experiments.gpu_check import rows as gpu_rows
from ldr_opennmt import gpu, probe, registry
from ldr_opennmt.cli import main as ldr_main
from ldr_opennmt.errors import UserError
from tests import helpers
from tests.test_lock import LOCK as CPU_STACK_LOCK
from tests.test_lock import normalize, parse_lock

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: The training stack of this Python (docs/installation.md): each has its GPU lock.
PY312 = sys.version_info[:2] >= (3, 12)
GPU_LOCK = os.path.join(ROOT, "requirements-gpu-py312.lock" if PY312 else "requirements-gpu.lock")
CPU_LOCK = CPU_STACK_LOCK
SETUP = os.path.join(ROOT, "run", "setup_env.sh")
#: The venv's site-packages folder name.
PYTHON_DIR = "python%d.%d" % sys.version_info[:2]

#: The wheels of issue 37, with the versions TensorFlow 2.13.1 was built against.
GPU_WHEELS_311 = {
    "nvidia-cuda-runtime-cu11": "11.8.89",
    "nvidia-cublas-cu11": "11.11.3.6",
    "nvidia-cudnn-cu11": "8.6.0.163",
    "nvidia-cufft-cu11": "10.9.0.58",
    "nvidia-curand-cu11": "10.3.0.86",
    "nvidia-cusolver-cu11": "11.4.1.48",
    "nvidia-cusparse-cu11": "11.7.5.86",
    "nvidia-cuda-nvcc-cu11": "11.8.89",
}
#: TensorFlow 2.21's and-cuda extra at its lowest versions (those it was built with).
GPU_WHEELS_312 = {
    "nvidia-cublas-cu12": "12.5.3.2",
    "nvidia-cuda-cupti-cu12": "12.5.82",
    "nvidia-cuda-nvcc-cu12": "12.5.82",
    "nvidia-cuda-nvrtc-cu12": "12.5.82",
    "nvidia-cuda-runtime-cu12": "12.5.82",
    "nvidia-cudnn-cu12": "9.3.0.75",
    "nvidia-cufft-cu12": "11.2.3.61",
    "nvidia-curand-cu12": "10.3.6.82",
    "nvidia-cusolver-cu12": "11.6.3.83",
    "nvidia-cusparse-cu12": "12.5.1.3",
    "nvidia-nccl-cu12": "2.27.7",
    "nvidia-nvjitlink-cu12": "12.5.82",
}
GPU_WHEELS = GPU_WHEELS_312 if PY312 else GPU_WHEELS_311
CU = "cu12" if PY312 else "cu11"
#: The wheels' lib folders (site-packages/nvidia/NAME/lib).
WHEEL_DIRS = ("cublas", "cuda_nvcc", "cuda_runtime", "cudnn", "cufft", "curand", "cusolver")
WHEEL_DIRS += ("cusparse",)
GPU_VARIABLES = ("LD_LIBRARY_PATH", "XLA_FLAGS", "CUDA_CACHE_MAXSIZE", "CUDA_MODULE_LOADING")
H100 = "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-5c1a2b3d)"


def _touch_future(path):
    """Creates :obj:`path` with a modification time a day ahead: newer than any lock file
    another engineer may save meanwhile (setup_env.sh reinstalls when a lock is newer)."""
    with open(path, "a"):
        pass
    future = time.time() + 86400
    os.utime(path, (future, future))


def fake_venv(directory, gpu_installed=False):
    """A venv for ``LDR_VENV`` that setup_env.sh takes as installed: ``bin/python`` runs
    this test's Python (the real .venv's), so nothing is installed; with
    :obj:`gpu_installed`, the GPU stamp and NVIDIA's wheel layout (empty lib folders, an
    executable ``cuda_nvcc/bin/ptxas``, ``nvvm/libdevice/libdevice.10.bc``)."""
    venv = os.path.join(directory, "venv")
    os.makedirs(os.path.join(venv, "bin"))
    python = os.path.join(venv, "bin", "python")
    with open(python, "w") as f:
        f.write('#!/bin/sh\nexec %s "$@"\n' % shlex.quote(sys.executable))
    os.chmod(python, 0o755)
    _touch_future(os.path.join(venv, ".ldr-installed"))
    if gpu_installed:
        nvidia = os.path.join(venv, "lib", PYTHON_DIR, "site-packages", "nvidia")
        for name in WHEEL_DIRS:
            os.makedirs(os.path.join(nvidia, name, "lib"))
        nvcc = os.path.join(nvidia, "cuda_nvcc")
        os.makedirs(os.path.join(nvcc, "bin"))
        os.makedirs(os.path.join(nvcc, "nvvm", "libdevice"))
        with open(os.path.join(nvcc, "bin", "ptxas"), "w") as f:
            f.write("#!/bin/sh\n")
        os.chmod(os.path.join(nvcc, "bin", "ptxas"), 0o755)
        open(os.path.join(nvcc, "nvvm", "libdevice", "libdevice.10.bc"), "w").close()
        _touch_future(os.path.join(venv, ".ldr-gpu-installed"))
    return venv


def fake_nvidia_smi(directory, driver="560.35.03", compute_cap="9.0", gpus=(H100,)):
    """A folder with an ``nvidia-smi`` that answers ``-L`` and ``--query-gpu`` (without
    ``compute_cap`` when :obj:`compute_cap` is ``None``, as drivers older than 510)."""
    folder = os.path.join(directory, "smi")
    os.makedirs(folder)
    name = "NVIDIA H100 80GB HBM3"
    listing = "\n".join(gpus)
    lines = [
        "#!/bin/sh",
        'case "$*" in',
        "  *-L*) printf '%%s\\n' %s ;;" % shlex.quote(listing),
    ]
    if compute_cap is None:
        lines.append(
            "  *compute_cap*) echo 'Field \"compute_cap\" is not a valid field' >&2; exit 2 ;;"
        )
    else:
        lines.append(
            "  *name,driver_version,compute_cap*) echo '%s, %s, %s' ;;"
            % (name, driver, compute_cap)
        )
        lines.append("  *compute_cap*) echo '%s' ;;" % compute_cap)
    lines += [
        "  *name,driver_version*) echo '%s, %s' ;;" % (name, driver),
        "  *driver_version*) echo '%s' ;;" % driver,
        "esac",
    ]
    path = os.path.join(folder, "nvidia-smi")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    os.chmod(path, 0o755)
    return folder


def _base_env(venv, smi_folder=None):
    env = {k: v for k, v in os.environ.items() if k not in GPU_VARIABLES}
    env["LDR_VENV"] = venv
    # No nvidia-smi unless a fake one is given (this machine has none; see _skip_on_gpu).
    path = [p for p in env.get("PATH", "").split(os.pathsep) if not p.endswith("/.venv/bin")]
    env["PATH"] = os.pathsep.join(([smi_folder] if smi_folder else []) + path)
    return env


def _bash(script, env, timeout=300):
    return subprocess.run(
        ["bash", "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )


#: The stack's first compute capability without native kernels ("8.0" or "9.0").
PTX_CAPABILITY = "%d.%d" % gpu.PTX_ONLY_CAPABILITY


def _between(low, high):
    """A driver version above :obj:`low` and below :obj:`high` (same major as :obj:`low`,
    one minor up)."""
    major, minor = low.split(".")[:2]
    return "%s.%d.01" % (major, int(minor) + 1)


def _skip_on_gpu(test):
    if shutil.which("nvidia-smi"):
        test.skipTest("this machine has nvidia-smi: the no-GPU simulations need a machine without")


class GpuLockTest(unittest.TestCase):
    def test_every_wheel_is_pinned_with_hashes(self):
        entries = parse_lock(GPU_LOCK)
        self.assertEqual({name: v for name, (v, _) in entries.items()}, GPU_WHEELS)
        for name, (version, hashes) in entries.items():
            self.assertTrue(hashes, "%s==%s has no --hash" % (name, version))
            for digest in hashes:
                self.assertRegex(digest, r"^[0-9a-f]{64}$", name)

    def test_compatible_with_the_cpu_lock(self):
        # Nothing both locks name may differ (run/lock_gpu.sh compiles with the CPU lock as
        # a constraint; the GPU wheels install with --no-deps).
        cpu = parse_lock(CPU_LOCK)
        for name, (version, _) in parse_lock(GPU_LOCK).items():
            if name in cpu:
                self.assertEqual(cpu[name][0], version, name)

    def test_lock_script_and_setup_env(self):
        with open(os.path.join(ROOT, "run", "lock_gpu.sh"), encoding="utf-8") as f:
            script = f.read()
        for option in ("--generate-hashes", "--index-url https://pypi.org/simple", "pip-compile"):
            self.assertIn(option, script)
        for name, version in GPU_WHEELS.items():
            self.assertIn("%s==%s" % (name, version), script)
        with open(SETUP, encoding="utf-8") as f:
            setup = f.read()
        # The stack's GPU lock, installed hash-checked without dependencies, again when newer.
        self.assertIn("_ldr_gpu_lock=%s " % os.path.basename(GPU_LOCK), setup)
        self.assertIn('--require-hashes --no-deps -r "$ROOT/$_ldr_gpu_lock"', setup)
        self.assertIn('"$ROOT/$_ldr_gpu_lock" -nt "$_ldr_gpu_stamp"', setup)
        # Sourced by hand and by run/test.sh: it sets no shell option.
        self.assertIsNone(re.search(r"^\s*(set|shopt)\s", setup, re.MULTILINE))


class SetupEnvTest(unittest.TestCase):
    def setUp(self):
        self.directory = tempfile.mkdtemp(prefix="ldr-gpu-test-")
        self.addCleanup(shutil.rmtree, self.directory, ignore_errors=True)

    def _source(self, venv, arguments="", prelude="", smi_folder=None):
        """Sources setup_env.sh; returns (result, environment after, options before/after)."""
        script = (
            prelude
            + 'before="$(set -o; shopt)"\n'
            + "source run/setup_env.sh %s\n" % arguments
            + 'after="$(set -o; shopt)"\n'
            + '[ "$before" = "$after" ] && echo OPTIONS-UNCHANGED\n'
            + "set | grep -c '^_ldr_' || true\n"
            + "env -0 > %s\n" % shlex.quote(os.path.join(self.directory, "env"))
        )
        result = _bash(script, _base_env(venv, smi_folder))
        with open(os.path.join(self.directory, "env"), encoding="utf-8") as f:
            environment = dict(item.split("=", 1) for item in f.read().split("\0") if "=" in item)
        return result, environment

    def test_cpu_path_unchanged(self):
        # No GPU stamp: no message, no GPU variable, no shell option, no leftover variable.
        venv = fake_venv(self.directory)
        result, environment = self._source(venv)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(result.stdout.split(), ["OPTIONS-UNCHANGED", "0"])
        self.assertEqual(result.stderr, "")
        for name in GPU_VARIABLES:
            self.assertNotIn(name, environment)
        self.assertTrue(environment["PATH"].startswith(os.path.join(venv, "bin") + ":"))

    def test_installed_gpu_set_is_exported(self):
        # As run/test.sh sources it (set -euo pipefail), twice: each wheel's lib folder once
        # on LD_LIBRARY_PATH, XLA's data dir, the PTX JIT settings; the caller's options kept.
        venv = fake_venv(self.directory, gpu_installed=True)
        prelude = "set -euo pipefail\nexport LD_LIBRARY_PATH=/opt/mine\nsource run/setup_env.sh\n"
        result, environment = self._source(venv, prelude=prelude)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(result.stdout.split(), ["OPTIONS-UNCHANGED", "0"])
        entries = environment["LD_LIBRARY_PATH"].split(":")
        site = os.path.join(venv, "lib", PYTHON_DIR, "site-packages", "nvidia")
        expected = sorted(os.path.join(site, name, "lib") for name in WHEEL_DIRS)
        self.assertEqual(sorted(entries[:-1]), expected)
        self.assertEqual(entries[-1], "/opt/mine")
        data_dir = gpu.xla_data_dir(environment["XLA_FLAGS"])
        self.assertEqual(data_dir, os.path.join(site, "cuda_nvcc"))
        self.assertIsNone(gpu.xla_data_dir_problem(data_dir))
        self.assertEqual(environment["CUDA_MODULE_LOADING"], "LAZY")
        self.assertEqual(environment["CUDA_CACHE_MAXSIZE"], "4294967296")

    def test_user_xla_data_dir_is_kept(self):
        venv = fake_venv(self.directory, gpu_installed=True)
        prelude = "export XLA_FLAGS='--xla_gpu_cuda_data_dir=/usr/local/cuda-11.8'\n"
        _, environment = self._source(venv, prelude=prelude)
        self.assertEqual(environment["XLA_FLAGS"], "--xla_gpu_cuda_data_dir=/usr/local/cuda-11.8")

    def _install_refused(self, **smi):
        venv = fake_venv(self.directory)
        env = _base_env(venv, fake_nvidia_smi(self.directory, **smi))
        result = _bash("bash run/setup_env.sh --gpu", env)
        self.assertEqual(result.returncode, 1, result.stdout + result.stderr)
        self.assertFalse(os.path.exists(os.path.join(venv, ".ldr-gpu-installed")))
        self.assertEqual(result.stdout, "")
        self.assertEqual(len(result.stderr.splitlines()), 1, result.stderr)
        return result.stderr

    def test_old_driver(self):
        message = self._install_refused(driver="440.33.01", compute_cap="7.0")
        self.assertIn("NVIDIA driver 440.33.01 found", message)
        self.assertIn("needs >= %s" % gpu.MINIMUM_DRIVER, message)

    def test_old_driver_for_ptx(self):
        # From the stack's PTX-only compute capability (8.0 for TensorFlow 2.13.1, 9.0 for
        # 2.21), the kernels are compiled from PTX: the CUDA version's own driver is needed.
        driver = _between(gpu.MINIMUM_DRIVER, gpu.PTX_JIT_DRIVER)
        message = self._install_refused(driver=driver, compute_cap=PTX_CAPABILITY)
        self.assertIn("NVIDIA driver %s found" % driver, message)
        self.assertIn("needs >= %s" % gpu.PTX_JIT_DRIVER, message)

    def test_old_nvidia_smi_without_compute_cap(self):
        message = self._install_refused(driver="418.67", compute_cap=None)
        self.assertIn("418.67", message)
        self.assertIn(">= %s" % gpu.MINIMUM_DRIVER, message)

    def test_bash_and_python_agree_on_drivers(self):
        between = _between(gpu.MINIMUM_DRIVER, gpu.PTX_JIT_DRIVER)
        for driver, cap in (("440.33.01", "7.5"), (between, PTX_CAPABILITY), ("418.67", "6.1")):
            self.assertIn("driver %s found" % driver, gpu.driver_problem(driver, cap))
            self.directory = tempfile.mkdtemp(dir=self.directory)  # A venv of its own.
            message = self._install_refused(driver=driver, compute_cap=cap)
            self.assertEqual(message.strip(), "[setup] --gpu: " + gpu.driver_problem(driver, cap))
        self.assertIsNone(gpu.driver_problem(gpu.MINIMUM_DRIVER, "7.0"))
        self.assertIsNone(gpu.driver_problem(gpu.PTX_JIT_DRIVER, "9.0"))
        self.assertIn(gpu.PTX_JIT_DRIVER, gpu.driver_problem(between, (9, 0)))


class GpusRequestedTest(unittest.TestCase):
    def test_command_lines(self):
        requested = gpu.gpus_requested
        config = ["--config", "run.yml"]
        self.assertEqual(requested(config + ["train", "--num_gpus", "2"]), "--num_gpus 2")
        self.assertEqual(requested(config + ["train", "--num_gpus=1"]), "--num_gpus 1")
        self.assertIsNone(requested(config + ["train", "--num_gpus", "0"]))
        self.assertIsNone(requested(config + ["train"]))  # The default, 1, asks nothing.
        self.assertEqual(requested(config + ["--mixed_precision", "train"]), "--mixed_precision")

    def test_ldr_main_on_a_gpu_machine(self):
        def smi(*args):
            return H100 + "\n" if args == ("-L",) else None

        argv = ["--config", "run.yml", "train"]
        self.assertIn(H100, gpu.gpus_requested(argv, "/x/.venv/bin/ldr-main", nvidia_smi=smi))
        # Stock onmt-main, a run type that computes nothing, GPUs hidden, no GPU: not asked.
        self.assertIsNone(gpu.gpus_requested(argv, "onmt-main", nvidia_smi=smi))
        export = ["--config", "run.yml", "export", "--output_dir", "x"]
        self.assertIsNone(gpu.gpus_requested(export, "ldr-main", nvidia_smi=smi))
        hidden = {"CUDA_VISIBLE_DEVICES": ""}
        self.assertIsNone(gpu.gpus_requested(argv, "ldr-main", nvidia_smi=smi, environ=hidden))
        self.assertIsNone(gpu.gpus_requested(argv, "ldr-main", nvidia_smi=lambda *a: None))


class FallbackRefusalTest(unittest.TestCase):
    def _refusal(self, **kwargs):
        with self.assertRaises(UserError) as caught:
            gpu.check_command_line(
                ["--config", "run.yml", "train"],
                prog="ldr-main",
                nvidia_smi=lambda *args: H100 + "\n",
                list_gpus=lambda: [],  # TensorFlow registered no GPU.
                environ={},
                **kwargs,
            )
        message = str(caught.exception)
        self.assertNotIn("\n", message)
        return message

    def test_names_the_libraries_that_fail(self):
        # This machine's own loader: the message names exactly what fails to load here.
        failing = [name for name, _ in gpu.failing_libraries()]
        message = self._refusal()
        self.assertIn(H100, message)
        self.assertIn("run/setup_env.sh --gpu", message)
        if failing:
            self.assertIn("the CUDA libraries %s fail to load" % ", ".join(failing), message)

    def test_simulated_loader(self):
        missing = {gpu.library("libcudnn"), gpu.library("libcufft")}

        def loader(name):
            if name in missing:
                raise OSError("%s: cannot open shared object file" % name)

        with self.assertRaises(UserError) as caught:
            gpu.check_gpus_available(
                "--mixed_precision", list_gpus=lambda: [], loader=loader, environ={}
            )
        message = str(caught.exception)
        self.assertIn("(--mixed_precision)", message)
        self.assertIn(
            "the CUDA libraries %s, %s fail to load"
            % (gpu.library("libcufft"), gpu.library("libcudnn")),
            message,
        )
        self.assertNotIn("libcudart", message)

    def test_nothing_asked_or_allowed_or_present(self):
        gpu.check_gpus_available(None, list_gpus=lambda: [])
        gpu.check_gpus_available(
            "--num_gpus 2", list_gpus=lambda: [], environ={"LDR_ALLOW_CPU": "1"}
        )
        gpu.check_gpus_available("--num_gpus 2", list_gpus=lambda: ["/physical_device:GPU:0"])
        # Nothing asked on this machine (no --num_gpus, no nvidia-smi listing a GPU).
        gpu.check_command_line(
            ["--config", "x.yml", "train"],
            prog="ldr-main",
            nvidia_smi=lambda *a: None,
            list_gpus=lambda: [],
        )

    def test_stock_onmt_main(self):
        argv = ["--config", "x.yml", "--mixed_precision", "train"]
        gpu.check_stock_onmt_main(argv, prog="/x/ldr-main")  # ldr-main checks in its main.
        gpu.check_stock_onmt_main(argv, prog="/x/pytest")
        failing = gpu.failing_libraries()
        if failing:  # This machine has no GPU libraries: the check refuses.
            with self.assertRaises(UserError):
                gpu.check_stock_onmt_main(argv, prog="/x/.venv/bin/onmt-main")

    def test_ldr_main_refuses_before_anything(self):
        # The entry point checks first: the configuration is not even read.
        if not gpu.failing_libraries():
            self.skipTest("this machine loads every CUDA library")
        with mock.patch.dict(os.environ, {}, clear=False):
            os.environ.pop(gpu.ALLOW_CPU_ENV, None)
            message = helpers.assert_cli_error(
                self,
                ldr_main.main,
                ["--config", "missing.yml", "train", "--num_gpus", "2"],
                r"^GPUs asked for \(.*\) but TensorFlow found none and would run on the CPU: "
                r"the CUDA libraries .*%s.* fail to load" % re.escape(gpu.library("libcudart")),
            )
        self.assertNotIn("no such configuration file", message)

    def test_installed_but_not_exported(self):
        directory = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, directory)
        lib = os.path.join(directory, "nvidia", "cudnn", "lib")
        os.makedirs(lib)
        open(os.path.join(lib, "libcudnn.so.8"), "w").close()
        message = gpu.fallback_message("x", [("libcudnn.so.8", "")], library_dirs=[lib])
        self.assertIn("not on LD_LIBRARY_PATH", message)
        self.assertIn("fix: `source run/setup_env.sh`", message)


class LibraryHelpersTest(unittest.TestCase):
    def test_versions_against_the_build(self):
        build = {"cuda_version": "11.8", "cudnn_version": "8"}
        good = {"cudart": "11.8", "cudnn": "8.6.0", "cublas": "11.11.3"}
        self.assertEqual(gpu.version_mismatches(good, build), [])
        self.assertEqual(gpu.version_mismatches({}, build), [])
        bad = gpu.version_mismatches({"cudart": "12.2", "cudnn": "9.1.0"}, build)
        self.assertEqual(len(bad), 2)
        self.assertIn("CUDA 12.2", bad[0])

    def test_build_info_is_what_the_lock_serves(self):
        import tensorflow as tf

        build = tf.sysconfig.get_build_info()
        runtime = GPU_WHEELS["nvidia-cuda-runtime-%s" % CU]
        self.assertEqual(build["cuda_version"].split(".")[:2], runtime.split(".")[:2])
        self.assertEqual(build["cudnn_version"], GPU_WHEELS["nvidia-cudnn-%s" % CU].split(".")[0])
        self.assertEqual(gpu.CUDA_LIBRARIES[-1], "libcudnn.so.%s" % build["cudnn_version"])

    def test_loaded_path(self):
        ctypes.CDLL("libc.so.6")
        self.assertTrue(gpu.loaded_path("libc.so.6").endswith("libc.so.6"))
        self.assertIsNone(gpu.loaded_path("libnothing.so.1"))

    def test_xla_data_dir(self):
        self.assertIsNone(gpu.xla_data_dir(""))
        self.assertEqual(gpu.xla_data_dir("--a=1 --xla_gpu_cuda_data_dir=/d --b"), "/d")
        self.assertIn("no --xla_gpu_cuda_data_dir", gpu.xla_data_dir_problem(None))
        self.assertIn("bin/ptxas", gpu.xla_data_dir_problem(tempfile.gettempdir()))


class GpuCheckTest(unittest.TestCase):
    def setUp(self):
        _skip_on_gpu(self)
        self.directory = tempfile.mkdtemp(prefix="ldr-gpu-check-test-")
        self.addCleanup(shutil.rmtree, self.directory, ignore_errors=True)

    def test_no_gpu(self):
        env = _base_env(fake_venv(self.directory))
        result = _bash("bash run/gpu_check.sh", env)
        self.assertEqual(result.returncode, 0, result.stderr)
        lines = result.stdout.splitlines()
        self.assertEqual(len(lines), 1, result.stdout)
        self.assertTrue(lines[0].startswith("gpu_check: no GPU on this machine"), lines[0])
        self.assertIn("CUDA libraries", lines[0])
        import tensorflow as tf

        build = tf.sysconfig.get_build_info()
        self.assertIn(
            "built with CUDA %s, cuDNN %s" % (build["cuda_version"], build["cudnn_version"]),
            result.stderr,
        )

    def test_gpu_listed_but_not_used(self):
        # nvidia-smi lists a GPU, TensorFlow has none: the silent fallback, refused.
        venv = fake_venv(self.directory)
        env = _base_env(venv, fake_nvidia_smi(self.directory))
        result = _bash("bash run/gpu_check.sh", env)
        self.assertEqual(result.returncode, 1, result.stderr)
        lines = result.stdout.splitlines()
        self.assertEqual(len(lines), 1, result.stdout)
        self.assertIn("TensorFlow found none", lines[0])
        self.assertIn(gpu.library("libcudart"), lines[0])
        self.assertIn("run/setup_env.sh --gpu", lines[0])

    def test_plan(self):
        # The group ldr: the families whose name begins with ldr_ (LDR and the LDR RNN).
        args = gpu_cli.parse_args(["--quick", "--families", "ldr"])
        config = gpu_rows.make_config(args, self.directory)
        self.assertEqual(
            config["systems"],
            ["vanilla", "ldr_joint", "ldr_procedure1", "ldr_target", "ldr_released", "ldr_rnn"],
        )
        self.assertEqual(config["no_xla"], ["ldr_rnn"])
        self.assertEqual(
            config["frozen_systems"], ["ldr_joint", "ldr_procedure1", "ldr_target", "ldr_released"]
        )
        self.assertEqual(config["translate"]["name"], "ldr")
        tasks = plan.tasks_of(config)
        self.assertIn("train:mixed_xla:ldr_procedure1", tasks)
        self.assertIn("train:mixed:ldr_rnn", tasks)
        self.assertNotIn("train:mixed_xla:ldr_rnn", tasks)  # ldr-opennmt refuses XLA for RNNs.
        self.assertEqual(plan.long_mode(config, "ldr_rnn"), plan.MIXED)
        self.assertEqual(plan.steps_of(config, "mixed_xla", "vanilla"), args.steps)
        self.assertEqual(plan.steps_of(config, "fp32", "vanilla"), args.timing_steps)
        # Only XLA asked for: the family that refuses it has no run at all.
        xla_only = dict(config, modes=[plan.MIXED_XLA])
        self.assertIsNone(plan.long_mode(xla_only, "ldr_rnn"))
        self.assertEqual(len(plan.tasks_of(xla_only)), 5)  # vanilla and the 4 LDR rows.
        # The bit-identity checks continue the mixed precision + XLA long runs (one training,
        # one process each); without such a run, a process of their own.
        self.assertEqual(
            plan.check_tasks(xla_only),
            ["train:mixed_xla:vanilla"]
            + ["train:mixed_xla:%s:frozen" % s for s in config["frozen_systems"]]
            + ["translate"],
        )
        mixed_only = dict(config, modes=[plan.MIXED])
        self.assertEqual(
            plan.check_tasks(mixed_only, translate=False)[-len(config["frozen_systems"]) :],
            ["frozen:%s" % s for s in config["frozen_systems"]],
        )
        self.assertEqual(plan.check_tasks(config, frozen=False, translate=False), tasks)
        table = gpu_report.training_table(xla_only, {})
        self.assertIn("| LDR (RNN) | n/a | n/a (no XLA for this family) |", table)
        self.assertEqual(config["size"]["num_units"], 64)
        paper = gpu_rows.make_config(gpu_cli.parse_args([]), self.directory)
        self.assertEqual(
            paper["size"], dict(num_layers=6, num_units=512, num_heads=8, ffn_inner_dim=2048)
        )
        rows = {row.name: row for row in bench_rows.config_rows(paper)}
        self.assertEqual(rows["ldr_rnn"].kwargs, plan.RNN_SIZE)
        # The groups and names of run/bench.sh; a name that selects nothing is refused.
        args = gpu_cli.parse_args(["--quick", "--families", "factorized", "dc_rnn", "ttm"])
        config = gpu_rows.make_config(args, self.directory)
        self.assertEqual(
            config["systems"], ["vanilla", "fact_pa", "fact_sf", "fact_df", "ttm", "dc_rnn"]
        )
        args = gpu_cli.parse_args(["--quick", "--families", "rnn"])
        with self.assertRaisesRegex(ValueError, "'rnn' names no row of this check"):
            gpu_rows.make_config(args, self.directory)

    def test_report(self):
        args = gpu_cli.parse_args(["--quick", "--families", "ldr"])
        config = gpu_rows.make_config(args, self.directory)
        entry = dict(params=10, ms_per_step=10.0, tokens_per_s=1000.0, last_loss=3.0)
        entry.update(finite_loss=True, gpu_peak_mib=512.0)
        results = {mode: {s: dict(entry) for s in config["systems"]} for mode in plan.MODES}
        results["mixed_xla"]["ldr_joint"] = dict(entry, last_loss=float("nan"), finite_loss=False)
        results["frozen"] = {
            "ldr_procedure1": dict(
                regions=3,
                absent_regions=2,
                absent_variables=4,
                absent_changed=0,
                present_variables=2,
                present_changed=2,
                compute_dtype="float16",
                finite_loss=True,
                loss_scale=32768.0,
            )
        }
        info = dict(
            gpus=[{"name": "NVIDIA H100 80GB HBM3", "compute_capability": [9, 0]}],
            libraries={name: "/v/nvidia/x/lib/" + name for name in gpu.CUDA_LIBRARIES},
            failing=[],
            mismatches=[],
            versions={"cudart": "11.8"},
            xla_problem=None,
            xla_data_dir="/v/nvidia/cuda_nvcc",
            build={"cuda_version": "11.8", "cudnn_version": "8"},
            smi_properties=[],
            nvidia_smi=None,
            tensorflow="2.13.1",
            driver_problems=[],
        )
        checks = gpu_report.evaluate_checks(info, config, results)
        status = {check: result for check, result, _ in checks}
        self.assertEqual(status["TensorFlow sees the GPU"], "PASS")
        self.assertEqual(status["float16 + XLA: absent domains' parameters bit-identical"], "PASS")
        failed = [check for check, result, _ in checks if result == "FAIL"]
        self.assertEqual(len(failed), 1)
        self.assertIn("mixed precision + XLA", failed[0])
        report = gpu_report.format_report(info, config, results, checks, machine.describe())
        self.assertTrue(report.startswith("# GPU check: NVIDIA H100 80GB HBM3\n"))
        self.assertIn("| LDR Procedure 1 | 10 | 10.0 | 1000 | 1.00x |", report)

    def test_unknown_family_on_the_gpu_path(self):
        # Checked by the child process that reads the registry: one line, exit status 2.
        directory = os.path.join(self.directory, "run")
        command = "bash run/gpu_check.sh --allow_cpu --quick --families no_such_family "
        command += "--workdir %s" % shlex.quote(directory)
        result = _bash(command, _base_env(fake_venv(self.directory)))
        self.assertEqual(result.returncode, 2, result.stderr)
        self.assertIn(
            "run/gpu_check.sh: error: --families: 'no_such_family' names no row of this check "
            "(registered families, groups or rows: mixed_transformer, ",
            result.stderr,
        )
        self.assertFalse(os.path.exists(os.path.join(directory, "config.json")))  # Nothing ran.

    def test_no_gpu_status(self):
        info = dict(libraries=dict.fromkeys(gpu.CUDA_LIBRARIES), mismatches=[])
        info["failing"] = list(gpu.CUDA_LIBRARIES)
        self.assertEqual(gpu_probe.no_gpu_status(info), 0)  # Nothing installed: fine.
        info["failing"] = ["libcudnn.so.8"]
        self.assertEqual(gpu_probe.no_gpu_status(info), 1)  # A partial set: broken.


class GpuCheckRowsTest(unittest.TestCase):
    """gpu_check's systems are rows of the registry (issue 33): no family list of its own."""

    def test_no_other_list_of_families(self):
        source = ""
        for path in sorted(glob.glob(os.path.join(ROOT, "ldr_experiments", "gpu_check", "*.py"))):
            with open(path, encoding="utf-8") as f:
                source += f.read()
        self.assertIn("def check_rows", source)
        self.assertNotIn('"fact_pa"', source)
        # No family or row name is written out in the script, but for the family of the
        # translation check (one family, not a list); "mixed" is also a precision mode.
        table = bench_rows.build_rows(bench_rows.make_size(1, 16, 2))
        rows = gpu_rows.check_rows(table, plan.QUICK_RNN_SIZE)
        names = set(registry.names()) | {row.name for row in table + rows}
        names -= {plan.VANILLA, plan.TRANSLATE_FAMILY, *plan.MODES}
        quoted = [n for n in sorted(names) if '"%s"' % n in source or "'%s'" % n in source]
        self.assertEqual(quoted, [])
        for table_name in ("NAMES", "TRAIN_SYSTEMS", "FAMILIES", "DOMAIN_TRAINING"):
            self.assertFalse(hasattr(bench_rows, table_name), table_name)
            for module in (plan, gpu_rows):
                self.assertFalse(hasattr(module, table_name), table_name)

    def test_rows_come_from_the_registry(self):
        table = bench_rows.build_rows(bench_rows.make_size(1, 16, 2))
        rows = gpu_rows.check_rows(table, plan.QUICK_RNN_SIZE)
        by_name = {row.name: row for row in rows}
        self.assertEqual(len(by_name), len(rows))
        # The benchmark's training rows, in its order, vanilla first.
        trained = [row for row in table if row.train]
        self.assertEqual([row for row in rows if row in trained], trained)
        self.assertEqual(rows[0].name, plan.VANILLA)
        # Every registered family is trained; those the benchmark does not measure get a
        # row named after them, in their default mode, at their architecture's size.
        for family in registry.families():
            own = [row for row in rows if row.family == family.name]
            self.assertTrue(own, family.name)
            if family.name not in {row.family for row in table}:
                caps = probe.capabilities(family.name)
                self.assertEqual([row.name for row in own], [family.name])
                self.assertEqual(own[0].title, family.title)
                self.assertEqual(own[0].domain_training, caps.default_domain_training)
                if family.architecture != "transformer":
                    self.assertEqual(own[0].kwargs, plan.QUICK_RNN_SIZE)
        # LDR on both sides: the family's builder argument, after the family's rows.
        target = by_name["ldr_target"]
        self.assertEqual((target.family, target.kwargs), ("ldr_transformer", {"target_ldr": True}))
        self.assertEqual(target.title, "LDR, source and target")
        self.assertEqual(target.domain_training, "procedure1")
        names = [row.name for row in rows]
        self.assertEqual(names.index("ldr_target"), names.index("ldr_procedure1") + 1)
        # What the rows get, from the families' capabilities.
        no_xla, frozen = gpu_rows.row_checks(rows)
        rnn = [f.name for f in registry.families() if f.architecture == "rnn"]
        self.assertEqual(no_xla, rnn)
        self.assertEqual(
            frozen,
            ["dc", "ldr_joint", "ldr_procedure1", "ldr_target", "ldr_released", "fact_pa"]
            + ["fact_sf", "fact_df"],
        )
        for name in frozen:
            family = registry.get(by_name[name].family)
            self.assertNotEqual(family.finetune, "base")
            self.assertFalse(probe.capabilities(family.name).requires_base)
        base = [row.name for row in rows if row.family and registry.get(row.family).finetune]
        self.assertIn("adapters", base)
        self.assertNotIn("adapters", frozen)  # Trained on a frozen base model.
        self.assertEqual(gpu_rows.translate_row(table).name, "ldr")

    def test_imports_no_tensorflow(self):
        # The CUDA libraries are checked before TensorFlow loads them: neither the import
        # (python -m ldr_experiments.gpu_check: every module of the package) nor the command
        # line imports it.
        code = (
            "import sys; from ldr_experiments.gpu_check import __main__, cli; "
            "cli.parse_args(['--families', 'ldr', 'dc_rnn']); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('tensorflow', 'ldr_opennmt', 'opennmt')))"
        )
        output = subprocess.run(
            [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True
        )
        # No TensorFlow, no OpenNMT-tf, no registry: at most the package's modules of the
        # standard library (importing the package imports nothing else, issue 46).
        (loaded,) = output.stdout.splitlines()
        plain = {"ldr_opennmt", "ldr_opennmt.gpu", "ldr_opennmt.reports"}
        self.assertLessEqual(set(ast.literal_eval(loaded)), plain, output.stderr)


@pytest.mark.slow
class GpuCheckOnCpuTest(unittest.TestCase):
    """The GPU path of ldr_experiments/gpu_check, run on the CPU (--allow_cpu) at tiny sizes
    with the half-precision policy this CPU has: every measurement, check and the report
    work, so a GPU session only has to run it."""

    @helpers.skip_unless_full("minutes of XLA compilations on the CPU")
    def test_gpu_path_on_cpu(self):
        policy = helpers.mixed_precision_policy()
        if policy is None:
            self.skipTest("this CPU has no half-precision LayerNorm kernel")
        directory = tempfile.mkdtemp(prefix="ldr-gpu-check-cpu-")
        self.addCleanup(shutil.rmtree, directory, ignore_errors=True)
        out = os.path.join(directory, "report.md")
        command = "bash run/gpu_check.sh --allow_cpu --mixed_policy %s --quick " % policy
        # LDR joint, and Procedure 1 with LDR on both sides (each with its bit-identity
        # check, on the model of its long run); vanilla always.
        command += "--families ldr_joint ldr_target --modes mixed_xla --out %s" % shlex.quote(out)
        # About 200 s on a busy 2-core machine (XLA compilations on the CPU): the limit leaves
        # room for a busier one.
        result = _bash(command, _base_env(fake_venv(directory)), timeout=900)
        self.assertEqual(result.returncode, 1, result.stderr)  # No GPU: the GPU checks fail.
        with open(os.path.splitext(out)[0] + ".json", encoding="utf-8") as f:
            raw = json.load(f)
        results = raw["results"]
        for system in ("vanilla", "ldr_joint", "ldr_target"):
            entry = results["mixed_xla"][system]
            self.assertTrue(entry["finite_loss"], (system, entry))
        self.assertEqual(list(results["frozen"]), raw["config"]["frozen_systems"])
        modes = {row["name"]: row["domain_training"] for row in raw["config"]["rows"]}
        frozen_modes = sorted(modes[system] for system in results["frozen"])
        self.assertEqual(frozen_modes, ["joint", "procedure1"])
        for system, entry in results["frozen"].items():
            self.assertEqual(entry["absent_changed"], 0, system)
            self.assertGreater(entry["absent_variables"], 0, system)
            self.assertEqual(entry["present_changed"], entry["present_variables"], system)
            self.assertTrue(entry["finite_loss"], system)
            self.assertEqual(entry["compute_dtype"], policy[len("mixed_") :])
        self.assertEqual(
            results["translate"]["savedmodel_lengths"], [raw["config"]["decode_length"]]
        )
        with open(out, encoding="utf-8") as f:
            report = f.read()
        self.assertIn("| LDR joint |", report)


@pytest.mark.slow
@unittest.skipUnless(
    os.environ.get("LDR_TEST_GPU_INSTALL") == "1",
    "downloads about 1.7 GB of CUDA wheels: set LDR_TEST_GPU_INSTALL=1 to run it",
)
class GpuInstallTest(unittest.TestCase):
    """`source run/setup_env.sh --gpu` into a fresh venv: every library TensorFlow loads is
    found there by the dynamic loader, and XLA_FLAGS names a folder with ptxas and
    libdevice. The CPU part of that venv is taken as installed (its stamp), so only the GPU
    lock is installed: the CPU install is what every other test runs on."""

    def test_install(self):
        import tensorflow as tf

        directory = tempfile.mkdtemp(prefix="ldr-gpu-install-")
        self.addCleanup(shutil.rmtree, directory, ignore_errors=True)
        venv = os.path.join(directory, "venv")
        subprocess.run([sys.executable, "-m", "venv", venv], check=True)
        _touch_future(os.path.join(venv, ".ldr-installed"))
        env = _base_env(venv)
        probe = (
            "import importlib.util, json, sys\n"
            "spec = importlib.util.spec_from_file_location('g', sys.argv[1])\n"
            "gpu = importlib.util.module_from_spec(spec); spec.loader.exec_module(gpu)\n"
            "report = gpu.library_report(gpu.CUDA_LIBRARIES + ('libcurand.so.10',))\n"
            "print(json.dumps({'libraries': report, 'versions': gpu.library_versions(),"
            " 'xla_data_dir': gpu.xla_data_dir(), 'prefix': sys.prefix}))\n"
        )
        with open(os.path.join(directory, "probe.py"), "w") as f:
            f.write(probe)
        script = "source run/setup_env.sh --gpu && python %s %s" % (
            shlex.quote(os.path.join(directory, "probe.py")),
            shlex.quote(os.path.join(ROOT, "ldr_opennmt", "gpu.py")),
        )
        start = time.perf_counter()
        result = _bash(script, env)
        elapsed = time.perf_counter() - start
        self.assertEqual(result.returncode, 0, result.stderr)
        found = json.loads(result.stdout.splitlines()[-1])
        self.assertEqual(found["prefix"], venv)
        self.assertEqual(len(found["libraries"]), len(gpu.CUDA_LIBRARIES) + 1)
        for name, path in found["libraries"].items():
            self.assertIsNotNone(path, "%s does not load" % name)
            self.assertTrue(path.startswith(venv + "/"), path)
        self.assertIsNone(gpu.xla_data_dir_problem(found["xla_data_dir"]))
        self.assertTrue(found["xla_data_dir"].startswith(venv + "/"))
        build = tf.sysconfig.get_build_info()
        self.assertEqual(gpu.version_mismatches(found["versions"], build), [])
        self.assertEqual(found["versions"]["cudart"], build["cuda_version"])
        self.assertTrue(os.path.exists(os.path.join(venv, ".ldr-gpu-installed")))
        sys.stderr.write(
            "\n[GpuInstallTest] install + probe: %.1f s; versions %s\n"
            % (elapsed, found["versions"])
        )
        # A second source without --gpu installs nothing and exports the same folders.
        again = _bash('source run/setup_env.sh && echo "$LD_LIBRARY_PATH"', env)
        self.assertEqual(again.returncode, 0, again.stderr)
        self.assertIn(os.path.join(venv, "lib"), again.stdout)
        self.assertNotIn("installing", again.stdout)
        names = {
            normalize(n) for n in os.listdir(os.path.join(venv, "lib", PYTHON_DIR, "site-packages"))
        }
        self.assertTrue(any(n.startswith("nvidia-cudnn-" + CU) for n in names), names)
