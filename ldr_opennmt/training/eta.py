"""The time left, on each of OpenNMT-tf's training step lines.

OpenNMT-tf logs ``Step = 300 ; steps/s = 4.10, tokens/s = ... ; Loss = 5.1`` every
``save_summary_steps``; with a ``max_step`` the time left follows from the two first
figures. :func:`eta_in_step_logs` adds it to those lines (``; ETA 7 min 20 s (at 4.10
steps/s)``) with a filter on TensorFlow's logger for the duration of a training: OpenNMT-tf's
code is not changed (a filter sees each record before its handlers format it).
"""

import contextlib
import logging

import tensorflow as tf

#: The start of OpenNMT-tf's step line (``opennmt.training.TrainingStats.log``).
STEP_LINE = "Step = %d ; steps/s = %0.2f"


def format_duration(seconds):
    """``2 h 05 min``, ``7 min 20 s``, ``45 s``."""
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    if hours:
        return "%d h %02d min" % (hours, minutes)
    if minutes:
        return "%d min %02d s" % (minutes, seconds)
    return "%d s" % seconds


class EtaFilter(logging.Filter):
    """Adds the time left to OpenNMT-tf's step lines (never drops a record)."""

    def __init__(self, max_step):
        super().__init__()
        self.max_step = max_step

    def filter(self, record):
        if (
            isinstance(record.msg, str)
            and record.msg.startswith(STEP_LINE)
            and isinstance(record.args, tuple)
            and len(record.args) >= 2
            and "ETA" not in record.msg
        ):
            step, steps_per_sec = record.args[0], record.args[1]
            if steps_per_sec and steps_per_sec > 0 and step < self.max_step:
                left = (self.max_step - step) / float(steps_per_sec)
                record.msg += " ; ETA %s (step %d of %d)"
                record.args = tuple(record.args) + (format_duration(left), step, self.max_step)
        return True


@contextlib.contextmanager
def eta_in_step_logs(max_step, logger=None):
    """Adds the time left to the training's step lines within the block (nothing without
    a :obj:`max_step`)."""
    if not max_step:
        yield
        return
    logger = logger or tf.get_logger()
    eta_filter = EtaFilter(int(max_step))
    logger.addFilter(eta_filter)
    try:
        yield
    finally:
        logger.removeFilter(eta_filter)
