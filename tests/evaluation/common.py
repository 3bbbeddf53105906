"""What the tests of the evaluation share."""

import contextlib
import logging

import tensorflow as tf


@contextlib.contextmanager
def logged():
    """Yields the list of the messages TensorFlow's logger gets (INFO and above), filled in
    while the context runs (``assertLogs`` fails when nothing is logged, and ``assertNoLogs``
    when anything is, model loading included)."""
    messages = []
    handler = logging.Handler(logging.INFO)
    handler.emit = lambda record: messages.append(record.getMessage())
    logger = tf.get_logger()
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield messages
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
