"""What a translator gets from the server's guard and confidence, measured (issue 74 items 2
and 3): ``ldr-experiments serve-quality``, ``bash run/serve_quality.sh``.

Every domain of the corpus but one (``--unseen``, default the last) is known: each family of
``--families`` (default LDR and DC, the small models of the demo) is trained on the known
domains, then exported as ``ldr-serve`` serves it: ``ldr-export ctranslate2 --domain_guard
--confidence --corpus`` (its guard and its confidence fitted on the known domains' training and
dev text). Then, with the export's CTranslate2 models (greedy, as ``ldr-serve`` decodes), the
first ``--sentences`` test sentences of each domain are translated and measured:

* **The cost of a wrong label**, per family: BLEU of each known domain with its own label,
  ``generic`` and every other known domain's (their mean).
* **The confidence**, per known domain: AUROC of the confidence against "sentence chrF below
  the dev median" (the median the export recorded), the share flagged ``low_confidence`` and the
  chrF of the flagged and the others, and the reliability diagram (``reliability.png``:
  observed share of sentences at least the dev median against the confidence, in ten bins).
* **The guard**: its accuracy on each known domain's test set and how often it falls back to
  ``generic``; on the unseen domain, how often it falls back; and on a test set mixing every
  known domain's test sentences with unseen-domain ones (:data:`UNSEEN_SHARE` of the lines),
  corpus BLEU routed by the guard against every line translated as ``generic`` and against the
  oracle (true labels, ``generic`` for the unseen lines), judged by the stated test
  (:mod:`ldr_opennmt.evaluation.verdicts`; one training per family: the test sentences are
  resampled, not the trainings).

It writes ``OUT/report.md``, ``OUT/results.json`` and ``OUT/reliability.png``; trainings and
exports resume like the demo's.
"""

import argparse
import json
import os
import sys
import time

import numpy as np

from ldr_experiments import common, engine
from ldr_experiments.demo.runs import BUDGETS as DEMO_BUDGETS
from ldr_opennmt import errors, stamps
from ldr_opennmt.data import corpus as corpus_lib
from ldr_opennmt.evaluation import scoring, verdicts
from ldr_opennmt.export import quality
from ldr_opennmt.reports import markdown_table
from ldr_opennmt.serving import confidence as confidence_lib
from ldr_opennmt.serving import ct2_models
from ldr_opennmt.utils import write_text_atomic

#: The families measured by default: ``--families`` key -> (row name, small model definition).
FAMILIES = {
    "ldr": ("LDR", "model_defs/small/ldr_transformer.py"),
    "dc": ("DC", "model_defs/small/dc_transformer.py"),
    "factorized_pa": ("Factorized PA", "model_defs/small/factorized_pa.py"),
}
#: The data configuration the families train with (the demo's), on the known domains.
DATA_CONFIG = "data_configs/default_corpora.yml"
#: The fewest sentences a bin of the reliability diagram shows.
MIN_BIN = 5
#: The share of unseen-domain lines in the mixed test set.
UNSEEN_SHARE = 0.10
#: The demo's recipe keys the studies take (``ldr_experiments.demo.runs.BUDGETS``).
_RECIPE = ("warmup", "batch_size", "alpha", "max_length", "log_steps", "max_decoding_length")
BUDGETS = {
    # The demo's recipe (batches of 1024 tokens, alpha 0.5, 64 units) at 3000 steps: about
    # 12 minutes a family on a 2-core host at 4 steps/s (2026-12-07).
    "full": dict({k: DEMO_BUDGETS["default"][k] for k in _RECIPE}, steps=3000, sentences=500),
    "quick": dict(
        {k: DEMO_BUDGETS["quick"][k] for k in _RECIPE},
        steps=DEMO_BUDGETS["quick"]["steps"],
        max_decoding_length=20,
        sentences=20,
    ),
}


