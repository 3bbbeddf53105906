"""Side-by-side benchmarks of the registered model families: speed and memory.

::

    bash run/bench.sh [--quick] [--out BENCH.md] [--layers 2 --units 256 ...]
    bash run/bench.sh --families ldr_transformer factorized [--user_module my_method.py]
    ldr-experiments bench --help

One run measures, on the same synthetic data and the same batches, with models of
the same size, and prints as markdown with ratios to the vanilla
``opennmt.models.Transformer`` of that size:

1. training: OpenNMT-tf's own training step (``Trainer._steps``: gradients,
   accumulation and the Adam update) on 16 batches cached in memory, median over
   ``--steps`` steps after ``--warmup``, in the row's training mode (ms/step and
   source+target tokens/s);
2. inference on CPU with beam search, on the same padded batches of the same
   sentences: the exported SavedModels (``serving_default``), and the CTranslate2
   models of vanilla (OpenNMT-tf converter) and of the families that fold (one model
   for one domain, :mod:`ldr_opennmt.export.ct2_export`). The models are untrained,
   so every output is forced to ``--decode_length`` tokens (minimum = maximum decoding
   length) and the tokens are counted from the outputs;
3. the peak resident memory of each of these measurements: each one runs in its own
   process, one after the other, never in parallel, and reports its peak RSS
   (``VmHWM``, see :func:`~ldr_experiments.benchmarks.measure.peak_rss_mib`) at its end.

The modules:

* :mod:`~ldr_experiments.benchmarks.rows`: the systems, rows of one table (``Row``,
  ``build_rows``): vanilla first (the reference), then the benchmark rows of every
  registered family (:mod:`ldr_opennmt.registry`; the rows:
  :func:`ldr_experiments.systems.benchmark_rows`), in registration order. The table is the
  only place that says what a system is: its name, title, family, builder arguments,
  domains, training mode, and which of training, SavedModel, CTranslate2 and ensemble
  measurements it gets. A family registered by a user module (``--user_module FILE``)
  gets its rows like the package's own. ``--families`` takes registered family names,
  groups (a family name's first word: ``ldr``, ``factorized``, ``mixing``...),
  ``ensembles`` and row names (``select_rows``);
* :mod:`~ldr_experiments.benchmarks.targets`: the targets of the issues, checked (PASS/MISS);
  they name the families they are about (``TARGETS``), and are shown for the rows a run
  measured;
* :mod:`~ldr_experiments.benchmarks.measure`: the synthetic data and the measurements, each
  in a process of its own (``run_task``);
* :mod:`~ldr_experiments.benchmarks.report`: the Markdown report;
* :mod:`~ldr_experiments.benchmarks.cli`: the command line and the driver that runs the
  measurement processes in turn.

Processes. Each measurement runs in a process of its own (``python -m
ldr_experiments.benchmarks --one TASK --workdir DIR``), so that a CTranslate2 process does
not import TensorFlow: the modules of this package import the standard library only at
their top. The registry reads the catalog and builds tiny models, which imports
TensorFlow, so only the parent process reads it: it builds the table, and writes the
rows of the run as plain JSON data into the run's ``config.json`` (``rows``, with the
user modules under ``user_modules``), where each measurement process finds its row by
name. The TensorFlow processes (training, export, SavedModel) load the user modules
first, for every row alike (with ``--user_module``, vanilla's SavedModel process imports
the package too), and the ones that build a model build it through the registry
(``registry.get(row.family).build(**sizes, **row.kwargs)``); a CTranslate2 process reads
nothing else (neither the registry nor a user module). The parent's TensorFlow does not
distort the measurements: the parent waits while a child measures, each child reports
its own peak memory (``VmHWM``, not inherited), and the parent lets TensorFlow take GPU
memory only as it needs it, leaving the GPUs to the measurement processes.
"""
