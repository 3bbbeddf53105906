"""Shared pytest setup."""

import sys

import pytest


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
