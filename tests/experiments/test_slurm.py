"""The experiments' plans on a real SLURM cluster (opt-in: ``LDR_TEST_SLURM=1``).

The cluster is the one-node SLURM of ``run/slurm_single_node.sh`` (Debian's SLURM 22.05,
slurmdbd on a private MariaDB): the test uses the one running (``/etc/slurm/slurm.conf`` or
``SLURM_CONF``), or, as root, starts one in ``LDR_TEST_SLURM_DIR`` (default
``/tmp/ldr-slurm-test``) with a fake GPU, and stops it afterwards. Checked:

- Snakemake's SLURM executor works here: a one-rule Snakefile runs as a SLURM job, with the
  account, the memory and the GPU it asks for (``sacct``). Started first, in the background.
- Meanwhile, a plan of the engine (the toy driver tests/experiments/engine_driver.py: a
  training ``a``, then ``b`` after it, and ``c``) runs with ``--executor slurm``: the training
  is a SLURM job in the partition and account given, with ``--gpus-per-training`` GPUs; the
  local stages run where the engine runs; a dry run before submits nothing, and so does a
  rerun after.

About 2.5 minutes (4 to 18 s to start the cluster): Snakemake's SLURM executor looks at its
jobs with ``sacct`` 40 s after it submits them and 40 s apart once one has finished, and waits
that long again before it exits.
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "run", "slurm_single_node.sh")
ACCOUNT = os.environ.get("LDR_TEST_SLURM_ACCOUNT", "ldr")

#: The job ids Snakemake's SLURM executor reports in its log.
SUBMITTED = re.compile(r"has been submitted with SLURM jobid (\d+)")


def _run(command, timeout=120, **kwargs):
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, **kwargs)


def _cluster_up():
    return shutil.which("sinfo") is not None and _run(["sinfo", "-h"], timeout=30).returncode == 0


def sacct(job_ids):
    """``{job id: {field: value}}`` of finished jobs, from the accounting database."""
    fields = ["JobIDRaw", "State", "Account", "Partition", "AllocTRES", "Comment"]
    result = _run(
        ["sacct", "-X", "-n", "-P", "-o", ",".join(fields), "-j", ",".join(job_ids)], timeout=60
    )
    assert result.returncode == 0, result.stderr
    rows = [dict(zip(fields, line.split("|"))) for line in result.stdout.splitlines()]
    return {row["JobIDRaw"]: row for row in rows}


@unittest.skipUnless(os.environ.get("LDR_TEST_SLURM") == "1", "set LDR_TEST_SLURM=1 (minutes)")
class SlurmTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.env = dict(os.environ)
        # The SLURM executor reads $USER when no account is given (a login shell sets it).
        if not cls.env.get("USER"):
            cls.env["USER"] = _run(["id", "-un"]).stdout.strip()
        cls.started = None
        if not _cluster_up():
            if os.geteuid() != 0:
                raise unittest.SkipTest("no SLURM cluster up, and starting one needs root")
            directory = os.environ.get("LDR_TEST_SLURM_DIR", "/tmp/ldr-slurm-test")
            start = time.time()
            result = _run(["bash", SCRIPT, "start", directory, "--fake-gpus", "1"], timeout=600)
            if result.returncode != 0:
                raise AssertionError("%s start failed:\n%s" % (SCRIPT, result.stderr))
            cls.started = directory
            sys.stderr.write("[slurm test] cluster started in %.0f s\n" % (time.time() - start))
            conf = _run(["bash", SCRIPT, "env", directory]).stdout.strip().split("=", 1)[1]
            cls.env["SLURM_CONF"] = os.environ["SLURM_CONF"] = conf
        partitions = _run(["sinfo", "-h", "-o", "%P"]).stdout.split()
        defaults = [p for p in partitions if p.endswith("*")] or partitions
        cls.partition = defaults[0].rstrip("*")
        cls.gpus = 1 if "gpu" in _run(["sinfo", "-h", "-o", "%G"]).stdout else 0
        cls.dir = tempfile.mkdtemp(prefix="slurm-test-", dir=os.environ.get("LDR_TEST_SLURM_TMP"))

        cls.snakefile = cls._start_snakefile()

    @classmethod
    def tearDownClass(cls):
        if cls.snakefile.poll() is None:
            cls.snakefile.kill()
            cls.snakefile.wait()
        cls.snakefile_log.close()
        shutil.rmtree(cls.dir, ignore_errors=True)
        if cls.started:
            _run(["bash", SCRIPT, "stop", cls.started], timeout=120)

    @classmethod
    def _start_snakefile(cls):
        """Starts Snakemake's SLURM executor on a one-rule Snakefile, in the background while
        the engine's plan runs (each waits on the executor's 40 s polls)."""
        directory = os.path.join(cls.dir, "snakefile")
        os.makedirs(directory)
        gpu = ", gpu=%d" % cls.gpus if cls.gpus else ""
        with open(os.path.join(directory, "Snakefile"), "w", encoding="utf-8") as f:
            f.write(
                "rule job:\n"
                "    output: 'job.txt'\n"
                "    resources: mem_mb=200, runtime=5, slurm_account='%s'%s\n"
                "    shell: 'echo $SLURM_JOB_ID $SLURM_JOB_PARTITION > {output}'\n" % (ACCOUNT, gpu)
            )
        command = [sys.executable, "-m", "snakemake", "--executor", "slurm", "--jobs", "1"]
        command += ["--default-resources", "slurm_partition=%s" % cls.partition]
        cls.snakefile_dir = directory
        cls.snakefile_log = open(os.path.join(cls.dir, "snakefile.log"), "w+", encoding="utf-8")
        return subprocess.Popen(
            command, cwd=directory, env=cls.env, stdout=cls.snakefile_log, stderr=subprocess.STDOUT
        )

    def _check_job(self, row, comment):
        self.assertEqual(row["State"], "COMPLETED")
        self.assertEqual(row["Comment"], comment)
        self.assertEqual(row["Account"], ACCOUNT)
        self.assertEqual(row["Partition"], self.partition)
        if self.gpus:
            self.assertIn("gres/gpu=%d" % self.gpus, row["AllocTRES"])
        else:
            self.assertNotIn("gres/gpu", row["AllocTRES"])

    def _engine(self, out, *extra):
        """Runs the toy driver through the engine on SLURM; returns its stderr."""
        argv = ["--out", out, "--executor", "slurm", "--slurm-partition", self.partition]
        argv += ["--slurm-account", ACCOUNT, "--gpus-per-training", str(self.gpus)]
        # What the one node has (the defaults, 4 cores and 16 GB, stay pending there forever
        # on a 2-core machine: SLURM's reason PartitionConfig).
        argv += ["--cpus-per-training", "1", "--mem-mb-per-training", "1000"]
        argv += ["--minutes-per-training", "10"] + list(extra)
        code = "import sys\nfrom tests.experiments import engine_driver\n"
        code += "sys.exit(engine_driver.main(sys.argv[1:]))\n"
        start = time.time()
        result = _run([sys.executable, "-c", code] + argv, cwd=ROOT, env=self.env, timeout=420)
        sys.stderr.write("[slurm test] engine %s: %.0f s\n" % (extra, time.time() - start))
        self.assertEqual(result.returncode, 0, result.stderr[-3000:])
        return result.stderr

    def test_1_the_engine_runs_a_plan_on_slurm_once(self):
        out = os.path.join(self.dir, "plan")
        # A dry run lists the stages (the training with its GPU request) and submits nothing.
        self._engine(out, "--dry-run")
        with open(os.path.join(out, "workflow", "snakemake.log"), encoding="utf-8") as f:
            log = f.read()
        self.assertIn("rule stage_a:", log)
        if self.gpus:
            self.assertIn("gpu=%d" % self.gpus, log)
        self.assertEqual(SUBMITTED.findall(log), [])
        self.assertFalse(os.path.exists(os.path.join(out, "runs.log")))

        self._engine(out)
        with open(os.path.join(out, "workflow", "snakemake.log"), encoding="utf-8") as f:
            log = f.read()
        job_ids = SUBMITTED.findall(log)
        self.assertEqual(len(job_ids), 1, log[-3000:])  # The training; b and c are local.
        self._check_job(sacct(job_ids)[job_ids[0]], "rule_stage_a")
        with open(os.path.join(out, "b.txt"), encoding="utf-8") as f:
            self.assertEqual(f.read(), "A=1\n")  # b ran after a, from what a wrote.
        with open(os.path.join(out, "runs.log"), encoding="utf-8") as f:
            runs = dict(line.split(" ", 1) for line in f.read().splitlines())
        self.assertEqual(sorted(runs), ["a", "b", "c"])
        # In a SLURM job the stage takes the job's cores (no lane of the login machine).
        self.assertTrue(runs["a"].startswith("None "), runs)

        # Everything is up to date: the rerun submits no job and trains nothing.
        self._engine(out)
        with open(os.path.join(out, "workflow", "snakemake.log"), encoding="utf-8") as f:
            self.assertEqual(SUBMITTED.findall(f.read()), job_ids)
        with open(os.path.join(out, "runs.log"), encoding="utf-8") as f:
            self.assertEqual([line.split()[0] for line in f].count("a"), 1)

    def test_2_snakemake_ran_a_rule_as_a_slurm_job(self):
        status = self.snakefile.wait(timeout=300)
        self.snakefile_log.seek(0)
        log = self.snakefile_log.read()
        self.assertEqual(status, 0, log[-3000:])
        job_ids = SUBMITTED.findall(log)
        self.assertEqual(len(job_ids), 1, log[-3000:])
        with open(os.path.join(self.snakefile_dir, "job.txt"), encoding="utf-8") as f:
            self.assertEqual(f.read().split(), [job_ids[0], self.partition])
        row = sacct(job_ids)[job_ids[0]]
        self._check_job(row, "rule_job")
        self.assertIn("mem=200M", row["AllocTRES"])


if __name__ == "__main__":
    unittest.main()
