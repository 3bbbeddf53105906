"""``ldr-experiments stack-parity``: the two training stacks give the same results (issue 78).

The package trains on Python 3.11 (TensorFlow 2.13.1, TensorFlow Addons 0.21) and on Python
3.12 (TensorFlow 2.21, tf-keras, the package's replacement of TensorFlow Addons). Each stack
runs ``measure``: every registered family, built tiny as ``ldr-main check-family`` builds it
(the same generated corpus, the same seeded weights, set with numpy, not by TensorFlow's
initializers), trained a few steps with LazyAdam on the same batch, then translated greedily
(every label) by the model and, where the family folds, by its CTranslate2 export. ``compare``
reads both and writes the report: per family the largest difference of a trained weight and of
a step's loss, the step where the losses first differ, and whether the translations of the
model and of the export are the same, with each stack's versions::

    bash run/stack_parity.sh            # both stacks, the report under docs/records/
    ldr-experiments stack-parity measure --out DIR
    ldr-experiments stack-parity compare DIR_311 DIR_312 --out RECORD
"""

import argparse
import json
import os
import platform
import sys
import time

#: Training steps per family (enough for rounding differences to show, few enough that the
#: whole measure takes minutes).
STEPS = 30
#: The seed of the weights and of TensorFlow's and NumPy's generators.
SEED = 1
#: The labels translated.
LABELS = ("d0", "d1", "generic")


def _distribution_version(name):
    import importlib.metadata

    try:
        return "%s %s" % (name, importlib.metadata.version(name))
    except importlib.metadata.PackageNotFoundError:
        return ""


def _versions():
    import ctranslate2
    import numpy
    import tensorflow as tf
    import tensorflow_addons

    return {
        "python": platform.python_version(),
        "tensorflow": tf.__version__,
        "keras": _distribution_version("tf-keras") or _distribution_version("keras"),
        "tensorflow_addons": "%s (%s)"
        % (tensorflow_addons.__version__, tensorflow_addons.__name__),
        "numpy": numpy.__version__,
        "ctranslate2": ctranslate2.__version__,
    }


def _measure_family(family, work_dir, steps):
    import ctranslate2
    import numpy as np
    import opennmt
    import tensorflow as tf

    from ldr_opennmt import probe
    from ldr_opennmt.checks import family as check
    from ldr_opennmt.export import ct2_export

    # The training dataset draws its domains with the global seed (--seed): set, so that its
    # first batch shows whether TensorFlow's generators draw alike on both stacks.
    tf.random.set_seed(SEED)
    np.random.seed(SEED)
    checker = check.FamilyCheck(family, work_dir, seed=SEED)
    list(checker._build())  # The check's corpus, model and seeded weights.
    model = checker.model
    paths = checker.paths
    # The training dataset's first batch, drawn by tf.data's random sampling of the domains:
    # compared, to say whether TensorFlow's versions draw alike from the same seed.
    first_batch = checker.features["ids"].numpy().tolist()
    # Trained on the corpus's first six sentences in order, the same on both stacks.
    features, labels = next(
        iter(
            model.examples_inputter.make_evaluation_dataset(
                [paths["src"], paths["domain"]], paths["tgt"], batch_size=6
            )
        )
    )
    optimizer = opennmt.optimizers.make_optimizer("LazyAdam", 0.005)
    # From step 1, as on a trained base: the seeded weights stand for one (residual adapters
    # refuse to train from step 0); the same on both stacks.
    optimizer.iterations.assign(1)
    variables = model.trainable_weights
    losses = []
    for _ in range(steps):
        loss, gradients = model.compute_gradients(features, labels, optimizer)
        optimizer.apply_gradients(zip(gradients, variables))
        losses.append(float(loss))
    weights = {"%03d %s" % (i, v.name): v.numpy() for i, v in enumerate(model.weights)}
    np.savez(os.path.join(work_dir, "weights.npz"), **weights)
    result = {
        "losses": losses,
        "first_training_batch": first_batch,
        "model": {},
        "log_probs": {},
        "ctranslate2": None,
    }
    for label in LABELS:
        tokens, log_probs = checker._infer(label)
        result["model"][label] = tokens
        result["log_probs"][label] = [float(x) for x in np.ravel(log_probs)]
    if probe.model_capabilities(model).ctranslate2 is None:
        export_dir = os.path.join(work_dir, "ctranslate2")
        ct2_export.export(model, export_dir, domains=list(LABELS))
        result["ctranslate2"] = {}
        for label in LABELS:
            translator = ctranslate2.Translator(
                os.path.join(export_dir, label), device="cpu", inter_threads=1, intra_threads=1
            )
            outputs = translator.translate_batch(
                checker.sources, beam_size=1, max_decoding_length=check.MAX_LENGTH
            )
            result["ctranslate2"][label] = [output.hypotheses[0] for output in outputs]
    return result


def measure(out_dir, steps=STEPS, only=()):
    """Measures every registered family (or :obj:`only` these) on this process's stack into
    :obj:`out_dir` (``measure.json`` and a ``weights.npz`` per family)."""
    from ldr_opennmt import registry

    os.makedirs(out_dir, exist_ok=False)
    record = {"versions": _versions(), "steps": steps, "families": {}}
    for family in registry.families():
        if only and family.name not in only:
            continue
        started = time.time()
        work_dir = os.path.join(out_dir, family.name)
        os.makedirs(work_dir)
        try:
            record["families"][family.name] = _measure_family(family, work_dir, steps)
        except Exception as e:  # noqa: BLE001 - a family that fails on a stack is a finding.
            record["families"][family.name] = {"error": "%s: %s" % (type(e).__name__, e)}
        print(
            "[stack-parity] %s: %s (%.0f s)"
            % (
                family.name,
                record["families"][family.name].get("error", "measured"),
                time.time() - started,
            ),
            flush=True,
        )
    with open(os.path.join(out_dir, "measure.json.part"), "w", encoding="utf-8") as f:
        json.dump(record, f, indent=1)
    os.replace(os.path.join(out_dir, "measure.json.part"), os.path.join(out_dir, "measure.json"))
    return record


