"""The papers' tables: where each system's domain knowledge sits
(:mod:`ldr_opennmt.analysis.label_use`): LDR's region shares, the mixing proportions at the
contrastive items' ambiguous words, the context's margin and the label's pull."""

import os

from ldr_opennmt.analysis import label_use
from ldr_opennmt.evaluation import contrastive
from ldr_opennmt.evaluation.contrastive import lexicon
from ldr_opennmt.reports import markdown_table
from ldr_opennmt.utils import make_directories, read_lines, write_lines_atomic


def item_files(plan, items, directory):
    """Writes the items' tokenized sources, references and labels (the corpus's lines they
    come from) into :obj:`directory`; returns ``(source, target, labels)`` paths."""
    cache = {}
    lines = {side: [] for side in (plan.source, plan.target, "domain")}
    for item in items:
        for side in lines:
            name = "%s.%s.%s" % (item["split"], item["domain"], side)
            if name not in cache:
                cache[name] = read_lines(plan._corpus_file(name))
            lines[side].append(cache[name][item["line"] - 1])
    paths = []
    for side in (plan.source, plan.target, "domain"):
        path = os.path.join(directory, "items.%s" % side)
        write_lines_atomic(path, lines[side])
        paths.append(path)
    return tuple(paths)


def label_use_figures(plan):
    """Where each system's domain knowledge sits (:mod:`ldr_opennmt.analysis.label_use`):
    for the rows with LDR embeddings, how far their domain regions move the words of the test
    sentences and the contrastive items' ambiguous words; for the domain-mixing rows, their
    proportions at the items' ambiguous words and at the other words.

    Returns:
      ``{"ldr": {row: {"test" | "items": {domain: [ratio, tokens]}}}, "mixing": {row:
      [layer]}}``.
    """
    import tensorflow as tf

    from ldr_opennmt import checkpoints
    from ldr_opennmt.analysis import proportions
    from ldr_opennmt.layers import LDREmbedder
    from ldr_opennmt.models.mixing import MixingTransformer
    from ldr_opennmt.training.runner import Runner

    items = contrastive.read_items(plan.items_path, plan.domains)
    out = os.path.abspath(plan.steps.out)
    directory = make_directories(os.path.join(out, "label_use"), out)
    source, target, labels = item_files(plan, items, directory)
    item_tokens = [line.split() for line in read_lines(source)]
    item_domains = [plan.domains.index(item["domain"]) for item in items]
    item_words = [
        [tokens[p] for p in label_use.word_positions(tokens, item["word"], lexicon.english_key)]
        for tokens, item in zip(item_tokens, items)
    ]
    test, test_domains = [], []
    for i, domain in enumerate(plan.domains):
        lines = read_lines(plan._corpus_file("test.%s.%s" % (domain, plan.source)))
        lines = lines[: plan.budget["eval_sentences"] or len(lines)]
        test += [line.split() for line in lines]
        test_domains += [i] * len(lines)
    figures = {"ldr": {}, "mixing": {}}
    for trained in plan.trained:
        if trained.name in getattr(plan, "twins", ()):
            continue  # A seed twin: its row stands for it.
        runner = Runner.from_files(trained.config_paths, auto_config=True)
        embedder = getattr(runner.model.features_inputter, "word_inputter", None)
        if isinstance(embedder, LDREmbedder):
            model, latest = runner.restore()
            embedder = model.features_inputter.word_inputter
            test_shares = label_use.region_shares(embedder, test, test_domains)
            # A corpus without contrastive items (the test not run): the test words only.
            item_shares = (
                label_use.region_shares(embedder, item_words, item_domains) if items else {}
            )
            # The older checkpoints kept too: do the regions grow with training?
            by_step = [[_checkpoint_step(latest), _mean_share(test_shares)]]
            state = tf.train.get_checkpoint_state(trained.model_dir)
            for path in state.all_model_checkpoint_paths:
                if _checkpoint_step(path) == by_step[0][0]:
                    continue
                checkpoints.check_model_checkpoint(model, path)
                tf.train.Checkpoint(model=model).restore(path).expect_partial()
                shares = label_use.region_shares(embedder, test, test_domains)
                by_step.append([_checkpoint_step(path), _mean_share(shares)])
            figures["ldr"][trained.name] = {
                "test": {plan.domains[k]: list(v) for k, v in test_shares.items()},
                "items": {plan.domains[k]: list(v) for k, v in item_shares.items()},
                "by_step": sorted(by_step),
            }
        elif isinstance(runner.model, MixingTransformer) and items:
            model, _ = runner.restore()
            result = proportions.compute(model, source, labels, target, progress=False)
            figures["mixing"][trained.name] = [
                layer._asdict()
                for layer in label_use.item_proportions(
                    result, items, lexicon.english_key, lexicon.french_key
                )
            ]
    return figures