def known_data_config(data_dir, info, unseen, path):
    """Writes the data configuration of the known domains (every one but :obj:`unseen`): the
    demo's (:data:`DATA_CONFIG`: its batches, lengths and no gradient accumulation) on the
    corpus's known domains."""
    config = common.load_yaml(DATA_CONFIG)
    data = common.corpus_data_section(data_dir, info)
    known = [d for d in info["domains"] if d != unseen]
    for key in ("train_corpora", "eval_corpora"):
        data[key] = {d: data[key][d] for d in known}
    data["domains"] = known
    config["data"].update(data)
    return common.write_config(config, path), known


def export_stage(steps, key, title, config_paths, model_dir, export_dir, data_dir, progress, after):
    """The stage that exports a trained family with its guard and its confidence."""
    command = ["ldr-export", "ctranslate2", "--config", *config_paths, "--auto_config"]
    command += ["--output_dir", export_dir, "--corpus", data_dir, "--domain_guard", "--confidence"]
    steps.commands.append(("Export %s" % title, command))

    def stamp():
        return stamps.make_stamp(
            checkpoint=common.checkpoint_digest(model_dir),
            corpus=stamps.file_digest(os.path.join(data_dir, corpus_lib.DONE_FILE)),
            command=command,
        )

    return common.Stage(
        "export_%s" % key,
        "export %s" % title,
        progress,
        stamp,
        [os.path.join(export_dir, "manifest.json")],
        lambda cores: steps.run_command("export_%s" % key, command, cores),
        after=after,
        # The whole export: one made from other inputs is removed before the export runs
        # again (ldr-export refuses an existing directory).
        owns=[export_dir],
        kind=engine.EVALUATE,
    )


def _bleu(hypotheses, references):
    return scoring.score(hypotheses, references)["bleu"]


class Measured:
    """One export's translations of the test sets, each (test set, model) once."""

    def __init__(self, export_dir, data_dir, info, sentences):
        export = ct2_models.Export(export_dir)
        self.models = export.models()
        self.guard, self.confidence, self.summary = export.quality
        source, target = info["source_lang"], info["target_lang"]
        self.test = {
            d: (
                quality.raw_lines(data_dir, "test", d, source)[:sentences],
                quality.raw_lines(data_dir, "test", d, target)[:sentences],
            )
            for d in info["domains"]
        }
        self._cache = {}

    def translate(self, domain, model):
        """``(hypotheses, source lengths, outputs)`` of :obj:`domain`'s test set by the model
        of :obj:`model`."""
        if (domain, model) not in self._cache:
            self._cache[domain, model] = quality.translate(self.models[model], self.test[domain][0])
        return self._cache[domain, model]


def label_costs(measured, known):
    """``{domain: {"true", "generic", "wrong"}}``: BLEU with each label (``wrong``: the mean
    over the other known domains)."""
    costs = {}
    for domain in known:
        references = measured.test[domain][1]
        bleu = {m: _bleu(measured.translate(domain, m)[0], references) for m in known}
        costs[domain] = {
            "true": bleu[domain],
            "generic": _bleu(measured.translate(domain, "generic")[0], references),
            "wrong": float(np.mean([bleu[m] for m in known if m != domain])),
        }
    return costs


