"""Procedure 1, update skipping and domain sampling under Horovod, two workers.

Run by test_horovod.py under ``horovodrun -np 2 -H localhost:2 python -m
tests.training.horovod_check DIR``; each worker writes ``DIR/check.RANK.json``:

* ``procedure1``, ``joint``: one update of the Runner's Horovod trainer
  (:class:`ldr_opennmt.training.horovod.HorovodTrainer`) with plain SGD (learning rate
  1: the update is minus the applied gradient), worker 0 on a batch of medical
  sentences, worker 1 on a batch of religious ones, software absent; worker 0 also makes
  the same update with one process (``opennmt.training.Trainer``) on the concatenation
  of both batches and reports the largest difference between the two updates; each
  worker reports which domain regions changed and a checksum of all its weights;
* ``resumed``: the same in Procedure 1 with worker 1 starting from other weights than
  worker 0's (as when worker 0 alone restores a checkpoint); ``resumed_stock_trainer``:
  with OpenNMT-tf's own ``HorovodTrainer``, which broadcasts after the first update only;
* ``sampling``: the batches each worker draws through the multi-domain Runner's own
  training dataset (``Runner.train`` with ``--horovod``; the trainer's loop is replaced
  by one that records 200 batches): their domains and source sentences.
"""

import hashlib
import json
import os
import sys

import horovod.tensorflow as hvd
import numpy as np
import opennmt
import tensorflow as tf

from ldr_opennmt.training import horovod
from ldr_opennmt.training.runner import Runner
from tests import corpus, helpers

hvd.init()
RANK = hvd.rank()
DOMAINS = corpus.DOMAINS
BATCH_DOMAIN = {0: "medical", 1: "religious"}  # software: on no worker
BATCH_SIZE = 4
SAMPLING_SIZES = {"medical": 48, "religious": 24, "software": 12}
SAMPLED_BATCHES = 200


def _write_batch_files(directory, domain, seed):
    """A batch's files: BATCH_SIZE pairs of one domain (source, domain label, target)."""
    os.makedirs(directory, exist_ok=True)
    pairs = corpus.make_pairs(domain, BATCH_SIZE, seed=seed)
    return [
        corpus.write_lines(os.path.join(directory, "batch.src"), [s for s, _ in pairs]),
        corpus.write_lines(os.path.join(directory, "batch.domain"), [domain] * len(pairs)),
        corpus.write_lines(os.path.join(directory, "batch.tgt"), [t for _, t in pairs]),
    ]


def _first_batch(model, files, size):
    """The first training batch of the files, in file order."""
    dataset = model.examples_inputter.make_training_dataset(
        files[:2], files[2], batch_size=size, shuffle_buffer_size=1, single_pass=True
    )
    return next(iter(dataset))


def _model(paths, mode, seed):
    model = helpers.FAMILIES["ldr_transformer"]()
    model.initialize(
        corpus.data_config(paths),
        params={"optimizer": "SGD", "learning_rate": 1.0, "domain_training": mode},
    )
    model.create_variables()
    helpers.randomize_weights(model, seed=seed)
    return model


def _one_update(trainer, model, batch):
    """The change of every trainable weight after one training step on :obj:`batch`."""
    before = helpers.snapshot(model.trainable_weights)
    trainer(tf.data.Dataset.from_tensors(batch).repeat(), max_step=1)
    return [v.numpy() - b for v, b in zip(model.trainable_weights, before)]


def _checksum(model):
    digest = hashlib.sha256()
    for variable in model.weights:
        digest.update(variable.numpy().tobytes())
    return digest.hexdigest()


