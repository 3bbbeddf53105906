"""The library's standard-library modules (``reports``, ``gpu``), for the processes that must
stay without TensorFlow (the benchmark's CTranslate2 measurements, the GPU check's parent,
which checks the CUDA libraries before TensorFlow loads them, the serving benchmark's
clients).

Importing ``ldr_opennmt`` or any of its modules imports nothing beyond what the module
needs (issue 46): these modules are plain imports, and load no TensorFlow.
"""

from ldr_opennmt import gpu, reports

#: The modules of the library that import the standard library only, by name.
MODULES = {"gpu": gpu, "reports": reports}


def module(name):
    """The library's module ``ldr_opennmt.<name>``, one of :data:`MODULES` (``reports``,
    ``gpu``): modules of the standard library only."""
    return MODULES[name]


def markdown_table(*args, **kwargs):
    """The package's one Markdown table (:func:`ldr_opennmt.reports.markdown_table`)."""
    return module("reports").markdown_table(*args, **kwargs)