def _checkpoint_step(path):
    """The step of a checkpoint prefix (``.../ckpt-4500`` -> 4500)."""
    return int(path.rsplit("-", 1)[-1])


def _mean_share(shares):
    """The token-weighted mean of :func:`ldr_opennmt.analysis.label_use.region_shares`'."""
    tokens = sum(count for _, count in shares.values())
    return sum(share * count for share, count in shares.values()) / max(tokens, 1)


def _percent(correct, count):
    return "%.1f" % (100.0 * correct / count) if count else "n/a"


def label_use_section(figures, contrastive_results, classification, baseline):
    """The report's section on where the domain knowledge sits: Markdown lines.

    Args:
      figures: :func:`label_use_figures`'s.
      contrastive_results: The contrastive results (``contrastive.json``).
      classification: The domain classifier's scores on the test sets.
      baseline: The baseline row (it reads no label).
    """
    lines = ["## Where the domain knowledge sits", ""]
    rows = contrastive_results["rows"]
    found = [r for r in rows if r["system"] == baseline and r["metric"] == "accuracy"]
    if classification:
        lines.append(
            "- The source sentence gives its domain away: the domain classifier, which reads"
            " the source alone, labels %.1f%% of the test sentences correctly."
            % (100.0 * classification["accuracy"])
        )
    if found:
        lines.append(
            "- %s, which reads no label, prefers the reference to every variant in %.1f%% of"
            " the contrastive items, by %.1f nats of log-probability on average: the context"
            " decides the word's sense before any label does."
            % (baseline, found[0]["values"]["all"], found[0]["margin"]["all"])
        )
    shifts = [r for r in rows if r["metric"] == "shift"]
    if shifts:
        lines.append(
            "- The label's pull: the variant's label instead of the item's changes the"
            " log-probability difference (reference against variant) by %s nats on average."
            % ", ".join(
                "%s %+.2f" % (r["system"], r["margin"]["all"])
                for r in sorted(shifts, key=lambda r: -r["margin"]["all"])
            )
        )
    lines.append("")
    if figures.get("ldr"):
        domains = sorted({d for row in figures["ldr"].values() for d in row["test"]})
        table = []
        for row, values in figures["ldr"].items():
            for name, title in (("test", "test words"), ("items", "ambiguous words")):
                cells = [row, title]
                cells += [
                    "%.3f" % values[name][d][0] if d in values[name] else "n/a" for d in domains
                ]
                table.append(cells)
        lines += [
            "LDR's domain regions: the norm of what the sentence's own domain region adds to a"
            " word's fused embedding, against the norm of its generic embedding (|M_k e_k(v)|"
            " / |M_g e_g(v) + b|), averaged over the tokens of the test sentences of each"
            " domain and over the contrastive items' ambiguous words.",
            "",
            markdown_table(["row", "words"] + domains, table, "ll" + "r" * len(domains)),
            "",
        ]
        for row, values in figures["ldr"].items():
            if len(values.get("by_step", [])) > 1:
                lines.append(
                    "- %s's mean share on the test words at each checkpoint kept: %s."
                    % (row, ", ".join("step %d %.3f" % tuple(p) for p in values["by_step"]))
                )
        lines.append("")
    if figures.get("mixing"):
        table = []
        for row, layers in figures["mixing"].items():
            for layer in layers:
                table.append(
                    [
                        row,
                        layer["label"],
                        _percent(layer["word_correct"], layer["word"]),
                        _percent(layer["other_correct"], layer["other"]),
                        "%.2f" % layer["word_mean"],
                        "%.2f" % layer["other_mean"],
                    ]
                )
        lines += [
            "Domain mixing's proportions on the contrastive items (their sources, and their"
            " references forced on the decoder): at the ambiguous word (the source word; on"
            " the decoder, the positions that predict its translation) and at the other words"
            " of the sentence: how often the largest proportion is the item's domain, and the"
            " mean proportion of that domain (1/k is uniform).",
            "",
            markdown_table(
                [
                    "row",
                    "layer",
                    "argmax = domain, word %",
                    "other words %",
                    "D(domain), word",
                    "other words",
                ],
                table,
                "llrrrr",
            ),
            "",
        ]
    return lines