def check_update(directory, paths, mode, trainer_class=horovod.HorovodTrainer, seeds=(7, 7)):
    """One update on two workers against one process on both batches.

    :obj:`seeds`: the initial weights of each worker (worker 0's are those of the
    reference); different seeds stand for a resumed run, where worker 0 alone restores
    the checkpoint.
    """
    own = os.path.join(directory, "batch%d" % RANK)
    files = _write_batch_files(own, BATCH_DOMAIN[RANK], seed=11)
    model = _model(paths, mode, seeds[RANK])
    regions = model.domain_weights()
    batch = _first_batch(model, files, BATCH_SIZE)
    trainer = trainer_class(model, model.get_optimizer(), hvd)
    before = {k: helpers.snapshot(vs) for k, vs in regions.items()}
    update = _one_update(trainer, model, batch)
    result = {
        "sentences": int(batch[1]["length"].shape[0]),
        # Region -> whether each of its variables changed.
        "region_changed": {
            str(k): [bool(not np.array_equal(v.numpy(), b)) for v, b in zip(vs, before[k])]
            for k, vs in regions.items()
        },
        "checksum": _checksum(model),
    }
    hvd.allreduce(tf.constant(0.0), name="files_written_" + os.path.basename(directory))
    if RANK == 0:
        # One process, the two workers' batches concatenated: the same update?
        both = os.path.join(directory, "both")
        os.makedirs(both, exist_ok=True)
        concatenated = []
        for name in ("batch.src", "batch.domain", "batch.tgt"):
            lines = []
            for rank in (0, 1):
                lines += corpus.read_lines(os.path.join(directory, "batch%d" % rank, name))
            concatenated.append(corpus.write_lines(os.path.join(both, name), lines))
        reference = _model(paths, mode, seeds[0])
        reference_batch = _first_batch(reference, concatenated, 2 * BATCH_SIZE)
        expected = _one_update(
            opennmt.training.Trainer(reference, reference.get_optimizer()),
            reference,
            reference_batch,
        )
        result["reference_sentences"] = int(reference_batch[1]["length"].shape[0])
        result["max_update_difference"] = float(
            max(np.max(np.abs(a - b)) for a, b in zip(update, expected))
        )
        result["max_update"] = float(max(np.max(np.abs(a)) for a in expected))
    return result


def _sampling_config(directory):
    data = os.path.join(directory, "sampling")
    paths = corpus.write_corpus(data, count=20)
    corpora = corpus.write_domain_corpora(data, SAMPLING_SIZES)
    for domain, (source, _) in corpora.items():
        # Every source line made unique: shows which sentences each worker read.
        lines = corpus.read_lines(source)
        corpus.write_lines(source, ["%s %s%d" % (s, domain, i) for i, s in enumerate(lines)])
    return {
        "model_dir": os.path.join(data, "run%d" % RANK),
        "data": {
            "source_vocabulary": paths["src_vocab"],
            "target_vocabulary": paths["tgt_vocab"],
            "train_corpora": corpora,
        },
        "params": {"optimizer": "SGD", "learning_rate": 1.0},
        "train": {"batch_size": BATCH_SIZE, "batch_type": "examples", "max_step": 10},
    }


def check_sampling(directory):
    drawn = []

    def _record(trainer, dataset, **kwargs):
        for batch in trainer._finalize_dataset(dataset).take(SAMPLED_BATCHES):
            features = batch[0]
            drawn.append(
                {
                    "domains": sorted({DOMAINS[int(d)] for d in features["domain"].numpy()}),
                    "sources": [
                        " ".join(t.decode() for t in tokens[:length])
                        for tokens, length in zip(
                            features["tokens"].numpy(), features["length"].numpy()
                        )
                    ],
                }
            )
        return {}

    config = _sampling_config(directory)
    builder = lambda: helpers.FAMILIES["ldr_transformer"]()  # noqa: E731
    original = opennmt.training.HorovodTrainer.__call__
    opennmt.training.HorovodTrainer.__call__ = _record
    try:
        Runner(builder, config, seed=5).train(hvd=hvd)
    finally:
        opennmt.training.HorovodTrainer.__call__ = original
    total = sum(SAMPLING_SIZES.values())
    return {
        "batches": drawn,
        "expected": {d: n / total for d, n in SAMPLING_SIZES.items()},
    }


def main(directory):
    paths = corpus.write_corpus(os.path.join(directory, "corpus%d" % RANK), count=20)
    result = {"rank": RANK, "size": hvd.size()}
    # First, while both workers have built the same models: OpenNMT-tf's own trainer
    # broadcasts by variable name, and worker 0 builds one more model per check below
    # (the one-process reference), which shifts its Keras names.
    result["resumed_stock_trainer"] = check_update(
        os.path.join(directory, "resumed_stock"),
        paths,
        "procedure1",
        trainer_class=opennmt.training.HorovodTrainer,
        seeds=(7, 8),
    )
    for mode in ("procedure1", "joint"):
        result[mode] = check_update(os.path.join(directory, mode), paths, mode)
    # A resumed run: worker 1 starts from other weights than worker 0's restored ones.
    result["resumed"] = check_update(
        os.path.join(directory, "resumed"), paths, "procedure1", seeds=(7, 8)
    )
    result["sampling"] = check_sampling(directory)
    with open(os.path.join(directory, "check.%d.json" % RANK), "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main(sys.argv[1])
