"""Prints the observed domain frequencies of training batches next to |C_i|^alpha / sum.

    ldr-experiments check-sampling --config data_configs/default_corpora.yml \
        --alpha 0 0.5 1 --batches 3000

Builds the training pipeline exactly as ``ldr-main train`` does (the Runner's
per-domain corpora, the model's examples inputter) and draws batches from it.
"""

import argparse
import collections

import tensorflow as tf

from ldr_opennmt import config_loader, domains, models
from ldr_opennmt.reports import markdown_table
from ldr_opennmt.training.runner import Runner

from . import common


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--config", nargs="+", default=["data_configs/default_corpora.yml"], type=common.resource
    )
    parser.add_argument("--alpha", type=float, nargs="+", default=[0.0, 0.5, 1.0])
    parser.add_argument("--batches", type=int, default=3000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    rows = []
    for alpha in args.alpha:
        config = config_loader.load_run_config(args.config)
        config["model_dir"] = "/tmp/ldr_check_sampling"
        config.setdefault("train", {})["domain_sampling_alpha"] = alpha
        runner = Runner(models.mixed_transformer(num_layers=1, num_units=8, num_heads=1), config)
        data = runner.config["data"]
        model = runner.model
        model.initialize(data, params={})
        tf.random.set_seed(args.seed)
        dataset = model.examples_inputter.make_training_dataset(
            data["train_features_file"],
            data["train_labels_file"],
            config["train"].get("batch_size", 2048),
            batch_type=config["train"].get("batch_type", "tokens"),
            weights=data["train_files_weights"],
            shuffle_buffer_size=10000,
            length_bucket_width=1,
        )
        counts = collections.Counter()
        for features, _ in dataset.take(args.batches):
            ids = features["domain"].numpy()
            if not (ids == ids[0]).all():
                raise SystemExit("a batch mixes domains")
            counts[int(ids[0])] += 1
        sizes = [corpus.size for corpus in runner.corpora]
        expected = domains.sampling_probabilities(sizes, alpha)
        for i, corpus in enumerate(runner.corpora):
            rows.append(
                [
                    "%g" % alpha,
                    corpus.domain,
                    "%d" % corpus.size,
                    "%.4f" % expected[i],
                    "%.4f" % (counts[i] / args.batches),
                ]
            )
    header = ["alpha", "domain", "sentences", "expected", "observed"]
    print(markdown_table(header, rows, align="rlrrr"))


if __name__ == "__main__":
    main()
