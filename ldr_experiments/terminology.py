"""Glossaries applied at translation time, measured (issue 74 item 1): ``ldr-experiments
terminology``, ``bash run/terminology.sh``.

The default corpus is copied with terms annotated inline in 10% of its training sources
(``ldr-data terms``: each domain's dominant translations, 20% of them held out, never
annotated); a family (``--family``, default LDR, the demo's small recipe) is trained on it, and
the same family on the plain corpus (the control: same steps, batches and sampling). Both are
exported for CTranslate2 and translate (greedy, as ``ldr-serve`` decodes) the first
``--sentences`` test sentences of each domain:

* **term success** on held-out terms: in each test pair, the held-out terms whose source word
  is in the source and whose translation is in the reference form the sentence's glossary; a
  term succeeds when its translation appears in the output (a whole word, any case). Three
  rows: the annotated model given the glossary, the same model without it, and the control;
* **chrF on plain input** (no glossary): the annotated model against the control, over every
  test sentence (the goal: no more than 0.3 below).

It writes ``OUT/report.md`` and ``OUT/results.json``; trainings and exports resume.
"""

import argparse
import json
import os
import re
import sys
import time

from ldr_experiments import common, engine, serve_quality
from ldr_opennmt import errors
from ldr_opennmt.data import corpus as corpus_lib
from ldr_opennmt.data import terms as terms_lib
from ldr_opennmt.evaluation import scoring
from ldr_opennmt.evaluation.contrastive import lexicon
from ldr_opennmt.export import quality
from ldr_opennmt.reports import markdown_table
from ldr_opennmt.serving import ct2_models, tokenization
from ldr_opennmt.utils import write_text_atomic

#: The largest chrF the annotated model may lose on plain input (the issue's goal).
CHRF_MARGIN = 0.3
BUDGETS = {
    "full": dict(serve_quality.BUDGETS["full"]),
    "quick": dict(serve_quality.BUDGETS["quick"]),
}


def found(term, output):
    """Whether :obj:`term` is a whole word (or words) of :obj:`output`, in any case."""
    return re.search(r"(?<!\w)%s(?!\w)" % re.escape(term), output, re.IGNORECASE) is not None


def translate(model, lines, glossaries=None):
    """The greedy translations of raw lines by a CTranslate2 domain model, each with its
    glossary annotated (``None``: plain input)."""
    if glossaries is None:
        return quality.translate(model, lines)[0]
    tokens = [
        terms_lib.annotate(
            line,
            glossary,
            model.tokenize,
            lambda text: tokenization.tokenize(model.target_tokenizer, text),
        )[0]
        for line, glossary in zip(lines, glossaries)
    ]
    outputs = []
    for start in range(0, len(tokens), 32):
        outputs += [h[0] for h, _ in model.translate(tokens[start : start + 32])]
    return [model.detokenize(output) for output in outputs]


def measure(exports, terms_corpus, info, sentences):
    """Per domain: term success of the three rows and chrF on plain input."""
    annotated = ct2_models.Export(exports["annotated"]).models()
    control = ct2_models.Export(exports["control"]).models()
    source, target = info["source_lang"], info["target_lang"]
    results = {}
    for domain in info["domains"]:
        sources = quality.raw_lines(terms_corpus, "test", domain, source)[:sentences]
        references = quality.raw_lines(terms_corpus, "test", domain, target)[:sentences]
        heldout = terms_lib.read_terms(terms_corpus, domain, "heldout")
        glossaries = [
            terms_lib.pair_glossary(s, r, heldout, lexicon.english_key)
            for s, r in zip(sources, references)
        ]
        with_terms = [i for i, glossary in enumerate(glossaries) if glossary]
        plain = {
            "annotated": translate(annotated[domain], sources),
            "control": translate(control[domain], sources),
        }
        given = translate(
            annotated[domain], [sources[i] for i in with_terms], [glossaries[i] for i in with_terms]
        )
        rows = {
            "annotated, glossary": dict(zip(with_terms, given)),
            "annotated, no glossary": {i: plain["annotated"][i] for i in with_terms},
            "control": {i: plain["control"][i] for i in with_terms},
        }
        total = sum(len(glossaries[i]) for i in with_terms)
        success = {
            row: (
                sum(found(t, outputs[i]) for i in with_terms for _, t in glossaries[i]) / total
                if total
                else None
            )
            for row, outputs in rows.items()
        }
        chrf = {name: scoring.score(outputs, references)["chrf"] for name, outputs in plain.items()}
        results[domain] = {
            "sentences": len(sources),
            "sentences_with_terms": len(with_terms),
            "terms": total,
            "term_success": success,
            "chrf_plain": chrf,
            "examples": [
                {
                    "source": sources[i],
                    "glossary": glossaries[i],
                    "annotated, glossary": rows["annotated, glossary"][i],
                    "control": rows["control"][i],
                }
                for i in with_terms[:2]
            ],
        }
    return results


