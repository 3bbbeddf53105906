"""The papers' tables: the per-domain dev loss of every stage 2 and fine-tuning, read from
the training logs (``--with_eval``), as a table and ``stage2_curves.png``."""

import os
import re

from ldr_opennmt.reports import markdown_table, pyplot
from ldr_opennmt.utils import save_figure

#: OpenNMT-tf's log line of a per-domain evaluation
#: (:class:`ldr_opennmt.training.evaluator.MultiDomainEvaluator`).
_EVALUATION = re.compile(
    r"Evaluation result for domain (?P<domain>\S+) at step (?P<step>\d+): .*?loss = "
    r"(?P<loss>[-+0-9.eE]+|nan|inf)"
)


def dev_curves(log_path):
    """``{domain: [(step, dev loss)]}`` of a training log (``--with_eval``), in step order;
    empty when the log has no per-domain evaluation."""
    curves = {}
    if not os.path.isfile(log_path):
        return curves
    with open(log_path, encoding="utf-8", errors="replace") as f:
        for line in f:
            match = _EVALUATION.search(line)
            if match:
                point = (int(match.group("step")), float(match.group("loss")))
                curves.setdefault(match.group("domain"), []).append(point)
    return {domain: sorted(dict(points).items()) for domain, points in curves.items()}


def curve_section(plan, out):
    """The curves of the trainings that continue a trained model (stage 2, FT_*): a table of
    each domain's dev loss at the first and the last evaluation, and ``stage2_curves.png``
    (one panel per training, one line per domain). ``[]`` when none was evaluated."""
    curves = {}
    for trained in plan.trained:
        log_path = os.path.join(plan.steps.logs_dir, "%s.train.log" % trained.slug)
        found = dev_curves(log_path)
        if found:
            curves[trained.name] = found
    if not curves:
        return []
    rows = []
    for name, found in curves.items():
        for domain, points in found.items():
            (first_step, first), (last_step, last) = points[0], points[-1]
            best_step, best = min(points, key=lambda point: point[1])
            rows.append(
                [
                    name,
                    domain,
                    "%.3f (step %d)" % (first, first_step),
                    "%.3f (step %d)" % (best, best_step),
                    "%.3f (step %d)" % (last, last_step),
                ]
            )
    plt = pyplot()
    figure, axes = plt.subplots(
        len(curves), 1, figsize=(6, 2.2 * len(curves)), squeeze=False, sharex=False
    )
    try:
        for axis, (name, found) in zip(axes[:, 0], curves.items()):
            for domain, points in found.items():
                axis.plot([p[0] for p in points], [p[1] for p in points], marker=".", label=domain)
            axis.set_title(name, fontsize=9)
            axis.set_ylabel("dev loss")
            axis.legend(fontsize=7)
        axes[-1, 0].set_xlabel("step")
        figure.tight_layout()
        save_figure(figure, os.path.join(out, "stage2_curves.png"))
    finally:
        plt.close(figure)
    return [
        "## Stage 2 and fine-tuning, per domain",
        "",
        "The dev loss of each domain while a stage 2 (Factorized, residual adapters) or a"
        " fine-tuning (FT_*) trains, evaluated %d times in each (every 1/%d of its steps,"
        " `--with_eval`): the first evaluation, the best and the last."
        % (plan.curve_points, plan.curve_points),
        "",
        markdown_table(["training", "domain", "first", "best", "last"], rows, "llrrr"),
        "",
        "![Dev loss per domain during stage 2 and fine-tuning](stage2_curves.png)",
        "",
    ]
