"""Procedure 1 and update skipping under MirroredStrategy on two logical CPUs.

Run in its own process by test_mirrored.py: logical devices must be configured
before TensorFlow initializes. Prints one JSON line with the findings.
"""

import json
import sys

import tensorflow as tf

cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(
    cpu, [tf.config.LogicalDeviceConfiguration(), tf.config.LogicalDeviceConfiguration()]
)

import numpy as np  # noqa: E402
import opennmt  # noqa: E402

from tests import corpus, helpers  # noqa: E402


class _Dir:
    def __init__(self, path):
        self.path = path

    def get_temp_dir(self):
        return self.path


def main(directory, mode):
    test = _Dir(directory)
    paths = corpus.write_corpus(directory + "/corpus", count=20)
    model = helpers.FAMILIES["ldr_transformer"]()
    model.initialize(
        corpus.data_config(paths),
        params={"optimizer": "Adam", "learning_rate": 0.01, "domain_training": mode},
    )
    optimizer = model.get_optimizer()
    trainer = opennmt.training.MirroredStrategyTrainer(
        model, optimizer, devices=["/cpu:0", "/cpu:1"]
    )
    trainer(
        helpers.domain_dataset(model, test, ["medical", "religious", "software"], name="all"),
        max_step=3,
        accum_steps=2,
    )
    regions = model.domain_weights()
    before = {k: helpers.snapshot(v) for k, v in regions.items()}
    trainer(helpers.domain_dataset(model, test, ["medical"], name="med"), max_step=6, accum_steps=2)
    result = {
        "num_replicas": trainer.num_replicas,
        "mirrored": type(regions[0][0]).__name__,
        "changed": {
            str(k): [bool(not np.array_equal(v.numpy(), b)) for v, b in zip(regions[k], before[k])]
            for k in regions
        },
        "replicas_equal": all(
            np.array_equal(values[0].numpy(), values[1].numpy())
            for values in (v.values for v in model.trainable_variables)
        ),
        "step": int(optimizer.iterations.numpy()),
    }
    print("RESULT " + json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
