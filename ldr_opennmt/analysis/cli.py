"""``ldr-analyze``: analyses of a trained LDR model.

    ldr-analyze polysemy --config data.yml ldr.yml --out results/polysemy \\
        [--min-count 30] [--k 10] [--top 10] [--checkpoint_path PATH]

writes ``polysemy.csv`` (every unit), ``polysemy.md`` (the most polysemous and
most monosemous units with their neighbours per domain, the shape of Table 7 of
the LDR paper) and ``polysemy.png`` (distribution of the intersection sizes).
"""

import argparse
import collections
import os
import sys

from ldr_opennmt import domains as domains_lib
from ldr_opennmt.analysis import polysemy
from ldr_opennmt.utils import read_lines, write_lines_atomic


def _load(config_paths, checkpoint_path):
    """(runner, model, LDR embedder, checkpoint path) with the checkpoint's weights."""
    import tensorflow as tf

    from ldr_opennmt.evaluation.evaluate import System
    from ldr_opennmt.layers import LDREmbedder

    system = System("polysemy", config_paths)
    model, runner = system.model, system.runner
    embedder = getattr(model.features_inputter, "word_inputter", None)
    if not isinstance(embedder, LDREmbedder):
        raise domains_lib.DomainError(
            "the model in %s has no LDR regions (source embedder: %s); the polysemy analysis "
            "needs an LDR model"
            % (system.model_dir, type(embedder or model.features_inputter).__name__)
        )
    model.initialize(runner._config["data"], params=runner._config.get("params", {}))
    model.create_variables()
    path = checkpoint_path or system.checkpoint()
    tf.train.Checkpoint(model=model).restore(path).expect_partial()
    return runner, model, embedder, path


def _source_files(runner):
    """[(domain, source file, label file or None)] of the training data."""
    if runner.corpora:
        return [(c.domain, c.source, None) for c in runner.corpora]
    features = runner._config["data"].get("train_features_file")
    if (
        not isinstance(features, list)
        or len(features) != 2
        or not all(isinstance(f, str) for f in features)
    ):
        raise domains_lib.DomainError(
            "the analysis counts units in data: train_corpora or "
            "train_features_file: [source, labels], got %r" % (features,)
        )
    return [(None, features[0], features[1])]


def _count_units(runner, domains):
    from tqdm import tqdm

    counts = {domain: collections.Counter() for domain in domains}
    for domain, source, labels in _source_files(runner):
        label_ids = None
        if labels is not None:
            label_ids = domains_lib.read_label_file(labels, domains)
        with open(source, encoding="utf-8") as f:
            for i, line in enumerate(
                tqdm(f, desc="counting %s" % source, unit=" lines", disable=None)
            ):
                name = domain
                if label_ids is not None:
                    if label_ids[i] < 0:
                        continue  # generic sentences belong to no domain
                    name = domains[label_ids[i]]
                counts[name].update(line.split())
    return counts


def polysemy_main(args):
    runner, model, embedder, checkpoint = _load(args.config, args.checkpoint_path)
    domains = runner.domains
    vocabulary = read_lines(embedder.vocabulary_file)
    size = int(embedder.embedding.shape[0])
    vocabulary = (vocabulary + ["<unk>"] * size)[:size]  # OOV buckets are never counted.
    tables = {name: embedder.fused_table(i).numpy() for i, name in enumerate(domains)}
    counts = _count_units(runner, domains)
    units = polysemy.analyze(tables, vocabulary, counts, min_count=args.min_count, k=args.k)
    k = len(units[0].neighbours[domains[0]])
    os.makedirs(args.out, exist_ok=True)
    polysemous, monosemous = polysemy.extremes(units, top=args.top)
    report = [
        "# Cross-domain polysemy of %s" % checkpoint,
        "",
        "%d units occur at least %d times in the training data of every domain; k = %d "
        "nearest neighbours (cosine) in each domain's fused embedding space."
        % (
            len(units),
            args.min_count,
            k,
        ),
        "",
        "## Most polysemous (fewest neighbours shared by all domains)",
        "",
        polysemy.markdown_table(polysemous),
        "",
        "## Most monosemous",
        "",
        polysemy.markdown_table(monosemous),
        "",
        "![intersection sizes](polysemy.png)",
    ]
    polysemy.write_csv(units, os.path.join(args.out, "polysemy.csv"))
    polysemy.plot_intersections(units, k, os.path.join(args.out, "polysemy.png"))
    write_lines_atomic(os.path.join(args.out, "polysemy.md"), report)
    print("\n".join(report))
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(prog="ldr-analyze", description=__doc__.split("\n")[0])
    subparsers = parser.add_subparsers(dest="command", required=True)
    sub = subparsers.add_parser("polysemy", help="neighbours of each unit in each domain")
    sub.add_argument("--config", nargs="+", required=True, help="run configuration(s)")
    sub.add_argument("--checkpoint_path", help="default: the latest of model_dir")
    sub.add_argument("--min-count", type=int, default=30, help="in every domain's training data")
    sub.add_argument("--k", type=int, default=10, help="number of neighbours")
    sub.add_argument("--top", type=int, default=10, help="units shown at each extreme")
    sub.add_argument("--out", required=True, help="output directory")
    args = parser.parse_args(argv)
    return polysemy_main(args)


if __name__ == "__main__":
    sys.exit(main())
