"""Shared pytest setup: the Hypothesis profile, the session's cache of tiny models and
exports (:mod:`tests.session_cache`), each file's view of the family registry, and the
summary line that says what the run left out and how fast this host is."""

import datetime
import os
import sys
import time

import pytest
from hypothesis import HealthCheck, Phase, settings

from tests import session_cache

# The Hypothesis profile, loaded before any test module is imported (so that the first file
# collected, or a file run alone, gets it too): no example database (nothing written under
# the repository, nothing replayed from an earlier run) and a derandomized search, so that CI
# sees the same examples at every run. ``LDR_HYPOTHESIS_PROFILE=ldr-deep`` searches further
# (random, more examples) when hunting for bugs by hand; a failure it finds belongs in an
# ``@example``.
settings.register_profile(
    "ldr-ci",
    database=None,
    derandomize=True,
    max_examples=60,
    # Generous: the machine is shared, and TensorFlow's first calls are slow. A reader that
    # hangs on an input still fails the test once the example ends.
    deadline=datetime.timedelta(seconds=5),
    print_blob=False,
    suppress_health_check=[HealthCheck.too_slow],
    # No explain phase: its line tracing slows deep recursion (a configuration nested too
    # deeply) a hundredfold, past the deadline, and a failure would be reported as flaky
    # timings instead of itself.
    phases=[phase for phase in Phase if phase is not Phase.explain],
)
settings.register_profile(
    "ldr-deep", parent=settings.get_profile("ldr-ci"), derandomize=False, max_examples=1000
)
settings.load_profile(os.environ.get("LDR_HYPOTHESIS_PROFILE", "ldr-ci"))


@pytest.fixture(autouse=True, scope="session")
def _session_cache(tmp_path_factory):
    """Points :mod:`tests.session_cache` at a folder every worker of this session shares:
    the parent of a pytest-xdist worker's base temporary folder (each worker has its own),
    or the base temporary folder itself without workers."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent
    session_cache.set_root(str(base / "ldr-session-cache"))


@pytest.fixture(autouse=True, scope="module")
def _registry_per_test_file():
    """Each test file sees the package's families only, plus those it registers itself.

    A test that loads a user module registers its families in this process, and pytest-xdist
    runs several files in one worker: without this, a later file's view of the registry
    (the README's family list, the tests parameterized over every family) would depend on
    which files ran before it. The registry and the imported user modules are put back as
    they were after each file.
    """
    from ldr_opennmt import registry

    registry.names()  # The package's families, registered once.
    families = dict(registry._FAMILIES)
    module_files = dict(registry._module_files)
    modules = {name for name in sys.modules if name.startswith("ldr_opennmt_user_")}
    yield
    registry._FAMILIES.clear()
    registry._FAMILIES.update(families)
    registry._module_files.clear()
    registry._module_files.update(module_files)
    for name in [n for n in sys.modules if n.startswith("ldr_opennmt_user_")]:
        if name not in modules:
            del sys.modules[name]


_STARTED = [time.monotonic()]


def pytest_sessionstart(session):
    _STARTED[0] = time.monotonic()


def pytest_collection_modifyitems(config, items):
    """Leaves out ``test_session``, which every ``tf.test.TestCase`` inherits and skips as "Not
    a test.": some 220 skips that would bury the ones saying what this run left out."""
    kept, dropped = [], []
    for item in items:
        inherited = item.name == "test_session" and getattr(item, "cls", None) is not None
        if inherited and "test_session" not in vars(item.cls):
            dropped.append(item)
        else:
            kept.append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


#: The switches of what the default run leaves out, and where it runs instead.
OPT_IN = (
    ("LDR_TEST_FULL=1", "tests of minutes and the GPU paths on the CPU (run/gpu_check.sh runs"
     " the GPU paths on a GPU)"),
    ("LDR_TEST_SLURM=1", "a one-node SLURM cluster (as root)"),
    ("LDR_TEST_GPU_INSTALL=1", "the CUDA wheels installed for real (1.7 GB)"),
    ("Horovod", "two Horovod workers (bash run/install_horovod.sh)"),
    ("Chromium", "the page in a real browser (apt-get install chromium)"),
    ("Playwright", "the page in a real browser (the test extra)"),
)  # fmt: skip


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """After the run (on the controller only): what it left out, by switch, and its time
    beside this host's speed (``run/test.sh`` measures it: ``LDR_HOST_SPEED``), so that a
    time can be compared across hosts (docs/development.md)."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return
    reasons = []
    for report in terminalreporter.stats.get("skipped", []):
        longrepr = report.longrepr
        reasons.append(longrepr[2] if isinstance(longrepr, tuple) else str(longrepr))
    counts = [(switch, why, sum(switch in r for r in reasons)) for switch, why in OPT_IN]
    left_out = ["%d need %s: %s" % (n, switch, why) for switch, why, n in counts if n]
    write = terminalreporter.write_line
    if left_out:
        terminalreporter.section("left out of this run")
        for line in left_out:
            write(line)
    speed = os.environ.get("LDR_HOST_SPEED")
    minutes = (time.monotonic() - _STARTED[0]) / 60
    terminalreporter.section("time and host")
    if speed:
        write(
            "%.1f minutes of tests on a host of speed %s steps/s (python -m"
            " ldr_experiments.host_speed; README: the time on the reference host)"
            % (minutes, speed)
        )
    else:
        write("%.1f minutes of tests (this host's speed: python -m ldr_experiments.host_speed)"
              % minutes)  # fmt: skip
