"""What a training step costs at other batch and vocabulary sizes: the levers of a table that
must converge in hours (issue 73, item 2), measured rather than guessed.

``ldr-experiments levers`` trains the demo's Mixed (``model_defs/small/mixed_transformer_tied.py``:
2 + 2 layers, 64 units, the output layer tied to the target embeddings) as the tables' lanes run
it (one lane per core, one TensorFlow thread each, every lane at once: :mod:`ldr_experiments.
host_speed`), on batches held in memory, at each batch size (target tokens per batch: sentences
of :data:`LENGTH` tokens) and each vocabulary size, and writes per point the steps and the
target tokens per second of one lane. Tokens per second at a larger batch say how much of a
step is fixed overhead (a 64-unit model's step is mostly not its arithmetic); a smaller
vocabulary shrinks the output layer, about two thirds of this model's compute at 8000 words.

It writes ``OUT/levers.json``, ``OUT/levers.md`` (the table, with the host's speed: the first
point is the calibration's) and ``OUT/levers.png`` (tokens per second against the batch, one
line per vocabulary). About 25 s per point.
"""

import argparse
import json
import os
import sys
import time

from ldr_experiments import host_speed
from ldr_opennmt.reports import markdown_table
from ldr_opennmt.utils import write_text_atomic

#: Tokens per sentence of the batches (the calibration's).
LENGTH = host_speed.LENGTH
#: Target tokens per batch measured by default (the demo's 1024, then twice and four times).
BATCH_TOKENS = (1024, 2048, 4096)
#: Vocabulary sizes measured by default (the demo's 8000, then half and a quarter).
VOCABS = (8000, 4000, 2000)


def measure_points(batch_tokens, vocabs, steps=host_speed.STEPS, log=print):
    """Each (batch, vocabulary) point: ``[{"batch_tokens", "sentences", "vocab",
    "steps_per_s", "tokens_per_s"}]`` (per lane; ``None`` figures where a measurement
    failed)."""
    points = []
    for vocab in vocabs:
        for tokens in batch_tokens:
            sentences = max(1, round(tokens / LENGTH))
            start = time.monotonic()
            speed = host_speed.measure_lanes(
                steps=steps, batch=sentences, length=LENGTH, vocab=vocab
            )
            point = {
                "batch_tokens": sentences * LENGTH,
                "sentences": sentences,
                "vocab": vocab,
                "steps_per_s": None if speed is None else round(speed, 3),
                "tokens_per_s": None if speed is None else round(speed * sentences * LENGTH),
            }
            points.append(point)
            log(
                "[levers] %d tokens per batch, vocabulary %d: %s [%.0f s]"
                % (
                    point["batch_tokens"],
                    vocab,
                    (
                        "failed"
                        if speed is None
                        else "%.2f steps/s, %d target tokens/s per lane"
                        % (speed, point["tokens_per_s"])
                    ),
                    time.monotonic() - start,
                )
            )
    return points


def markdown(points, lanes):
    """The report: the table and how it was measured."""
    base = min(points, key=lambda p: (-p["vocab"], p["batch_tokens"])) if points else None
    cells = []
    for point in points:
        gain = "-"
        if base and base["tokens_per_s"] and point["tokens_per_s"]:
            gain = "x%.2f" % (point["tokens_per_s"] / base["tokens_per_s"])
        cells.append(
            [
                "%d tokens, %d words" % (point["batch_tokens"], point["vocab"]),
                str(point["batch_tokens"]),
                str(point["vocab"]),
                "-" if point["steps_per_s"] is None else "%.2f" % point["steps_per_s"],
                "-" if point["tokens_per_s"] is None else str(point["tokens_per_s"]),
                gain,
            ]
        )
    return "\n".join(
        [
            "# Training throughput at other batch and vocabulary sizes",
            "",
            "The demo's Mixed (2 + 2 layers, 64 units, tied output layer), %d lane(s) at once,"
            " one core and one TensorFlow thread each, batches of %d-token sentences held in"
            " memory (`ldr-experiments levers`). Per lane; `x` is target tokens per second over"
            " those of the smallest batch at the largest vocabulary (the demo's: about 1024"
            " tokens, 8000 words)." % (lanes, LENGTH),
            "",
            markdown_table(
                [
                    "point",
                    "target tokens per batch",
                    "vocabulary",
                    "steps/s",
                    "target tokens/s",
                    "x",
                ],
                cells,
                "lrrrrr",
            ),
            "",
        ]
    )


def plot(points, path):
    """Tokens per second against the batch, one line per vocabulary (matplotlib)."""
    import matplotlib  # pylint: disable=import-outside-toplevel

    matplotlib.use("Agg")
    from matplotlib import pyplot  # pylint: disable=import-outside-toplevel

    figure, axes = pyplot.subplots(figsize=(6, 4))
    for vocab in sorted({p["vocab"] for p in points}, reverse=True):
        line = [p for p in points if p["vocab"] == vocab and p["tokens_per_s"]]
        axes.plot(
            [p["batch_tokens"] for p in line],
            [p["tokens_per_s"] for p in line],
            marker="o",
            label="vocabulary %d" % vocab,
        )
    axes.set_xscale("log", base=2)
    axes.set_xlabel("target tokens per batch")
    axes.set_ylabel("target tokens per second (one lane)")
    axes.set_title("Mixed (64 units): throughput by batch and vocabulary")
    axes.legend()
    figure.tight_layout()
    figure.savefig(path + ".tmp.png", dpi=100)
    pyplot.close(figure)
    os.replace(path + ".tmp.png", path)


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="ldr-experiments levers", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--out", default="results/levers", help="Output folder.")
    parser.add_argument("--batch-tokens", type=int, nargs="+", default=list(BATCH_TOKENS))
    parser.add_argument("--vocab", type=int, nargs="+", default=list(VOCABS))
    parser.add_argument("--steps", type=int, default=host_speed.STEPS, help="Timed steps.")
    args = parser.parse_args(argv)
    for name in ("batch_tokens", "vocab"):
        if min(getattr(args, name)) < 1:
            parser.error("--%s: every value at least 1" % name.replace("_", "-"))
    if args.steps < 1:
        parser.error("--steps: at least 1, got %d" % args.steps)
    from ldr_opennmt import utils  # pylint: disable=import-outside-toplevel

    utils.check_writable(args.out, "--out")
    os.makedirs(args.out, exist_ok=True)
    points = measure_points(args.batch_tokens, args.vocab, args.steps)
    lanes = host_speed.lanes()
    write_text_atomic(
        os.path.join(args.out, "levers.json"),
        json.dumps({"lanes": lanes, "length": LENGTH, "points": points}, indent=2) + "\n",
    )
    text = markdown(points, lanes)
    write_text_atomic(os.path.join(args.out, "levers.md"), text)
    plot(points, os.path.join(args.out, "levers.png"))
    print(text)
    return 0 if all(p["steps_per_s"] is not None for p in points) else 1


if __name__ == "__main__":
    sys.exit(main())
