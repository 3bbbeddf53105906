"""Per-step training time: vanilla OpenNMT-tf Transformer vs LDR joint vs LDR Procedure 1.

All systems use the same model size, the same data and the same batches, and
run side by side in one process. The step is OpenNMT-tf's own training step
(``Trainer._steps``: gradient computation, accumulation and the optimizer
update), timed after a warm-up.

    python run/bench_step.py [--layers 2 --units 64 --batch 64 --steps 50]
"""

import argparse
import os
import platform
import random
import tempfile
import time

import opennmt
import tensorflow as tf

from ldr_opennmt import models

DOMAINS = ["d0", "d1", "d2"]


def _write_data(directory, vocab_size=2000, sentences=3000, length=24, seed=1):
    rng = random.Random(seed)
    words = ["w%d" % i for i in range(vocab_size)]
    paths = {k: os.path.join(directory, k) for k in ("src", "tgt", "dom", "vocab")}
    with open(paths["src"], "w") as src, open(paths["tgt"], "w") as tgt, open(
        paths["dom"], "w"
    ) as dom:
        for _ in range(sentences):
            src.write(" ".join(rng.choices(words, k=length)) + "\n")
            tgt.write(" ".join(rng.choices(words, k=length)) + "\n")
            dom.write(rng.choice(DOMAINS) + "\n")
    with open(paths["vocab"], "w") as f:
        f.write("\n".join(["<blank>", "<s>", "</s>"] + words) + "\n")
    return paths


def _time_steps(model, features_file, paths, args, params):
    data = {"source_vocabulary": paths["vocab"], "target_vocabulary": paths["vocab"]}
    if isinstance(features_file, list):
        data["domains"] = DOMAINS
    model.initialize(data, params=dict({"optimizer": "Adam", "learning_rate": 1e-4}, **params))
    optimizer = model.get_optimizer()
    dataset = model.examples_inputter.make_training_dataset(
        features_file,
        paths["tgt"],
        batch_size=args.batch,
        batch_type="examples",
        shuffle_buffer_size=1,
        length_bucket_width=None,
    )
    # The same 16 batches for every system, held in memory: the step time measures
    # the model, not the text pipeline.
    dataset = dataset.take(16).cache().repeat()
    trainer = opennmt.training.Trainer(model, optimizer)
    trainer._training_stats = opennmt.training.TrainingStats(model, optimizer)  # Set by __call__.
    times = []
    start = time.perf_counter()
    for i, _ in enumerate(trainer._steps(dataset, accum_steps=1)):
        now = time.perf_counter()
        if i >= args.warmup:
            times.append(now - start)
        start = now
        if len(times) == args.steps:
            break
    times.sort()
    return times[len(times) // 2]  # median


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--units", type=int, default=256)
    parser.add_argument("--batch", type=int, default=64, help="sentences of 24 tokens")
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=5)
    args = parser.parse_args()
    size = dict(
        num_layers=args.layers, num_units=args.units, num_heads=4, ffn_inner_dim=4 * args.units
    )
    with tempfile.TemporaryDirectory() as directory:
        paths = _write_data(directory)
        pair = [paths["src"], paths["dom"]]
        systems = [
            (
                "vanilla OpenNMT-tf Transformer",
                lambda: opennmt.models.Transformer(**size),
                paths["src"],
                {},
            ),
            ("Mixed (multi-domain wrapper)", lambda: models.mixed_transformer(**size), pair, {}),
            (
                "LDR joint",
                lambda: models.ldr_transformer(**size),
                pair,
                {"domain_training": "joint"},
            ),
            (
                "LDR Procedure 1",
                lambda: models.ldr_transformer(**size),
                pair,
                {"domain_training": "procedure1"},
            ),
        ]
        results = []
        for name, build, features_file, params in systems:
            results.append((name, _time_steps(build(), features_file, paths, args, params)))
    base = results[0][1]
    print(
        "# Per-step training time (median of %d steps after %d warm-up)" % (args.steps, args.warmup)
    )
    print(
        "machine: %s, %d CPU threads visible, TensorFlow %s, %s"
        % (
            platform.processor() or platform.machine(),
            os.cpu_count(),
            tf.__version__,
            time.strftime("%Y-%m-%d"),
        )
    )
    print(
        "model: %d layers, %d units; batch: %d sentences x 24 tokens\n"
        % (args.layers, args.units, args.batch)
    )
    print("| system | ms/step | ratio to vanilla |")
    print("|---|---:|---:|")
    for name, seconds in results:
        print("| %s | %.1f | %.2fx |" % (name, seconds * 1000, seconds / base))


if __name__ == "__main__":
    main()
