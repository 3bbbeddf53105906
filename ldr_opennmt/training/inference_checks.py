"""What ``Runner.infer`` reports about a translation run, each in one warning line.

* :class:`StoppedCounter`: translations whose best hypothesis stopped at
  ``maximum_decoding_length`` (possibly cut short);
* :func:`warn_long_sources`: source lines longer than ``params: maximum_source_length``,
  which inference truncates.
"""

import numpy as np
import tensorflow as tf


class StoppedCounter:
    """A model as ``opennmt.inference.predict_dataset`` uses it, that counts the
    translations whose best hypothesis stopped at the decoding length limit.

    ``predict_dataset`` writes each prediction with ``model.print_prediction``; other
    attributes go to the model. A hypothesis as long as ``maximum_decoding_length`` has
    no end token within the limit (``length`` excludes the end token): it stopped there.
    """

    def __init__(self, model, limit, listener=None):
        self._model = model
        self.limit = limit
        self.listener = listener  # listener(stopped, limit) after each translation.
        self.translated = 0
        self.stopped = 0

    def __getattr__(self, name):
        return getattr(self._model, name)

    def print_prediction(self, prediction, params=None, stream=None):
        length = prediction.get("length") if isinstance(prediction, dict) else None
        if length is not None:
            self.translated += 1
            stopped = bool(np.reshape(length, [-1])[0] >= self.limit)
            self.stopped += stopped
            if self.listener is not None:
                self.listener(stopped, self.limit)
        return self._model.print_prediction(prediction, params=params, stream=stream)

    def report(self):
        """Logs one warning line if any translation stopped at the limit."""
        if self.stopped:
            tf.get_logger().warning(
                "%d of %d translations stopped at maximum_decoding_length (%d): they may be "
                "cut short (raise params: maximum_decoding_length)",
                self.stopped,
                self.translated,
                self.limit,
            )


def warn_long_sources(model, features_file):
    """Logs one warning line counting the source lines longer than the model's
    ``params: maximum_source_length``, which inference truncates (the graph's own
    per-batch warning is switched off: this one counts them and names the first)."""
    inputter = model.features_inputter
    if not hasattr(inputter, "truncate_source"):
        return
    inputter.warn_truncation_in_graph = False
    sources, _ = inputter.split_files(features_file)
    sources = sources if isinstance(sources, (list, tuple)) else [sources]
    word = inputter.word_inputter
    limit = inputter.maximum_source_length
    for source in sources:
        dataset = word.make_dataset(source, training=False)
        dataset = dataset.map(lambda line: word.make_features(element=line)["length"])
        lengths = np.concatenate([[0]] + [batch.numpy() for batch in dataset.batch(1024)])[1:]
        long_lines = np.flatnonzero(lengths > limit)
        if long_lines.size:
            tf.get_logger().warning(
                "%d of %d source lines of %s are longer than params: maximum_source_length "
                "(%d tokens) and are truncated (first: %s:%d, %d tokens)",
                long_lines.size,
                lengths.size,
                source,
                limit,
                source,
                long_lines[0] + 1,
                lengths[long_lines[0]],
            )
