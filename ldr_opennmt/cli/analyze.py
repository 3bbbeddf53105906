"""``ldr-analyze``: analyses of trained multi-domain models.

    ldr-analyze polysemy --config data.yml ldr.yml --out results/polysemy \\
        [--min-count 30] [--k 10] [--top 10] [--checkpoint_path PATH]

    ldr-analyze parameters [--vocab-size 50000 --d-model 512 --num-domains 5 --d-inner 280
        --adapter-dim 2048 ... --user_module my_method.py]

    ldr-analyze proportions --config data.yml mixing.yml --features_file test.en \\
        [--labels_file test.domain] [--target_file test.fr] [--sentence 0] \\
        [--max_sentences M] [--checkpoint PATH] --out results/proportions

The first writes ``polysemy.csv`` (every unit), ``polysemy.md`` (the most polysemous and
most monosemous units with their neighbours per domain, the shape of Table 7 of
the LDR paper) and ``polysemy.png`` (distribution of the intersection sizes). The
second prints the parameters of every registered family that declares a formula (the
Factorized designs, residual adapters, TTM, ML, AdvL, and those of ``--user_module``)
against the vanilla Transformer (the #P column of the Factorized paper's Table 2).
The third reads a domain-mixing model's word-level domain proportions
(:mod:`ldr_opennmt.analysis.proportions`) and writes ``sentence_<N>.png`` (Figure 7 of
the mixing paper), ``histograms.png`` (Figure 9) and ``proportions.md`` (per layer: mean
proportion per domain and, with labels, argmax accuracy).
"""

import collections
import os
import sys

from ldr_opennmt import domains as domains_lib
from ldr_opennmt import errors, registry, upstream
from ldr_opennmt.analysis import parameters, polysemy, proportions
from ldr_opennmt.cli import ArgumentParser
from ldr_opennmt.errors import UserError
from ldr_opennmt.layers import factorized
from ldr_opennmt.utils import read_lines, write_lines_atomic


def _load(config_paths, checkpoint_path):
    """(runner, model, LDR embedder, checkpoint path) with the checkpoint's weights."""
    from ldr_opennmt.layers import LDREmbedder
    from ldr_opennmt.training.runner import Runner

    runner = Runner.from_files(config_paths, auto_config=True)
    embedder = getattr(runner.model.features_inputter, "word_inputter", None)
    if not isinstance(embedder, LDREmbedder):
        raise UserError(
            "the model in %s has no LDR regions (source embedder: %s); the polysemy analysis "
            "needs an LDR model"
            % (runner.model_dir, type(embedder or runner.model.features_inputter).__name__)
        )
    model, path = runner.restore(checkpoint_path)
    return runner, model, model.features_inputter.word_inputter, path


def _source_files(runner):
    """[(domain, source file, label file or None)] of the training data."""
    if runner.corpora:
        return [(c.domain, c.source, None) for c in runner.corpora]
    features = runner.config["data"].get("train_features_file")
    if (
        not isinstance(features, list)
        or len(features) != 2
        or not all(isinstance(f, str) for f in features)
    ):
        raise UserError(
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
        polysemy.neighbour_table(polysemous),
        "",
        "## Most monosemous",
        "",
        polysemy.neighbour_table(monosemous),
        "",
        "![intersection sizes](polysemy.png)",
    ]
    polysemy.write_csv(units, os.path.join(args.out, "polysemy.csv"))
    polysemy.plot_intersections(units, k, os.path.join(args.out, "polysemy.png"))
    write_lines_atomic(os.path.join(args.out, "polysemy.md"), report)
    print("\n".join(report))
    return 0


def parameters_main(args):
    """Prints the parameters of every system against the vanilla Transformer."""
    for spec in args.user_module:
        registry.load_user_module(spec)
    sizes = {name: getattr(args, name) for name in factorized.PAPER_SIZES}
    print("\n".join(parameters.parameter_table(adapter_dim=args.adapter_dim, **sizes)))
    print(
        "\nKernels and embeddings (one target table tied with the output layer), no general "
        "copy counted, as in the Factorized paper's #P column."
    )
    return 0


def proportions_main(args):
    """Writes the domain-proportion plots and table of a mixing model."""
    _, model, checkpoint = proportions.load_model(
        args.config, checkpoint_path=args.checkpoint, model_dir=args.model_dir
    )
    proportions.check_inputs(
        model,
        args.features_file,
        labels_file=args.labels_file,
        target_file=args.target_file,
        sentence=args.sentence,
        max_sentences=args.max_sentences,
    )
    result = proportions.compute(
        model,
        args.features_file,
        labels_file=args.labels_file,
        target_file=args.target_file,
        batch_size=args.batch_size,
        max_sentences=args.max_sentences,
    )
    files = " ".join(f for f in (args.features_file, args.labels_file, args.target_file) if f)
    report = proportions.write_report(result, args.out, args.sentence, checkpoint, files=files)
    print("\n".join(report))
    return 0


def main(argv=None):
    """The ``ldr-analyze`` entry point."""
    upstream.install()
    return errors.run_main("ldr-analyze", _main, argv)


def _main(argv):
    parser = ArgumentParser(
        prog="ldr-analyze", description=__doc__.split("\n")[0].replace("``", "")
    )
    subparsers = parser.add_subparsers(dest="command", required=True)
    sub = subparsers.add_parser("polysemy", help="neighbours of each unit in each domain")
    sub.add_argument("--config", nargs="+", required=True, help="run configuration(s)")
    sub.add_argument("--checkpoint_path", help="default: the latest of model_dir")
    sub.add_argument("--min-count", type=int, default=30, help="in every domain's training data")
    sub.add_argument("--k", type=int, default=10, help="number of neighbours")
    sub.add_argument("--top", type=int, default=10, help="units shown at each extreme")
    sub.add_argument("--out", required=True, help="output directory")
    sub = subparsers.add_parser(
        "parameters", help="parameters of every system against the vanilla Transformer"
    )
    for name, default in factorized.PAPER_SIZES.items():  # The paper's, 5 domains.
        sub.add_argument("--%s" % name.replace("_", "-"), type=int, default=default)
    sub.add_argument("--adapter-dim", type=int, default=2048, help="residual adapters' inner size")
    sub.add_argument(
        "--user_module",
        nargs="+",
        default=[],
        help="Python files (or module names) registering families of their own: their rows too",
    )
    sub = subparsers.add_parser(
        "proportions", help="word-level domain proportions of a domain-mixing model"
    )
    sub.add_argument("--config", nargs="+", required=True, help="run configuration(s)")
    sub.add_argument("--model_dir", help="overrides the configuration's model_dir")
    sub.add_argument(
        "--checkpoint", "--checkpoint_path", dest="checkpoint", help="default: the latest"
    )
    sub.add_argument("--features_file", required=True, help="source file")
    sub.add_argument("--labels_file", help="domain labels aligned with it (or domain:NAME)")
    sub.add_argument("--target_file", help="target file: adds the decoder layers")
    sub.add_argument("--sentence", type=int, default=0, help="sentence of the word plot")
    sub.add_argument("--max_sentences", type=int, help="analyze the first M sentences")
    sub.add_argument("--batch_size", type=int, default=32, help="sentences per batch")
    sub.add_argument("--out", required=True, help="output directory")
    args = parser.parse_args(argv)
    if args.command == "parameters":
        return parameters_main(args)
    if args.command == "proportions":
        return proportions_main(args)
    return polysemy_main(args)


if __name__ == "__main__":
    sys.exit(main())