def _load(directory):
    with open(os.path.join(directory, "measure.json"), encoding="utf-8") as f:
        return json.load(f)


def compare_family(name, a_dir, b_dir, a, b):
    """The differences of family :obj:`name` between two measures (a dict)."""
    import numpy as np

    if "error" in a or "error" in b:
        return {"error": a.get("error") or b.get("error")}
    wa = np.load(os.path.join(a_dir, name, "weights.npz"))
    wb = np.load(os.path.join(b_dir, name, "weights.npz"))
    if sorted(wa.files) != sorted(wb.files):
        return {"error": "the stacks create different variables"}
    worst, worst_name = 0.0, None
    for key in wa.files:
        difference = float(np.max(np.abs(wa[key] - wb[key]))) if wa[key].size else 0.0
        if difference > worst:
            worst, worst_name = difference, key.split(" ", 1)[1]
    losses = np.abs(np.array(a["losses"]) - np.array(b["losses"]))
    differing = np.nonzero(losses)[0]
    log_probs = max(
        (
            float(np.max(np.abs(np.array(a["log_probs"][label]) - np.array(b["log_probs"][label]))))
            for label in LABELS
        ),
        default=0.0,
    )
    return {
        "weights_max_difference": worst,
        "weights_worst": worst_name,
        "loss_max_difference": float(losses.max()),
        "loss_first_step_differing": int(differing[0]) + 1 if differing.size else None,
        "translations_identical": a["model"] == b["model"],
        "first_training_batch_identical": (a["first_training_batch"] == b["first_training_batch"]),
        "log_probs_max_difference": log_probs,
        "ctranslate2_identical": (
            None if a["ctranslate2"] is None else a["ctranslate2"] == b["ctranslate2"]
        ),
    }


def compare(a_dir, b_dir, out_dir):
    """Writes ``comparison.json`` and ``report.md`` of two measures into :obj:`out_dir`."""
    a, b = _load(a_dir), _load(b_dir)
    families = {
        name: compare_family(name, a_dir, b_dir, a["families"][name], b["families"][name])
        for name in a["families"]
        if name in b["families"]
    }
    os.makedirs(out_dir, exist_ok=True)
    comparison = {
        "stacks": [a["versions"], b["versions"]],
        "steps": a["steps"],
        "families": families,
    }
    with open(os.path.join(out_dir, "comparison.json"), "w", encoding="utf-8") as f:
        json.dump(comparison, f, indent=1)
    with open(os.path.join(out_dir, "report.md"), "w", encoding="utf-8") as f:
        f.write(report(comparison))
    return comparison


def _short(name):
    """A variable's last three scopes (the rest is the process's layer numbering)."""
    return "/".join(name.split("/")[-3:]) if name else "none"


def _yes(value):
    return "n/a" if value is None else ("yes" if value else "**no**")


def report(comparison):
    """The Markdown report of a comparison."""
    a, b = comparison["stacks"]
    lines = [
        "# The two training stacks compared (ldr-experiments stack-parity)",
        "",
        "| | stack A | stack B |",
        "|---|---|---|",
    ]
    for key in a:
        lines.append("| %s | %s | %s |" % (key, a[key], b.get(key, "")))
    lines += [
        "",
        "Each family built tiny as `ldr-main check-family` builds it (same generated corpus, same"
        " seeded weights set with numpy), trained %d steps with LazyAdam (learning rate 0.005)"
        " on the corpus's first six sentences, then translated greedily with labels d0, d1,"
        " generic by the model and by its CTranslate2 export." % comparison["steps"],
        "",
        "| family | largest weight difference (variable) | largest loss difference | first"
        " step differing | model translations identical | largest log-prob difference |"
        " CTranslate2 identical | training dataset's first batch identical |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, row in comparison["families"].items():
        if "error" in row:
            lines.append("| %s | error: %s | | | | | | |" % (name, row["error"]))
            continue
        lines.append(
            "| %s | %.3g (%s) | %.3g | %s | %s | %.3g | %s | %s |"
            % (
                name,
                row["weights_max_difference"],
                _short(row["weights_worst"]),
                row["loss_max_difference"],
                row["loss_first_step_differing"] or "none",
                _yes(row["translations_identical"]),
                row["log_probs_max_difference"],
                _yes(row["ctranslate2_identical"]),
                _yes(row["first_training_batch_identical"]),
            )
        )
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="ldr-experiments stack-parity",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("measure", help="measure every family on this Python's stack")
    run.add_argument("--out", required=True, help="a new directory")
    run.add_argument("--steps", type=int, default=STEPS)
    run.add_argument("--families", nargs="+", default=(), metavar="NAME")
    both = commands.add_parser("compare", help="compare two measures; write the report")
    both.add_argument("a")
    both.add_argument("b")
    both.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    if args.command == "measure":
        if os.path.exists(args.out):
            sys.exit("stack-parity: %s exists: give a new directory" % args.out)
        measure(args.out, args.steps, tuple(args.families))
    else:
        comparison = compare(args.a, args.b, args.out)
        print(report(comparison))
