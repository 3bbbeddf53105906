"""The demo's report (``report.md``): tables, findings, examples, times and commands."""

import os

from ldr_experiments import common
from ldr_experiments.demo.runs import SEED, SEED_ROW
from ldr_opennmt.data import corpus as corpus_lib
from ldr_opennmt.data import filters
from ldr_opennmt.evaluation import classification, evaluate


def _example_rows(results):
    """The rows of the example translations: every system with its oracle labels."""
    return [
        row
        for row, _ in results["rows"]
        if "(" not in row or row.endswith("(oracle)")
        if not row.startswith("FT_") and row != SEED_ROW
    ]


def _report(mode, info, results, classifier_scores, demo, total, configs_dir, budget, extras):
    lines = [
        "# Multi-domain demo (%s)" % mode,
        "",
        "English->French, three domains built from PyPI packages by `ldr-data build default`.",
        "Small Transformers (2 layers, 64 units) from `model_defs/small/`, trained by `ldr-main`"
        " on per-domain corpora for %d steps each (batches of %d tokens mixing domains,"
        " sentences drawn with P(domain i) ~ |C_i|^%s, training pairs up to %d tokens). Mixed"
        " shares its target input and output embeddings; Mixed (equal passes): Mixed continued"
        " %d more steps, every parameter (the forward-backward passes of LDR (summed)'s two"
        " batches a step: its equal-compute control); with `--full`, %s: Mixed again with seed"
        " %d. LDR (summed): LDR trained with one loss 0.5 L_domain + 0.5 L_generic over every"
        " parameter (the loss of the authors' released configuration; the tables of 2026-11-29"
        " found no difference between its true and generic labels). FT_<domain>: Mixed"
        " fine-tuned %d more steps on that domain only. Factorized PA (with `--full`): the"
        " paper's curriculum with Mixed as its domain-agnostic stage 1 (the same general model"
        " the FT rows start from, trained for the demo's steps, not to its plateau), unfolded"
        " into every domain block, then %d steps training the domain blocks alone, the"
        " rest frozen; Mixed (continued) (with `--full`): Mixed continued as many steps, its"
        " control of the same compute. LDR (summed)"
        " (pred): with the labels of a domain classifier (bidirectional LSTM, %d steps)."
        " Evaluation on the first %d test sentences of each domain, beam 4."
        % (
            budget["steps"],
            budget["batch_size"],
            budget["alpha"],
            budget["max_length"],
            budget["steps"],
            SEED_ROW,
            SEED,
            budget["finetune_steps"],
            budget["stage2_steps"],
            budget["classifier_steps"],
            budget["eval_sentences"],
        ),
        "",
        "## Corpus",
        "",
        corpus_lib.corpus_table(info),
        "",
        "Cleaning (`ldr-data`, before the split; see `ldr_opennmt/data/filters.py`): pairs"
        " removed per filter, rewritten pairs in parentheses.",
        "",
        filters.table(info["filters"]),
        "",
        "## Domain classifier (full test sets)",
        "",
        classification.format_table(classifier_scores),
        "",
        "## Results",
        "",
        "Rows: Mixed, Mixed (equal passes) and, with `--full`, %s (Mixed again, another seed)"
        " and Mixing (domain mixing: no label at translation); LDR (summed) (and DC and"
        " Factorized PA with `--full`) with oracle, generic, wrong (the next domain in the list)"
        " labels, LDR (summed) also with predicted labels; with `--full`, LDR^1 (alpha = 1);"
        " the FT_* baselines with oracle labels." % SEED_ROW,
        "",
        evaluate.format_tables(results),
        "",
        "Run-to-run spread: %s (average BLEU of Mixed trained twice, seeds 1 and %d)."
        % (
            "%.1f BLEU" % extras["spread"] if extras["spread"] is not None else "not measured",
            SEED,
        ),
        "",
        "![BLEU per domain](bleu.png)",
        "",
    ]
    lines += extras["verdicts"]
    lines += [
        "## Contrastive lexical choice",
        "",
        "Does a system prefer the domain's translation of an ambiguous word (*host*: armée /"
        " hôte, *spirit*: esprit / alcool, *line*: ligne / cordeau, ...) when it scores the"
        " reference against variants using another domain's word? Items built from the"
        " corpus by `ldr-eval contrastive` (see docs/evaluation.md); forced decoding, no beam"
        " search.",
        "",
        extras["contrastive"],
        "",
        "## What this shows and what it cannot",
        "",
        "Generated from the figures above.",
        "",
    ]
    lines += extras["findings"]
    lines += [
        "",
        "## Example translations",
        "",
        "The first short test sentences of each domain (4 to 25 words), each system with"
        " its true domain label.",
        "",
        extras["examples"],
        "## Time",
        "",
        "Training speed: OpenNMT-tf's step logs, averaged over the run (start-up excluded).",
        "",
    ]
    lines += demo.timing_lines(total) + ["", "## Configurations", ""]
    for name in sorted(os.listdir(configs_dir)):
        with open(os.path.join(configs_dir, name)) as f:
            lines += [
                "`%s`:" % os.path.join(configs_dir, name),
                "",
                "```yaml",
                f.read().rstrip(),
                "```",
                "",
            ]
    lines += [
        "## Commands to rerun any step",
        "",
        "From the repository root, after `source run/setup_env.sh`:",
        "",
    ]
    for title, command in demo.commands:
        lines += ["- %s:" % title, "", "  ```", "  " + common.command_line(command), "  ```"]
    return "\n".join(lines) + "\n"
