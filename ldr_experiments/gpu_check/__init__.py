"""Checks that this project runs on the GPU, and measures it: ``bash run/gpu_check.sh``.

::

    bash run/gpu_check.sh                           # everything (not yet timed on a GPU)
    bash run/gpu_check.sh --families ldr factorized --modes mixed_xla
    bash run/gpu_check.sh --quick                   # tiny sizes: checks that it runs
    bash run/gpu_check.sh --out results/h100.md     # the report's file (default: results/)

On a machine without a GPU it checks what it can (the CUDA libraries TensorFlow 2.13.1
loads, their versions against ``tf.sysconfig.get_build_info()``, XLA's ptxas and
libdevice), says in one line that there is no GPU, and exits 0. On a GPU machine:

1. TensorFlow must list the GPU (a GPU that ``nvidia-smi -L`` lists and TensorFlow does
   not is the silent CPU fallback of :mod:`ldr_opennmt.gpu`: exit 1, naming the libraries
   that fail to load);
2. each family trains at paper size (6+6 layers, 512 units, 8 heads, FFN 2048; the RNNs
   at their catalog size) in float32, mixed precision (``mixed_float16``, the policy of
   ``onmt-main --mixed_precision``, with its loss-scale optimizer) and mixed precision +
   XLA (``--jit_compile``), with OpenNMT-tf's own training step, and the loss must stay
   finite; the mixed precision + XLA run is the "few hundred steps" (``--steps``);
3. under float16 + XLA, the parameters of domains absent from every batch stay
   bit-identical (LDR in Procedure 1, joint training and on both sides, DC and the
   Factorized designs: :func:`row_checks`);
4. an LDR SavedModel translates with domain labels on the GPU (``ldr-translate``'s
   :class:`ldr_opennmt.serving.savedmodel_translate.SignatureRunner`), and so does its folded
   CTranslate2 model (``device="cuda"``, float32 and float16);
5. a markdown report in the format of BENCHMARKS.md (the GPU's name, tokens/s and step
   time per family and mode, ratios to the stock Transformer) goes to ``--out``.

The measurements are those of :mod:`ldr_experiments.benchmarks` (``bash run/bench.sh``),
called, not copied: the same synthetic data (every sentence of ``--length`` tokens, so every
batch has one shape and XLA compiles each step function once, during the warm-up steps,
before any step is timed), the same model builders and the same timed loop
(:func:`ldr_experiments.benchmarks.measure.measure_training`, median step after ``--warmup``
steps). Each
measurement runs in its own process, one after the other; this process never imports
TensorFlow, so it holds no GPU memory (and the CUDA libraries are checked before
TensorFlow loads them).

The systems are rows of the benchmark's table (``ldr_experiments.benchmarks.rows.Row``), read
from the family registry (:func:`~ldr_experiments.gpu_check.rows.check_rows`), never listed
here: the benchmark's training
rows, vanilla first; after a family's rows, its model with LDR on the target side too,
for a family whose builder takes ``target_ldr``; and one row for each registered family
the benchmark does not measure (the RNNs). What a row gets is read from its family's
capabilities: no XLA run for a family whose model refuses ``set_jit_compile`` (the RNNs),
a bit-identity check for a family whose sentences select their domain's parameters
(labels needed) and that trains without a frozen base. ``--families`` selects rows as
``run/bench.sh`` does (family names, groups, row names). The registry imports
TensorFlow, so a child process reads it and returns the run's configuration, rows
included, which this process writes into ``config.json`` for the measurement processes.

``run/gpu_check.sh`` sets up the environment (with the GPU libraries if ``source
run/setup_env.sh --gpu`` installed them) and runs ``ldr-experiments gpu-check``; each
measurement is a process ``python -m ldr_experiments.gpu_check --one TASK --workdir DIR``.

The modules: :mod:`~ldr_experiments.gpu_check.plan` (the modes, sizes and tasks of a run),
:mod:`~ldr_experiments.gpu_check.child` (a child process and its result),
:mod:`~ldr_experiments.gpu_check.probe` (what the machine has: nvidia-smi, TensorFlow's
build, the CUDA libraries, XLA), :mod:`~ldr_experiments.gpu_check.rows` (the rows, from the
registry), :mod:`~ldr_experiments.gpu_check.measure` (the measurements, each in a child
process), :mod:`~ldr_experiments.gpu_check.report` (the checks and the report) and
:mod:`~ldr_experiments.gpu_check.cli` (the command line and the driver).
"""