def confidence_figures(measured, known, bins=10):
    """Per known domain: AUROC, flagged share, chrF of flagged and kept, reliability bins."""
    from sklearn.metrics import roc_auc_score  # pylint: disable=import-outside-toplevel

    figures = {}
    entries = measured.summary.get("confidence", {})
    for domain in known:
        hypotheses, lengths, outputs = measured.translate(domain, domain)
        chrf = np.asarray(quality.sentence_chrf(hypotheses, measured.test[domain][1]))
        model = measured.confidence.domains[domain]
        rows = [confidence_lib.features(n, len(t), s) for n, (t, s) in zip(lengths, outputs)]
        sure = model(rows)
        good = chrf >= entries[domain]["dev_median_chrf"][domain]
        flagged = sure < model.threshold
        edges = np.linspace(0, 1, bins + 1)
        which = np.clip(np.digitize(sure, edges) - 1, 0, bins - 1)
        reliability = [
            [
                float(sure[which == b].mean()),
                float(good[which == b].mean()),
                int((which == b).sum()),
            ]
            for b in range(bins)
            if (which == b).any()
        ]
        figures[domain] = {
            "sentences": len(chrf),
            "auroc": (float(roc_auc_score(good, sure)) if 0 < good.sum() < len(good) else None),
            "dev_auroc": entries[domain]["dev_auroc"],
            "good": float(good.mean()),
            "flagged": float(flagged.mean()),
            "chrf_flagged": float(chrf[flagged].mean()) if flagged.any() else None,
            "chrf_kept": float(chrf[~flagged].mean()) if (~flagged).any() else None,
            "reliability": reliability,
        }
    return figures


def guard_figures(measured, known, unseen):
    """The guard's accuracy and fallbacks per domain, and the mixed test set's BLEU."""
    per_domain = {}
    for domain in known + [unseen]:
        picks = [c[0] for c in measured.guard.choose(measured.test[domain][0])]
        per_domain[domain] = {
            "accuracy": None if domain == unseen else picks.count(domain) / len(picks),
            "generic": picks.count("generic") / len(picks),
        }
    # The mixed test set: every known domain's test lines, then unseen ones (UNSEEN_SHARE).
    lines = [(d, i) for d in known for i in range(len(measured.test[d][0]))]
    extra = round(len(lines) * UNSEEN_SHARE / (1 - UNSEEN_SHARE))
    lines += [(unseen, i) for i in range(min(extra, len(measured.test[unseen][0])))]
    picks = {}
    for domain in known + [unseen]:
        picks[domain] = [c[0] for c in measured.guard.choose(measured.test[domain][0])]

    def output(domain, i, model):
        return measured.translate(domain, model)[0][i]

    references = [measured.test[d][1][i] for d, i in lines]
    systems = {
        "generic": [output(d, i, "generic") for d, i in lines],
        "routed": [output(d, i, picks[d][i]) for d, i in lines],
        "oracle": [output(d, i, d if d != unseen else "generic") for d, i in lines],
    }
    bleu = {name: _bleu(hypotheses, references) for name, hypotheses in systems.items()}
    verdict = verdicts.compare([systems["routed"]], [systems["generic"]], references)
    return {
        "per_domain": per_domain,
        "mixed_lines": len(lines),
        "unseen_lines": len(lines) - sum(1 for d, _ in lines if d != unseen),
        "bleu": bleu,
        "routed_vs_generic": verdict._asdict(),
    }


def adjust_verdicts(results):
    """Holm's correction over the families' routed-vs-generic verdicts (one table: the stated
    test's family), in place."""
    guards = [result["guard"] for result in results.values()]
    p_values = verdicts.holm([g["routed_vs_generic"]["p_value"] for g in guards])
    for guard, p_value in zip(guards, p_values):
        verdict = verdicts.Verdict(**guard["routed_vs_generic"])
        guard["routed_vs_generic"] = verdicts.adjusted(verdict, p_value)._asdict()


def plot_reliability(results, path):
    """One reliability diagram per family, a line per known domain (matplotlib)."""
    import matplotlib  # pylint: disable=import-outside-toplevel

    matplotlib.use("Agg")
    from matplotlib import pyplot  # pylint: disable=import-outside-toplevel

    families = list(results)
    figure, axes = pyplot.subplots(
        1, len(families), figsize=(4.5 * len(families), 4), squeeze=False
    )
    for axis, family in zip(axes[0], families):
        axis.plot([0, 1], [0, 1], color="grey", linestyle=":", label="calibrated")
        for domain, figures in results[family]["confidence"].items():
            # Bins of fewer than MIN_BIN sentences say nothing: left out.
            points = [p for p in figures["reliability"] if p[2] >= MIN_BIN]
            axis.plot(
                [p[0] for p in points],
                [p[1] for p in points],
                marker="o",
                label="%s (AUROC %s)"
                % (domain, "n/a" if figures["auroc"] is None else "%.2f" % figures["auroc"]),
            )
        axis.set_xlabel("confidence (test sentences, ten bins of %d or more)" % MIN_BIN)
        axis.set_ylabel("share at least the dev median chrF")
        axis.set_title(family)
        axis.set_xlim(0, 1)
        axis.set_ylim(0, 1)
        axis.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path + ".tmp.png", dpi=100)
    pyplot.close(figure)
    os.replace(path + ".tmp.png", path)


