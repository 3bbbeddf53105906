"""The experiments run from an installed package, their results under any working directory
(issue 57 item 3): no driver changes directory, and the model definitions and data
configurations the drivers name are found by :func:`ldr_experiments.common.resource`."""

import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap

import tensorflow as tf

from ldr_experiments import common, systems

PACKAGES = ("ldr_opennmt", "ldr_experiments")


def _package_sources():
    return [
        path
        for package in PACKAGES
        for path in glob.glob(os.path.join(common.ROOT, package, "**", "*.py"), recursive=True)
    ]


def _stage_names(plan_path):
    with open(plan_path) as f:
        return [stage["name"] for stage in json.load(f)["stages"]]


class ResourceTest(tf.test.TestCase):
    def setUp(self):
        super().setUp()
        cwd = os.getcwd()
        self.addCleanup(os.chdir, cwd)

    def test_from_the_checkout_s_root_the_path_is_kept(self):
        os.chdir(common.ROOT)
        self.assertEqual(common.resource("data_configs/default.yml"), "data_configs/default.yml")

    def test_from_elsewhere_the_checkout_s_file(self):
        os.chdir(self.get_temp_dir())
        path = systems.model_def("ldr_transformer", systems.SMALL)
        self.assertEqual(common.resource(path), os.path.join(common.ROOT, path))
        # A file of the working directory comes first (a user's own data_configs/).
        os.makedirs("data_configs", exist_ok=True)
        with open("data_configs/default.yml", "w") as f:
            f.write("data: {}\n")
        self.assertEqual(common.resource("data_configs/default.yml"), "data_configs/default.yml")
        self.assertEqual(common.load_yaml("data_configs/default.yml"), {"data": {}})
        # Named nowhere: kept, so that the command opening it names it.
        self.assertEqual(common.resource("data_configs/nope.yml"), "data_configs/nope.yml")
        absolute = os.path.join(common.ROOT, "data_configs", "default.yml")
        self.assertEqual(common.resource(absolute), absolute)

    def test_the_default_corpus_is_the_working_directory_s(self):
        os.chdir(self.get_temp_dir())
        self.assertEqual(common.corpus_argument(os.path.abspath("data/default")), "data/default")
        self.assertEqual(common.corpus_argument(None), "data/default")

    def test_no_module_changes_directory(self):
        offenders = []
        for path in _package_sources():
            with open(path, encoding="utf-8") as f:
                if "os.chdir(" in f.read():
                    offenders.append(os.path.relpath(path, common.ROOT))
        self.assertEqual(offenders, [])


class InstalledPackageTest(tf.test.TestCase):
    """A wheel built from this checkout, installed in a folder of its own (no dependency: the
    environment's are used), runs the demo's plan from a third directory."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.dir = tempfile.mkdtemp()
        cls.addClassCleanup(shutil.rmtree, cls.dir)
        # A copy: building writes build/ and *.egg-info beside setup.py.
        source = os.path.join(cls.dir, "source")
        ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
        os.makedirs(source)
        for name in ("setup.py", "MANIFEST.in"):
            shutil.copy(os.path.join(common.ROOT, name), source)
        for name in PACKAGES + ("model_defs", "data_configs"):
            shutil.copytree(
                os.path.join(common.ROOT, name), os.path.join(source, name), ignore=ignore
            )
        wheels = os.path.join(cls.dir, "wheels")
        cls.target = os.path.join(cls.dir, "installed")
        pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
        subprocess.run(
            pip + ["wheel", "--no-deps", "--no-build-isolation", "-w", wheels, source],
            check=True,
            cwd=cls.dir,
        )
        (wheel,) = glob.glob(os.path.join(wheels, "*.whl"))
        subprocess.run(pip + ["install", "--no-deps", "--target", cls.target, wheel], check=True)
        shutil.rmtree(source)  # Nothing of the checkout is left to find but the installed copy.
        cls.work = os.path.join(cls.dir, "work")
        os.makedirs(cls.work)

    def _python(self, code, *args):
        env = dict(os.environ, PYTHONPATH=self.target, TF_CPP_MIN_LOG_LEVEL="3")
        return subprocess.run(
            [sys.executable, "-W", "ignore", "-c", textwrap.dedent(code), *args],
            cwd=self.work,
            env=env,
            capture_output=True,
            text=True,
        )

    def test_the_package_carries_every_file_the_drivers_name(self):
        # Every model definition and data configuration of the checkout, as the drivers name
        # them (systems.MODEL_DEFS, the tables' ablations and controls, --config defaults).
        names = sorted(
            os.path.relpath(path, common.ROOT)
            for directory in ("model_defs", "data_configs")
            for path in glob.glob(os.path.join(common.ROOT, directory, "**", "*.*"), recursive=True)
            if path.endswith((".py", ".yml"))
        )
        self.assertContainsSubset(
            [p for scales in systems.MODEL_DEFS.values() for p in scales.values()], names
        )
        result = self._python(
            """
            import json, sys
            from ldr_experiments import common
            names = json.loads(sys.argv[1])
            print(json.dumps([common.__file__] + [common.resource(p) for p in names]))
            """,
            json.dumps(names),
        )
        self.assertEqual(result.returncode, 0, result.stderr)
        module, *found = json.loads(result.stdout)
        packaged = os.path.join(self.target, "ldr_experiments", "resources")
        self.assertTrue(module.startswith(self.target), module)
        for name, path in zip(names, found):
            self.assertEqual(path, os.path.join(packaged, name))
            with open(path, "rb") as copy, open(os.path.join(common.ROOT, name), "rb") as f:
                self.assertEqual(copy.read(), f.read(), name)

    def test_the_demo_s_plan_runs_from_a_folder_of_the_user(self):
        result = self._python("""
            import sys
            from ldr_experiments import cli
            sys.argv = ["ldr-experiments", "demo", "--quick", "--dry-run"]
            cli.main()
            """)
        self.assertEqual(result.returncode, 0, result.stderr[-3000:])
        out = os.path.join(self.work, "results", "demo-quick")
        with open(os.path.join(out, "workflow", "phase-1.json")) as f:
            plan = json.load(f)
        self.assertEqual(plan["root"], self.work)
        # The training of Mixed, loaded as its job loads it, names the installed copy.
        (plan_path,) = [
            path
            for path in glob.glob(os.path.join(out, "workflow", "phase-*.json"))
            if "mixed" in _stage_names(path)
        ]
        loaded = self._python(
            """
            import json, sys
            from ldr_experiments import engine
            steps, stage = engine.load_stage(sys.argv[1], "mixed")
            print(json.dumps([c for title, c in steps.commands if title == "Train Mixed"][0]))
            """,
            plan_path,
        )
        self.assertEqual(loaded.returncode, 0, loaded.stderr[-3000:])
        command = json.loads(loaded.stdout)
        model = command[command.index("--model") + 1]
        self.assertEqual(
            model,
            os.path.join(
                self.target,
                "ldr_experiments",
                "resources",
                "model_defs",
                "small",
                "mixed_transformer_tied.py",
            ),
        )
        with open(os.path.join(out, "configs", "data.yml")) as f:
            self.assertIn("data/default", f.read())


if __name__ == "__main__":
    tf.test.main()
