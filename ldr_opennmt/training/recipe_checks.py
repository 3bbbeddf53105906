"""Warnings about a training recipe that will not do what its numbers suggest.

Two values of OpenNMT-tf's ``--auto_config`` are made for paper-size models on GPUs and
silently change a small run:

* ``train: effective_batch_size`` (25000 tokens for the Transformer): each step accumulates
  ``ceil(effective_batch_size / (batch_size * replicas))`` batches. On a CPU, with the small
  models' 1024-token batches, that is 25 batches a step, 25 times slower than the recipe's
  figures; the only trace was one INFO line of OpenNMT-tf.
* ``train: average_last_checkpoints`` (8): at the end, the last checkpoints are averaged into
  ``model_dir/avg``. OpenNMT-tf saves a checkpoint at step 1 and every
  ``save_checkpoints_steps`` (5000 by default): a run of 4500 steps averages its final
  weights with those of step 1.

:func:`recipe_warnings` says each in one line naming the key and the value that fixes it;
:class:`ldr_opennmt.training.runner.Runner` logs them before training (``ldr-main train``).
"""

import math

import tensorflow as tf

#: Batches accumulated per step above which a training without GPU is warned about.
MAX_CPU_ACCUMULATION = 4


def accumulated_batches(train_config, num_replicas=1):
    """The batches OpenNMT-tf accumulates per step (its ``_count_batch_accum``), or 1."""
    effective = train_config.get("effective_batch_size")
    batch_size = train_config.get("batch_size")
    if not effective or not batch_size:
        return 1
    return int(math.ceil(float(effective) / (batch_size * max(1, num_replicas))))


def saved_steps(max_step, save_steps, keep):
    """The steps of the checkpoints left at the end of a training from step 0 to
    :obj:`max_step`: OpenNMT-tf saves at step 1, every :obj:`save_steps` and at the last
    step, and keeps the last :obj:`keep`."""
    steps = {1, max_step}
    steps.update(range(save_steps, max_step + 1, save_steps))
    steps = sorted(steps)
    return steps[-keep:] if keep else steps


def recipe_warnings(config, num_replicas=1, on_gpu=False):
    """The warnings of a finalized configuration (one line each).

    Args:
      config: The finalized run configuration (``--auto_config`` merged).
      num_replicas: The training replicas (GPUs, Horovod workers).
      on_gpu: Whether the training runs on GPUs (accumulation is then the recipe's intent).

    Returns:
      A list of one-line warnings naming the key, what it does here and the fix.
    """
    train = config.get("train") or {}
    found = []
    accumulation = accumulated_batches(train, num_replicas)
    if not on_gpu and accumulation > MAX_CPU_ACCUMULATION:
        found.append(
            "train: effective_batch_size %s with batch_size %s accumulates %d batches per step"
            " (each step costs %d batches' time; --auto_config sets it for GPUs): on this CPU,"
            " set train: effective_batch_size: null (as data_configs/default_corpora.yml does)"
            % (train["effective_batch_size"], train["batch_size"], accumulation, accumulation)
        )
    average = train.get("average_last_checkpoints") or 0
    max_step = train.get("max_step")
    save_steps = train.get("save_checkpoints_steps") or 5000
    if average > 1 and max_step:
        keep = train.get("keep_checkpoint_max") or 8
        averaged = saved_steps(max_step, save_steps, keep)[-average:]
        if len(averaged) > 1 and averaged[0] < max_step / 2:
            found.append(
                "train: average_last_checkpoints %d averages the checkpoints of steps %s"
                " (save_checkpoints_steps %d, max_step %d): weights from the first half of the"
                " training spoil the average; set train: average_last_checkpoints: 0, or"
                " save_checkpoints_steps: %d to average the last %d saves of the second half"
                % (
                    average,
                    ", ".join(str(step) for step in averaged),
                    save_steps,
                    max_step,
                    max(1, max_step // (2 * average)),
                    average,
                )
            )
    return found


def warn(config, num_replicas=1):
    """Logs one warning line per value of :obj:`config` (finalized) that will not do what the
    recipe's numbers suggest (:func:`recipe_warnings`, on GPUs when TensorFlow sees one);
    returns them."""
    on_gpu = bool(tf.config.list_logical_devices("GPU"))
    found = recipe_warnings(config, num_replicas, on_gpu)
    for line in found:
        tf.get_logger().warning(line)
    return found
