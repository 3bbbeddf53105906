"""ldr-opennmt: multi-domain neural machine translation for OpenNMT-tf."""

import os
import shutil

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py

# The repository's directories the experiment drivers name ("model_defs/small/...py",
# "data_configs/default.yml"): an installed package carries copies under
# ldr_experiments/resources/ (ldr_experiments.common.resource finds them), so the experiments
# run from an installed package with their results anywhere. A checkout keeps one copy.
RESOURCE_DIRS = ("model_defs", "data_configs")


class BuildWithResources(build_py):
    """Copies :data:`RESOURCE_DIRS` into the built ``ldr_experiments/resources``."""

    def run(self):
        super().run()
        here = os.path.dirname(os.path.abspath(__file__))
        for name in RESOURCE_DIRS:
            target = os.path.join(self.build_lib, "ldr_experiments", "resources", name)
            if os.path.isdir(target):
                shutil.rmtree(target)  # Its own build directory's copy, from an earlier build.
            shutil.copytree(
                os.path.join(here, name),
                target,
                ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
            )


setup(
    cmdclass={"build_py": BuildWithResources},
    name="ldr-opennmt",
    version="0.1.0",
    description="Multi-domain NMT (lexicalized domain representations) for OpenNMT-tf",
    license="MIT",
    packages=find_packages(exclude=["tests", "tests.*"]),
    # The seed words of the contrastive lexical-choice test (ldr-eval contrastive).
    package_data={
        "ldr_opennmt.evaluation": ["contrastive_words.txt"],
        # The experiments' one workflow (ldr_experiments/engine.py).
        "ldr_experiments": ["workflow.smk"],
        # The page of ldr-serve (GET /, ldr_opennmt/serving/ui.py): served from the package.
        "ldr_opennmt.serving": ["ui_assets/*"],
    },
    # Two training stacks (docs/installation.md): Python 3.11 with TensorFlow 2.13.1 and
    # TensorFlow Addons 0.21, and Python 3.12 with TensorFlow 2.21 and tf-keras (Keras 2), where
    # TensorFlow Addons has no wheel and the package's replacement stands in for it
    # (ldr_opennmt/upstream/addons). Python 3.13: pyonmttok has no wheel or source there.
    python_requires=">=3.11,<3.13",
    install_requires=[
        # Pinned: opennmt-tf 2.32 is validated against TensorFlow 2.13; the
        # opennmt-tf[tensorflow] extra is avoided on purpose (it pulls tensorflow-text,
        # which has no 2.13 wheel for Python 3.11, and pip silently falls back to TF 2.12).
        # On Python 3.12 opennmt-tf is installed without its dependencies (run/setup_env.sh,
        # requirements-py312-nodeps.lock): its metadata asks for tensorflow-addons, which has
        # no wheel there; the rest of what it asks for is listed below.
        'opennmt-tf==2.32.0; python_version < "3.12"',
        'tensorflow==2.13.1; python_version < "3.12"',
        'tensorflow-addons==0.21.0; python_version < "3.12"',
        'numpy==1.24.3; python_version < "3.12"',
        'tensorflow==2.21.0; python_version >= "3.12"',
        # Keras 2 (tf.keras with TF_USE_LEGACY_KERAS=1, which the package's start-up hook
        # sets): OpenNMT-tf uses tf.keras.optimizers.legacy, which Keras 3 does not have.
        'tf-keras==2.21.0; python_version >= "3.12"',
        # TensorFlow 2.21 no longer pulls TensorBoard; OpenNMT-tf imports it.
        'tensorboard==2.21.0; python_version >= "3.12"',
        'numpy==2.5.5; python_version >= "3.12"',
        'rouge==1.0.1; python_version >= "3.12"',
        'packaging==26.4; python_version >= "3.12"',
        "sacrebleu==2.6.0",
        "pyonmttok==1.38.1",
        "pyyaml==6.0.3",
        "matplotlib==3.10.9",
        "polib==1.2.0",
        "tqdm==4.70.1",
        # opennmt-tf 2.32 accepts ctranslate2 3.x (folded fast inference, ldr-export).
        "ctranslate2==3.24.0",
        # ldr-export's domain guard and calibrated confidence (ldr_opennmt/export/quality.py):
        # fitted here, applied with numpy in the serving runtime (no scikit-learn there).
        "scikit-learn==1.9.1",
    ],
    entry_points={
        "console_scripts": [
            "ldr-data=ldr_opennmt.cli.launch:ldr_data",
            "ldr-eval=ldr_opennmt.cli.launch:ldr_eval",
            "ldr-main=ldr_opennmt.cli.launch:ldr_main",
            "ldr-analyze=ldr_opennmt.cli.launch:ldr_analyze",
            "ldr-export=ldr_opennmt.cli.launch:ldr_export",
            "ldr-translate=ldr_opennmt.cli.translate:main",
            "ldr-serve=ldr_opennmt.cli.serve:main",
            # The experiments (demo, tables, studies, benchmarks): docs/tables.md.
            "ldr-experiments=ldr_experiments.cli:main",
        ],
        # The families the registry loads when first asked for (ldr_opennmt.registry): the
        # package's own catalog; another package registers its families the same way.
        "ldr_opennmt.families": ["ldr_opennmt=ldr_opennmt.models.catalog"],
    },
    extras_require={
        # The experiments' workflow engine (ldr_experiments, docs/scale.md): Snakemake runs
        # the plans on this machine's lanes or on a SLURM cluster. Snakemake 9.15 and the
        # SLURM executor 1.4 are the newest that install beside TensorFlow 2.13's pins
        # (later ones need pydantic 2 and numpy 2 through the executor plugin).
        "experiments": [
            "snakemake==9.15.0",
            "snakemake-executor-plugin-slurm==1.4.0",
            # A stage's job runs the stage its engine declared, pickled with its closures
            # (ldr_experiments/engine.py), not the driver again: the stdlib's pickle refuses
            # closures; cloudpickle (Dask's, Ray's, PySpark's) pickles them by value.
            "cloudpickle==3.1.3",
        ],
        "test": [
            # pytest 8.4: schemathesis 3.39 (the last that installs beside TensorFlow 2.13's
            # typing-extensions < 4.6 and FastAPI 0.103's anyio < 4) requires pytest < 9.
            "pytest==8.4.2",
            "pytest-xdist==3.8.0",
            "parameterized==0.9.0",
            # 6.170.9: hypothesis-jsonschema (schemathesis's generator) calls many.more(),
            # which Hypothesis 6.170.10 removed.
            "hypothesis==6.170.9",
            # The serving tests start the real ldr-serve server (the serve extra).
            "fastapi==0.103.2",
            "uvicorn==0.54.0",
            "prometheus-client==0.26.0",
            "fastapi-offline==1.7.7",
            # Property tests of every route from the server's own OpenAPI schema, and the
            # LibreTranslate client (tests/serving/test_api.py).
            "schemathesis==3.39.16",
            "libretranslatepy==2.1.4",
            # Starlette 0.27's TestClient passes app= to httpx, which httpx 0.28 removed.
            "httpx==0.27.2",
            # The browser test of ldr-serve's page (tests/serving/test_ui.py) drives Debian's
            # Chromium (/usr/bin/chromium, apt-get install chromium; .ci/run installs it):
            # the wheel carries its own driver, and no browser is downloaded.
            "playwright==1.65.2",
        ],
        # ldr-serve (docs/serving.md). FastAPI 0.103 is the last whose dependencies
        # accept typing-extensions 4.5, which TensorFlow 2.13 requires (< 4.6): newer
        # FastAPI needs pydantic 2, whose pydantic-core needs typing-extensions >= 4.6.
        "serve": [
            "fastapi==0.103.2",
            "uvicorn==0.54.0",
            # /metrics, and /docs and /redoc from local assets (no CDN).
            "prometheus-client==0.26.0",
            "fastapi-offline==1.7.7",
        ],
        # The documentation site (docs/, bash run/docs.sh; tests/test_docs.py builds it in
        # CI): Sphinx with MyST Markdown pages and the furo theme. Not needed to use the
        # package; locked with the test tools (run/lock.sh), so CI has them. Sphinx 8.2:
        # Sphinx 9 uses typing_extensions.TypeAliasType (typing-extensions >= 4.6), and
        # TensorFlow 2.13 requires typing-extensions < 4.6.
        "docs": [
            "sphinx==8.2.3",
            "myst-parser==5.2.0",
            "furo==2025.12.19",
        ],
    },
)
