"""The library's standard-library modules, loaded from their files without the package.

``import ldr_opennmt.reports`` runs the package's ``__init__``, which imports TensorFlow:
the processes that must stay without it (the benchmark's CTranslate2 measurements, the GPU
check's parent, which checks the CUDA libraries before TensorFlow loads them, the serving
benchmark's clients) load those modules with :func:`module` instead.
"""

import importlib.util
import os
import sys

#: The folder of the ``ldr_opennmt`` package beside this one.
LIBRARY = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "ldr_opennmt")


def module(name):
    """``ldr_opennmt/<name>.py`` loaded from its file, once per process, without the package:
    for the modules that import the standard library only (``reports``, ``gpu``)."""
    key = "_ldr_%s_standalone" % name
    if key not in sys.modules:
        spec = importlib.util.spec_from_file_location(key, os.path.join(LIBRARY, name + ".py"))
        loaded = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(loaded)
        sys.modules[key] = loaded
    return sys.modules[key]


def markdown_table(*args, **kwargs):
    """The package's one Markdown table (:func:`ldr_opennmt.reports.markdown_table`)."""
    return module("reports").markdown_table(*args, **kwargs)
