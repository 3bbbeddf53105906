"""The multi-domain Runner (``ldr-main``): per-domain corpora, domain sampling,
per-domain evaluation, fine-tuning, new domains on trained models and Horovod workers.

Above the models in the package's layering (``docs/architecture.md``, "The package";
``tests/test_layering.py``): it imports ``models``, ``layers``, ``inputters`` and the bottom
modules, and nothing from ``serving``, ``evaluation``, ``analysis`` or ``cli``.
"""
