"""Checks that a checkpoint holds every variable of a model, with its shape.

OpenNMT-tf restores object-based checkpoints with ``expect_partial()``: a variable the
checkpoint has no value for keeps its initial value without a word, and a variable of
another shape fails deep in the restoration with a traceback. A checkpoint of another
family, size or vocabulary then gives an export that cannot be loaded, a traceback, or
translations from untrained weights with exit status 0. :func:`check_model_checkpoint`
compares, before anything restores, the checkpoint's variables
(``tf.train.list_variables``) with the model's, and refuses the first mismatch by name.

The checkpoint key of each model variable comes from TensorFlow's object graph of
``tf.train.Checkpoint(model=model)`` (the root OpenNMT-tf saves the model under), the
one coupling to TensorFlow internals here (``tensorflow.python.checkpoint``).
"""

import tensorflow as tf
from tensorflow.python.checkpoint import graph_view, util
from tensorflow.python.trackable import trackable_utils

from ldr_opennmt.errors import UserError


def model_checkpoint_keys(model):
    """``{checkpoint key: variable}`` of the variables of a built model, as
    ``tf.train.Checkpoint(model=model)`` saves them (optimizer slots excluded)."""
    root = tf.train.Checkpoint(model=model)
    trackables, paths = util.objects_ids_and_slot_variables_and_paths(
        graph_view.ObjectGraphView(root)
    )[:2]
    keys = {}
    for trackable in trackables:
        if isinstance(trackable, tf.Variable):
            path = trackable_utils.object_path_to_string(paths[trackable])
            keys[trackable_utils.checkpoint_key(path, "VARIABLE_VALUE")] = trackable
    return keys


def model_value_count(checkpoint_path):
    """The number of model weights (no optimizer slots) a checkpoint stores."""
    names = tf.train.load_checkpoint(checkpoint_path).get_variable_to_shape_map()
    return sum(
        1
        for name in names
        if name.startswith("model/")
        and name.endswith("/.ATTRIBUTES/VARIABLE_VALUE")
        and "OPTIMIZER_SLOT" not in name
    )


def checkpoint_of(path):
    """The checkpoint :obj:`path` names: a directory's latest, or a prefix as it is (as
    ``finetune: base`` and ``--checkpoint_path`` take either)."""
    return tf.train.latest_checkpoint(path) if tf.io.gfile.isdir(path) else path


def _display(key):
    return key.replace("/.ATTRIBUTES/VARIABLE_VALUE", "")


def check_model_checkpoint(model, checkpoint_path, absent_ok=()):
    """Refuses a checkpoint that does not hold every variable of :obj:`model`.

    Args:
      model: A built model (its variables created).
      checkpoint_path: The checkpoint prefix.
      absent_ok: Variables the checkpoint may lack (they are then set by the caller).

    Raises:
      UserError: ``CHECKPOINT: not a checkpoint of this model (MODEL): ...`` naming the
        first variable it lacks or whose shape differs.
    """
    try:
        stored = dict(tf.train.list_variables(checkpoint_path))
    except (tf.errors.OpError, ValueError) as e:
        raise UserError(
            "%s: not a readable checkpoint: %s" % (checkpoint_path, str(e).strip().splitlines()[0])
        ) from None
    absent_ok = {variable.ref() for variable in absent_ok}
    name = type(model).__name__
    missing = []
    for key, variable in sorted(model_checkpoint_keys(model).items()):
        shape = variable.shape.as_list()
        if key not in stored:
            if variable.ref() not in absent_ok:
                missing.append((key, shape))
            continue
        if list(stored[key]) != shape:
            raise UserError(
                "%s: not a checkpoint of this model (%s): %s has shape %s in the checkpoint "
                "and %s in the model (another size or vocabulary?)"
                % (checkpoint_path, name, _display(key), list(stored[key]), shape)
            )
    if missing:
        key, shape = missing[0]
        raise UserError(
            "%s: not a checkpoint of this model (%s): it has no value for %s (shape %s)%s; "
            "another family or design?"
            % (
                checkpoint_path,
                name,
                _display(key),
                shape,
                " nor for %d other variables" % (len(missing) - 1) if len(missing) > 1 else "",
            )
        )