def _f(value, pattern="%.1f"):
    return "n/a" if value is None else pattern % value


def report(results, known, unseen, mode, budget):
    """The report's lines."""
    lines = [
        "# The server's guard and confidence, measured (%s)" % mode,
        "",
        "Known domains: %s; unseen: **%s**. Each family trained %d steps on the known domains"
        " (the demo's small recipe), exported with `ldr-export ctranslate2 --domain_guard"
        " --confidence`; its CTranslate2 models translate (greedy, as `ldr-serve` decodes) the"
        " first %d test sentences of each domain."
        % (", ".join(known), unseen, budget["steps"], budget["sentences"]),
        "",
        "## The cost of a wrong label (BLEU)",
        "",
    ]
    cells = []
    for family, result in results.items():
        for domain, costs in result["labels"].items():
            cells.append(
                [
                    "%s, %s" % (family, domain),
                    _f(costs["true"]),
                    _f(costs["generic"]),
                    _f(costs["wrong"]),
                    _f(costs["true"] - costs["wrong"], "%+.1f"),
                ]
            )
    lines += [
        markdown_table(
            ["family, domain", "true label", "generic", "wrong label", "true - wrong"],
            cells,
            "lrrrr",
        ),
        "",
        "## The confidence",
        "",
        "AUROC of the confidence against a sentence's chrF being at least the domain's dev"
        " median (0.5: chance; the goal is 0.7); flagged: the share below the `low_confidence`"
        " threshold chosen on dev; chrF of the flagged sentences and of the others.",
        "",
    ]
    cells = []
    for family, result in results.items():
        for domain, figures in result["confidence"].items():
            cells.append(
                [
                    "%s, %s" % (family, domain),
                    str(figures["sentences"]),
                    _f(figures["auroc"], "%.2f"),
                    _f(figures["dev_auroc"], "%.2f"),
                    "%.0f%%" % (100 * figures["flagged"]),
                    _f(figures["chrf_flagged"]),
                    _f(figures["chrf_kept"]),
                ]
            )
    lines += [
        markdown_table(
            [
                "family, domain",
                "sentences",
                "test AUROC",
                "dev AUROC",
                "flagged",
                "chrF flagged",
                "chrF kept",
            ],
            cells,
            "lrrrrrr",
        ),
        "",
        "![Reliability diagrams](reliability.png)",
        "",
        "## The guard",
        "",
    ]
    cells = []
    for family, result in results.items():
        guard = result["guard"]
        for domain, figures in guard["per_domain"].items():
            cells.append(
                [
                    "%s, %s%s" % (family, domain, " (unseen)" if domain == unseen else ""),
                    _f(figures["accuracy"] and 100 * figures["accuracy"], "%.1f%%"),
                    "%.1f%%" % (100 * figures["generic"]),
                ]
            )
    lines += [
        markdown_table(["family, test set", "guard accuracy", "sent to generic"], cells, "lrr"),
        "",
        "The mixed test set: every known domain's test sentences and %d%% unseen-domain lines."
        " %s" % (100 * UNSEEN_SHARE, verdicts.TEST_STATEMENT),
        "",
    ]
    cells = []
    for family, result in results.items():
        guard = result["guard"]
        verdict = guard["routed_vs_generic"]
        cells.append(
            [
                family,
                "%d (%d unseen)" % (guard["mixed_lines"], guard["unseen_lines"]),
                _f(guard["bleu"]["generic"]),
                _f(guard["bleu"]["routed"]),
                _f(guard["bleu"]["oracle"]),
                "%+.1f [%+.1f, %+.1f], p %.3f: %s"
                % (
                    verdict["difference"],
                    verdict["interval"][0],
                    verdict["interval"][1],
                    verdict["p_value"],
                    verdict["words"],
                ),
            ]
        )
    lines += [
        markdown_table(
            ["family", "lines", "generic", "routed by the guard", "oracle", "routed - generic"],
            cells,
            "lrrrrl",
        ),
        "",
    ]
    return lines


