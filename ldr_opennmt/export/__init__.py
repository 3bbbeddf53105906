"""Export time, in the training environment (TensorFlow): a trained model folded into one
plain Transformer per domain (:mod:`~ldr_opennmt.export.folding`) and written as a CTranslate2
model directory with its manifest (:mod:`~ldr_opennmt.export.ct2_export`, ``ldr-export
ctranslate2``).

The serving runtime (:mod:`ldr_opennmt.serving`: ``ldr-serve``, ``ldr-translate``, the Python
``Translator``) reads what these write and never imports them: it runs without TensorFlow.
"""
