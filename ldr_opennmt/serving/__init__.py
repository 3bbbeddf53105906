"""Serving, without TensorFlow for CTranslate2 exports: ``ldr-serve``, ``ldr-translate`` and
the Python ``Translator`` over the directories of ``ldr-export`` (which writes them:
:mod:`ldr_opennmt.export`), and the SavedModel client of the training environment."""
