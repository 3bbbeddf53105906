"""AdvL's reversal weight as the tables read it: the choice of ``bash run/advl_grid.sh``
(:mod:`ldr_experiments.advl_grid`), where it is, whether its recipe is the table's, and what it
does to the table's AdvL row. Below both the grid and the tables (no import circle)."""

import dataclasses
import json
import os

from ldr_opennmt import errors

#: The family whose reversal weight the grid chooses.
FAMILY = "advl_transformer"

#: The ``params`` key of AdvL's final reversal weight (:mod:`ldr_opennmt.models.multitask`).
SCALE_PARAM = "gradient_reversal_scale"

#: The grid (the issue's; the papers give none).
GRID = (0.01, 0.03, 0.1, 0.3)

#: The model's own weight, used when no choice is read.
DEFAULT_WEIGHT = 1.0

#: The file of the choice in the grid's results directory.
CHOICE_FILE = "choice.json"
CHOICE_LAYOUT = 1

#: The budget entries that make a training's recipe: a choice is read only by a table whose
#: recipe is the grid's.
RECIPE_KEYS = (
    "steps",
    "warmup",
    "batch_size",
    "alpha",
    "max_length",
    "max_decoding_length",
    "model_dim",
)

COMMAND = ["bash", "run/advl_grid.sh"]


def default_out(quick):
    """The grid's results directory (the one ``bash run/tables.sh [--quick]`` reads)."""
    return "results/advl_grid-quick" if quick else "results/advl_grid"


def default_choice_path(quick):
    """The choice file the tables read unless told another (``--advl_choice``)."""
    return os.path.join(default_out(quick), CHOICE_FILE)


def recipe(args, budget):
    """What a grid point's training shares with the table's AdvL row: corpus, data
    configuration, scale and the budget's :data:`RECIPE_KEYS`."""
    return {
        "data": args.data,
        "config": args.config,
        "scale": args.scale,
        "budget": {key: budget.get(key) for key in RECIPE_KEYS},
    }


def read_choice(path, table_recipe):
    """The grid's choice as the tables see it.

    Args:
      path: The choice file (``choice.json``).
      table_recipe: The table's :func:`recipe`: the choice is used only when the grid's is
        the same.

    Returns:
      ``{"path", "status", "weight", "points", "differences"}``: ``status`` ``"used"`` (and
      ``weight`` the chosen one), ``"absent"`` (no file), ``"other recipe"`` (its
      ``differences``), ``"all collapsed"``; ``weight`` is :data:`DEFAULT_WEIGHT` unless
      used.
    """
    found = {
        "path": path,
        "status": "absent",
        "weight": DEFAULT_WEIGHT,
        "points": [],
        "differences": [],
    }
    if not os.path.isfile(path):
        return found
    try:
        with open(path, encoding="utf-8") as f:
            record = json.load(f)
        points, grid_recipe, weight = record["points"], record["recipe"], record["weight"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise errors.UserError("%s: not a choice written by run/advl_grid.sh (%s)" % (path, e))
    found["points"] = points
    differences = _differences(grid_recipe, table_recipe)
    if differences:
        found.update(status="other recipe", differences=differences)
    elif weight is None:
        found["status"] = "all collapsed"
    else:
        found.update(status="used", weight=float(weight))
    return found


def _differences(grid_recipe, table_recipe):
    """``["steps 60 against 4500", ...]``: how the grid's recipe differs from the table's."""
    flat = {}
    for name, recipe_ in (("grid", grid_recipe), ("table", table_recipe)):
        for key, value in recipe_.items():
            if isinstance(value, dict):
                for inner, item in value.items():
                    flat.setdefault(inner, {})[name] = item
            else:
                flat.setdefault(key, {})[name] = value
    return [
        "%s %s against %s" % (key, values.get("grid"), values.get("table"))
        for key, values in flat.items()
        if values.get("grid") != values.get("table")
    ]


def apply_choice(runs, choice):
    """:obj:`runs` with the AdvL rows trained with the chosen weight (unchanged unless the
    choice is used)."""
    if not choice or choice["status"] != "used":
        return runs
    return [
        (
            dataclasses.replace(run, params=dict(run.params, **{SCALE_PARAM: choice["weight"]}))
            if run.family == FAMILY
            else run
        )
        for run in runs
    ]


def _point_cells(points):
    return ", ".join(
        "%g: %.1f%s" % (p["weight"], p["average"], " (collapsed)" if p.get("collapsed") else "")
        for p in points
    )


def choice_lines(choice):
    """The tables report's sentence on AdvL's weight: which, and why (Markdown lines)."""
    path, status = choice["path"], choice["status"]
    if status == "used":
        text = (
            "AdvL's reversal weight: lambda = %g, chosen on the dev sets by `%s` (`%s`): the"
            " best average dev BLEU of its grid among the points that did not collapse (%s)."
            % (choice["weight"], " ".join(COMMAND), path, _point_cells(choice["points"]))
        )
    elif status == "absent":
        text = (
            "AdvL's reversal weight: the model's default lambda = %g; the grid (`%s`) was not"
            " run (no `%s`)." % (DEFAULT_WEIGHT, " ".join(COMMAND), path)
        )
    elif status == "other recipe":
        text = (
            "AdvL's reversal weight: the model's default lambda = %g; the grid of `%s` ran with"
            " another recipe (%s), so its choice is not used."
            % (DEFAULT_WEIGHT, path, "; ".join(choice["differences"]))
        )
    else:
        text = (
            "AdvL's reversal weight: the model's default lambda = %g; every point of the grid"
            " of `%s` collapsed (%s)." % (DEFAULT_WEIGHT, path, _point_cells(choice["points"]))
        )
    return [text, ""]
