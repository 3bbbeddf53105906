"""The commands of the serving runtime (issue 55 item 5): ``run/setup_serve.sh`` keeps
``ldr-serve`` and ``ldr-translate`` in ``.venv-serve/bin`` and removes the package's other
commands, which need TensorFlow (they died there with a ``ModuleNotFoundError`` traceback, and
hid the training environment's commands of the same names)."""

import os
import subprocess
import tempfile
import unittest

from ldr_opennmt.serving import runtime
from tests.serving.no_tensorflow import ROOT, run_without_tensorflow


class ServingCommandsTest(unittest.TestCase):
    def test_only_the_serving_commands_are_kept(self):
        commands = runtime.package_commands()  # This installation's console scripts.
        self.assertTrue({"ldr-serve", "ldr-translate", "ldr-main", "ldr-data"} <= set(commands))
        with tempfile.TemporaryDirectory() as bin_dir:
            for name in commands + ["python", "pip"]:
                with open(os.path.join(bin_dir, name), "w") as f:
                    f.write("#!/bin/sh\n")
            # Without TensorFlow, as in .venv-serve.
            status, stdout, stderr = run_without_tensorflow(
                "from ldr_opennmt.serving import runtime\nruntime.main()\n", bin_dir
            )
            self.assertEqual(status, 0, stderr)
            self.assertEqual(
                sorted(os.listdir(bin_dir)), ["ldr-serve", "ldr-translate", "pip", "python"]
            )
            others = [c for c in commands if c not in runtime.SERVING_COMMANDS]
            self.assertEqual(
                stdout,
                "[serve] %s has ldr-serve and ldr-translate only (%s need the training "
                "environment: source run/setup_env.sh)\n" % (bin_dir, ", ".join(others)),
            )
            # Again: nothing to remove, nothing said.
            status, stdout, stderr = run_without_tensorflow(
                "from ldr_opennmt.serving import runtime\nruntime.main()\n", bin_dir
            )
            self.assertEqual((status, stdout, stderr), (0, "", ""))

    def test_a_classifier_is_said_to_need_the_training_environment(self):
        # Was: a ModuleNotFoundError traceback from ldr-serve --classifier in .venv-serve.
        status, stdout, stderr = run_without_tensorflow(
            "from ldr_opennmt.errors import UserError\n"
            "from ldr_opennmt.serving import server\n"
            "try:\n"
            "    server._classifier_class()\n"
            "except UserError as e:\n"
            "    print(e)\n"
        )
        self.assertEqual(status, 0, stderr)
        self.assertEqual(
            stdout,
            "--classifier: the domain classifier is a SavedModel, which needs the training "
            "environment (TensorFlow is not installed here: No module named 'tensorflow' "
            "(blocked)); serve without --classifier, or run in the training environment "
            "(source run/setup_env.sh)\n",
        )

    def test_setup_serve_runs_it(self):
        with open(os.path.join(ROOT, "run", "setup_serve.sh")) as f:
            script = f.read()
        self.assertIn('/bin/python" -m ldr_opennmt.serving.runtime "$_ldr_serve_venv/bin"', script)
        result = subprocess.run(["bash", "-n", "run/setup_serve.sh"], cwd=ROOT, check=False)
        self.assertEqual(result.returncode, 0)


if __name__ == "__main__":
    unittest.main()