def report(results, budget, mode, title):
    """The report's lines."""
    lines = [
        "# Glossaries applied at translation time (%s)" % mode,
        "",
        "%s trained %d steps on the default corpus with terms annotated in 10%% of its training"
        " sources (`ldr-data terms`), and the same recipe on the plain corpus (the control);"
        " both exported for CTranslate2, greedy decoding, the first %d test sentences of each"
        " domain. Held-out terms only: never annotated in training."
        % (title, budget["steps"], budget["sentences"]),
        "",
        "## Term success on held-out terms",
        "",
    ]
    cells = []
    for domain, result in results.items():
        success = result["term_success"]
        cells.append(
            [
                domain,
                "%d (%d terms)" % (result["sentences_with_terms"], result["terms"]),
            ]
            + [
                "n/a" if success[row] is None else "%.1f%%" % (100 * success[row])
                for row in ("annotated, glossary", "annotated, no glossary", "control")
            ]
        )
    lines += [
        markdown_table(
            [
                "domain",
                "test sentences with terms",
                "annotated model, glossary",
                "annotated model, no glossary",
                "control",
            ],
            cells,
            "lrrrr",
        ),
        "",
        "## chrF on plain input (no glossary)",
        "",
        "Goal: the annotated model no more than %.1f below the control." % CHRF_MARGIN,
        "",
    ]
    cells = []
    for domain, result in results.items():
        chrf = result["chrf_plain"]
        difference = chrf["annotated"] - chrf["control"]
        cells.append(
            [
                domain,
                "%.1f" % chrf["annotated"],
                "%.1f" % chrf["control"],
                "%+.1f (%s)" % (difference, "met" if difference >= -CHRF_MARGIN else "missed"),
            ]
        )
    lines += [
        markdown_table(
            ["domain", "annotated model", "control", "annotated - control"], cells, "lrrr"
        ),
        "",
        "## Examples",
        "",
    ]
    for domain, result in results.items():
        for example in result["examples"]:
            lines.append(
                "- %s: `%s`, glossary %s: **%s** (control: %s)"
                % (
                    domain,
                    example["source"],
                    ", ".join("%s = %s" % pair for pair in example["glossary"]),
                    _cut(example["annotated, glossary"]),
                    _cut(example["control"]),
                )
            )
    return lines + [""]


def _cut(text, limit=160):
    return text if len(text) <= limit else text[: limit - 3] + "..."


@engine.driver("terminology")
def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="ldr-experiments terminology", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--family", choices=sorted(serve_quality.FAMILIES), default="ldr", help="(default ldr)"
    )
    parser.add_argument("--steps", type=int, help="training steps of each model")
    parser.add_argument("--sentences", type=int, help="test sentences per domain")
    common.add_experiment_arguments(parser, "terminology", {"small": None})
    args = parser.parse_args(argv)
    mode, budget = common.experiment_budget(
        args, BUDGETS, steps=args.steps, sentences=args.sentences
    )
    out, options = common.experiment_output(args, "terminology")
    steps = common.Steps(out, name="terminology", options=options)
    out = steps.out
    start = engine.started() or time.time()
    info = common.prepare_corpus(args.data, args.cache)
    terms_corpus = os.path.join(out, "corpus-terms")
    if not corpus_lib.is_built(terms_corpus):
        common.log("[terminology] ldr-data terms --corpus %s --out %s" % (args.data, terms_corpus))
        steps.run_command(
            "terms", ["ldr-data", "terms", "--corpus", args.data, "--out", terms_corpus]
        )
    steps.commands.append(
        ("Annotate terms", ["ldr-data", "terms", "--corpus", args.data, "--out", terms_corpus])
    )
    title, model_def = serve_quality.FAMILIES[args.family]
    stages, exports = [], {}
    for number, (key, corpus_dir) in enumerate(
        (("annotated", terms_corpus), ("control", args.data)), 1
    ):
        corpus_info = corpus_lib.load_info(corpus_dir)
        data_path = common.write_config(
            dict(
                common.load_yaml(serve_quality.DATA_CONFIG),
                data=dict(
                    common.load_yaml(serve_quality.DATA_CONFIG)["data"],
                    **common.corpus_data_section(corpus_dir, corpus_info),
                ),
            ),
            os.path.join(steps.configs_dir, "data_%s.yml" % key),
        )
        config = common.train_config(key, {}, {}, budget, steps.runs_dir, data=common.MIXED_BATCHES)
        path = common.write_config(config, os.path.join(steps.configs_dir, key + ".yml"))
        name = "%s (%s)" % (title, key)
        stages.append(
            steps.train_stage(
                name,
                key,
                model_def,
                [data_path, path],
                config["model_dir"],
                budget["steps"],
                "train (%d/2)" % number,
            )
        )
        exports[key] = os.path.join(out, "export", key)
        stages.append(
            serve_quality.export_stage(
                steps,
                key,
                name,
                [data_path, path],
                config["model_dir"],
                exports[key],
                corpus_dir,
                "export (%d/2)" % number,
                after=[key],
            )
        )
    steps.run_stages(stages, lanes=2)
    if engine.dry_run():
        return 0
    common.log("[terminology] measure (%d test sentences per domain)" % budget["sentences"])
    results = measure(exports, terms_corpus, info, budget["sentences"])
    write_text_atomic(
        os.path.join(out, "results.json"),
        json.dumps({"budget": budget, "family": title, "results": results}, indent=2) + "\n",
    )
    lines = report(results, budget, mode, title)
    steps.write_report(lines, "\n".join(lines), time.time() - start)
    return 0


if __name__ == "__main__":
    sys.exit(errors.run_main("ldr-experiments terminology", main))
