"""The serving cost of each row of the tables (issue 54): how many models a user serves, whether
CTranslate2 serves them, their disk and their speed.

A row that folds for CTranslate2 (``ldr-export ctranslate2``) is served as one plain Transformer
per label it reads (its domains and ``generic``), each of Mixed's size; a row that ignores labels
as one model; the FT_<domain> rows as one model per domain; a row that does not fold only as a
SavedModel (TensorFlow), in one line why. Disk and speed are measured, not estimated: the
distillation's stages export each FT_<domain> teacher (a Mixed of the table's size) to
CTranslate2 and translate its domain's training sources with it (beam 4, one thread:
``OUT/distill/<domain>.json``); every folded model has that size, so those figures are each
CTranslate2 model's.
"""

import json
import os
import runpy

from ldr_opennmt import probe
from ldr_opennmt.reports import markdown_table

from . import common


def measured(out, domains):
    """``(megabytes of one CTranslate2 model, sentences per second)`` measured by the
    distillation's stages under :obj:`out` (``None`` for either when not measured): the
    mean over the domains' teachers, weighted by their sentences for the speed."""
    sizes, sentences, seconds = [], 0, 0.0
    for domain in domains:
        record_path = os.path.join(out, "distill", "%s.json" % domain)
        if not os.path.isfile(record_path):
            continue
        with open(record_path, encoding="utf-8") as f:
            record = json.load(f)
        sentences += record["sentences"]
        seconds += record["seconds"]
        model = os.path.join(out, "distill", "ct2_%s" % domain, domain, "model.bin")
        if os.path.isfile(model):
            sizes.append(os.path.getsize(model) / 1e6)
    megabytes = sum(sizes) / len(sizes) if sizes else None
    speed = sentences / seconds if seconds else None
    return megabytes, speed


def refusal(model_def):
    """Why ``ldr-export ctranslate2`` refuses the model of :obj:`model_def` (a model definition
    file named as in the repository: :func:`ldr_experiments.common.resource`), or ``None``
    when it folds (the registry's reader of a model instance; a small instance is built, no
    weights)."""
    model = runpy.run_path(common.resource(model_def))["model"]()
    # The registry's own reader (private: the table's rerun freezes ldr_opennmt; a public name
    # is for after it).
    return probe._ct2_refusal(model)  # pylint: disable=protected-access


def serving_section(plan, names):
    """The report's "Serving cost" section: a row per table row of :obj:`names` (not a seed
    twin) and one for the FT rows.

    Args:
      plan: The tables' plan (its runs, domains, scale and results directory).
      names: The rows (no defects).
    """
    megabytes, speed = measured(plan.steps.out, plan.domains)
    labels = len(plan.domains) + 1  # every domain and generic
    cells = []

    def cell(row, models, how):
        disk = "%.0f" % (models * megabytes) if megabytes and how == "CTranslate2" else "-"
        rate = "%.0f" % speed if speed and how == "CTranslate2" else "-"
        cells.append([row, str(models), how, disk, rate])

    for name in names:
        run = plan.runs_by_name.get(name)
        if run is None or run.seed_of is not None:
            continue
        why = refusal(run.model_def(plan.scale))
        if why:
            cell(name, 1, "SavedModel only: " + why.split(":")[0])
        else:
            cell(name, labels if run.reads_labels else 1, "CTranslate2")
    cell("FT (FT_<domain>, one per domain)", len(plan.domains), "CTranslate2")
    return [
        "## Serving cost",
        "",
        "What serving each row takes: the models a user serves (a row that reads labels folds"
        " into one plain Transformer per label, its domains and `generic`), whether CTranslate2"
        " serves them, their disk and the speed of one of them (sentences per second, beam 4,"
        " one thread), measured on the FT teachers' CTranslate2 exports of the distillation,"
        " each of Mixed's size like every folded model (`-`: not measured: no distillation in"
        " this table, or a SavedModel).",
        "",
        markdown_table(["row", "models", "served by", "disk (MB)", "sentences/s"], cells, "lrlrr"),
        "",
    ]