@engine.driver("serve-quality")
def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="ldr-experiments serve-quality", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--families", nargs="+", choices=sorted(FAMILIES), default=["ldr", "dc"])
    parser.add_argument("--unseen", help="the held-out domain (default: the corpus's last)")
    parser.add_argument("--steps", type=int, help="training steps of each family")
    parser.add_argument("--sentences", type=int, help="test sentences per domain")
    common.add_experiment_arguments(parser, "serve_quality", {"small": None})
    args = parser.parse_args(argv)
    mode, budget = common.experiment_budget(
        args, BUDGETS, steps=args.steps, sentences=args.sentences
    )
    out, options = common.experiment_output(args, "serve_quality")
    steps = common.Steps(out, name="serve_quality", options=options)
    out = steps.out
    start = engine.started() or time.time()
    info = common.prepare_corpus(args.data, args.cache)
    unseen = args.unseen or info["domains"][-1]
    if unseen not in info["domains"] or len(info["domains"]) < 3:
        raise errors.UserError(
            "--unseen %s: must be a domain of %s, which needs three domains or more (two known,"
            " one unseen; it has %s)" % (unseen, args.data, ", ".join(info["domains"]))
        )
    data_path, known = known_data_config(
        args.data, info, unseen, os.path.join(steps.configs_dir, "data_known.yml")
    )
    stages, exports = [], {}
    for number, key in enumerate(args.families, 1):
        title, model_def = FAMILIES[key]
        config = common.train_config(key, {}, {}, budget, steps.runs_dir, data=common.MIXED_BATCHES)
        path = common.write_config(config, os.path.join(steps.configs_dir, key + ".yml"))
        progress = "train (%d/%d)" % (number, len(args.families))
        stages.append(
            steps.train_stage(
                title,
                key,
                model_def,
                [data_path, path],
                config["model_dir"],
                budget["steps"],
                progress,
            )
        )
        exports[title] = os.path.join(out, "export", key)
        stages.append(
            export_stage(
                steps,
                key,
                title,
                [data_path, path],
                config["model_dir"],
                exports[title],
                args.data,
                "export (%d/%d)" % (number, len(args.families)),
                after=[key],
            )
        )
    steps.run_stages(stages, lanes=2)
    if engine.dry_run():
        return 0
    results = {}
    for title, export_dir in exports.items():
        common.log("[serve_quality] measure %s (%s)" % (title, export_dir))
        measured = Measured(export_dir, args.data, info, budget["sentences"])
        results[title] = {
            "labels": label_costs(measured, known),
            "confidence": confidence_figures(measured, known),
            "guard": guard_figures(measured, known, unseen),
            "export_summary": measured.summary,
        }
    adjust_verdicts(results)
    write_text_atomic(
        os.path.join(out, "results.json"),
        json.dumps(
            {"known": known, "unseen": unseen, "budget": budget, "results": results}, indent=2
        )
        + "\n",
    )
    plot_reliability(results, os.path.join(out, "reliability.png"))
    lines = report(results, known, unseen, mode, budget)
    steps.write_report(lines, "\n".join(lines), time.time() - start)
    return 0


if __name__ == "__main__":
    sys.exit(errors.run_main("ldr-experiments serve-quality", main))
