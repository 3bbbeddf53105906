"""The parts of TensorFlow Addons that the package's replacement leaves out.

``tensorflow_addons.rnn`` (layer-normalized LSTM cells: OpenNMT-tf's RNMT+ and its
``layer_norm`` RNN option) and ``tensorflow_addons.text`` (CRF: OpenNMT-tf's sequence tagger)
are used by none of the package's families. Reaching for one of their names here says so in
one line, with the remedy.
"""

#: The names OpenNMT-tf reaches for there.
LEFT_OUT = ("LayerNormLSTMCell", "crf_decode", "crf_log_likelihood")


def __getattr__(name):
    if name not in LEFT_OUT:  # (getattr(module, name, default) on any module keeps working)
        raise AttributeError("module %r has no attribute %r" % (__name__, name))
    raise AttributeError(
        "tensorflow_addons.%s is not provided on this stack: TensorFlow Addons has no wheel for"
        " Python 3.12, and the package replaces only what its families use (seq2seq attention,"
        " tile_batch, LazyAdam, weight decay); train this model on the Python 3.11 stack"
        " (PYTHON=python3.11 bash run/setup_env.sh, docs/installation.md)" % name
    )
