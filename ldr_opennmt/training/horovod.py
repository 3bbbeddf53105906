"""What the multi-domain Runner does differently under Horovod (``--horovod``).

``onmt-main --horovod`` runs one process per device; OpenNMT-tf's ``HorovodTrainer``
gives each its own shard of the training data (so each draws its own batches), sums the
gradients of all workers (each divided by the sample size of all workers: the average
over the concatenated batches) before every update, and lets worker 0 alone restore and
save checkpoints and evaluate. Procedure 1 and the skipped updates of absent domains
need nothing more: they run inside ``compute_gradients`` and on the all-reduced
gradient (see :mod:`ldr_opennmt.models.optimizer`).

What the Runner adds:

* only worker 0 writes the files the Runner itself writes (``domains.json``,
  ``finetune.json``, the grafted first checkpoint of a fine-tuning); the others take
  worker 0's decisions (:func:`from_master`);
* the workers check that they build the same model (:func:`check_same`): the declared
  domains and the region count must agree (``model_dir`` must be on a file system all
  machines see), otherwise the run stops with one line instead of hanging;
* its trainer (:class:`HorovodTrainer`, used by ``Runner.train``) broadcasts worker 0's
  variables, restored ones included, before the first step, not only after it;
* broadcasts pair the workers' variables by position, not by name
  (:func:`broadcast_by_position`): Horovod pairs the tensors of the workers by op name,
  and Keras names layers with a process-wide counter, so a model built once more on one
  worker (a check, an evaluation model) would name every variable differently and the
  broadcast would wait forever.
"""

import re

import tensorflow as tf

from ldr_opennmt.errors import UserError
from ldr_opennmt.upstream import ledger


def is_master(hvd):
    """Whether this process writes files: always without Horovod, else worker 0."""
    return hvd is None or hvd.rank() == 0


def from_master(hvd, value, name):
    """Worker 0's :obj:`value` on every worker (its own without Horovod).

    Also a barrier: no worker goes past it before worker 0 has computed its value (and
    written what it writes before). If worker 0 fails first, ``horovodrun`` stops the
    others.
    """
    if hvd is None:
        return value
    return hvd.broadcast_object(value, root_rank=0, name="ldr_" + name)


def check_same(hvd, value, what):
    """Checks that every worker has worker 0's :obj:`value`.

    Raises:
      UserError: ``worker N: WHAT is X but worker 0 has Y``.
    """
    if hvd is None:
        return
    master = from_master(hvd, value, "check_" + re.sub(r"[^A-Za-z0-9_]", "_", what))
    if master != value:
        raise UserError(
            "worker %d: %s is %r but worker 0 has %r (with Horovod, every worker must see "
            "the same configuration and model_dir: put them on a file system all machines "
            "share)" % (hvd.rank(), what, value, master)
        )


def broadcast_by_position(hvd, variables, name, root_rank=0):
    """Assigns worker :obj:`root_rank`'s values to :obj:`variables` on every worker.

    The variables are paired by their index in the list (the model's and the
    optimizer's variables are listed in the same order on every worker), not by name;
    their shapes and types are checked first, so that workers that built different
    models stop with an error rather than wait for each other.

    Raises:
      UserError: if the workers' variable lists differ in length, shape or type.
    """
    variables = list(variables)
    signature = [(tuple(v.shape.as_list()), v.dtype.name) for v in variables]
    master = hvd.broadcast_object(signature, root_rank=root_rank, name=name + "_signature")
    if master != signature:
        first = next(
            (i for i, (a, b) in enumerate(zip(signature, master)) if a != b),
            min(len(signature), len(master)),
        )
        raise UserError(
            "worker %d built a different model than worker %d: %d variables against %d, "
            "first difference at variable %d (%s)"
            % (
                hvd.rank(),
                root_rank,
                len(signature),
                len(master),
                first,
                variables[first].name if first < len(variables) else "missing",
            )
        )

    @tf.function
    def _broadcast():
        for index, variable in enumerate(variables):
            variable.assign(
                hvd.broadcast(variable, root_rank=root_rank, name="%s_%d" % (name, index))
            )

    _broadcast()


def optimizer_variables(optimizer, variables):
    """The variables of :obj:`optimizer` in an order that does not depend on how they
    were created: its own (the step counter, a loss scale, ...) in creation order, then
    the slots of each of :obj:`variables` in their order, slot names sorted.

    Creation order differs between workers: worker 0 creates the slots it restores
    from a checkpoint in the checkpoint's order, the others in the model's.
    """
    names = sorted(optimizer.get_slot_names())
    slots = []
    for variable in variables:
        for name in names:
            try:
                slots.append(optimizer.get_slot(variable, name))
            except KeyError:  # A variable without this slot.
                continue
    refs = {slot.ref() for slot in slots}
    return [v for v in optimizer.variables() if v.ref() not in refs] + slots


class HorovodTrainer(ledger.HorovodTrainerAdapter):
    """OpenNMT-tf's Horovod trainer, with the workers' variables equal from the start.

    OpenNMT-tf broadcasts worker 0's variables after the first update only, and only
    worker 0 restores the checkpoint: the first update averages worker 0's gradients
    with gradients computed at the other workers' random initial weights (an
    interrupted run, resumed, takes one step that is partly noise, and Adam's moments
    keep it for a while). This trainer creates the variables (worker 0's restored
    with them) and broadcasts them before the first step. Broadcasts pair variables by
    position (:func:`broadcast_by_position`, :func:`optimizer_variables`).
    """

    def before_steps(self, hvd, model, optimizer):
        model.create_variables(optimizer=optimizer)
        self.broadcast(hvd, model, optimizer)

    def broadcast(self, hvd, model, optimizer):
        broadcast_by_position(hvd, model.variables, "ldr_broadcast_model")
        broadcast_by_position(
            hvd,
            optimizer_variables(optimizer, model.trainable_variables),
            "ldr_broadcast_optimizer",
        )
