"""The rows of the papers' tables as data (``ldr-experiments tables``,
:mod:`ldr_experiments.tables`): the families and variants each row trains, the budgets of each
size, and the choice of the rows a run trains (``--families``, ``--rows``, the seed twins).
"""

import dataclasses

from ldr_opennmt import errors, probe, registry

from . import demo
from .demo import Run

#: The families the default run trains (the registry's Transformers: the papers compare
#: Transformers; ``--families`` adds the RNNs).
DEFAULT_ARCHITECTURE = "transformer"

#: The family of the baseline row, always in the table.
BASELINE_FAMILY = "mixed_transformer"

#: A value of :data:`VARIANTS` replaced by the budget's training steps.
MAX_STEP = "<max_step>"

#: The rows beyond one per family: the options of this experiment, not a list of families
#: (a family not named here gets its one default row). Each entry: family -> the extra
#: :class:`ldr_experiments.demo.Run` of that family, and the options of its default row.
#: Mixed with tied target embeddings at both scales: the control of the rows whose output layer
#: is tied (domain mixing, the Factorized designs' own curriculum).
TIED_MIXED = {
    "small": "model_defs/small/mixed_transformer_tied.py",
    "paper": "model_defs/mixed_transformer_tied.py",
}

#: Mixed with an output layer of its own (the demo's family default is tied).
UNTIED_MIXED = {
    "small": "model_defs/small/mixed_transformer.py",
    "paper": "model_defs/mixed_transformer.py",
}

#: Factorized PA with an output layer of its own: its stage 1 is the table's base, Mixed.
UNTIED_PA = {
    "small": "model_defs/small/factorized_pa_untied.py",
    "paper": "model_defs/factorized_pa_untied.py",
}

#: The equal-compute controls (issue 59 item 1): Mixed continued, every parameter trained on
#: the same data, for the forward-backward passes of a two-pass row (Procedure 1 and summed
#: train two batches a step: 4500 steps are 9000 passes), or for a stage 2's steps on the stage
#: 2's batches (the residual adapters, Factorized PA; the tied one for SF and DF's curriculum).
EQUAL_PASSES = "Mixed (equal passes)"
CONTINUED = "Mixed (continued)"
TIED_CONTINUED = "Mixed (tied, continued)"
CONTINUED_LONG = "Mixed (continued 4x)"

#: LDR (summed) with one option of the authors' released code at a time (issue 53 item 2: which
#: of the differences matters, measured): ``(row suffix, slug, data, train)``; a row whose
#: option is the model's has its definitions in ``model_defs/[small/]ablation/<slug>.py``
#: (:func:`ablation_defs`). Each is judged against LDR (summed), the same in all else.
LDR_ABLATION = (
    ("every layer", "ldr_every_layer", {}, {}),
    ("target side", "ldr_target_ldr", {}, {}),
    ("zero regions", "ldr_zero_regions", {}, {}),
    # The released utils/dataprocess.py: one domain per batch, drawn by its natural share.
    (
        "one-domain batches",
        "ldr_domain_batches",
        {"domain_batches": True},
        {"domain_sampling_alpha": 1.0},
    ),
)


def ablation_defs(slug, data):
    """The model definitions of an ablation row (:data:`LDR_ABLATION`): its own when its
    option is the model's, ``None`` (the family's) when it changes the data only."""
    if data:
        return None
    return {
        "small": "model_defs/small/ablation/%s.py" % slug,
        "paper": "model_defs/ablation/%s.py" % slug,
    }


VARIANTS = {
    # Mixed with an output layer of its own, as LDR, DC, TTM, ML, AdvL have: the base every
    # continued training starts from (FT_<domain>, Factorized PA's stage 2, the residual
    # adapters), so that FT is the upper reference of all of them, and the control of every
    # row with an output layer of its own (issue 42, item 3: docs/tables.md says why the tied
    # Mixed is not the base). Every control and every row of a paper's main claim is trained
    # with each seed of --seeds (issue 59 item 2; their twins: demo.seed_twins).
    "mixed_transformer": {
        "default": {"headline": True, "model_defs": UNTIED_MIXED, "seeds": True},
        "extra": [
            # Mixed with its output layer tied to the target embeddings (the demo's and the
            # Factorized paper's): the control of the tied rows.
            Run(
                "mixed_transformer",
                suffix=" (tied)",
                slug="mixed_tied",
                model_defs=TIED_MIXED,
                seeds=True,
            ),
            Run(
                "mixed_transformer",
                suffix=" (equal passes)",
                slug="mixed_passes",
                model_defs=UNTIED_MIXED,
                continues="Mixed",
                continue_steps="passes",
                seeds=True,
            ),
            Run(
                "mixed_transformer",
                suffix=" (continued)",
                slug="mixed_continued",
                model_defs=UNTIED_MIXED,
                continues="Mixed",
                continue_steps="stage2",
                seeds=True,
            ),
            # The control of the adapters given four times the stage 2 (issue 54 item 2).
            Run(
                "mixed_transformer",
                suffix=" (continued 4x)",
                slug="mixed_continued_long",
                model_defs=UNTIED_MIXED,
                continues="Mixed",
                continue_steps="stage2",
                stage2_factor=4,
            ),
            Run(
                "mixed_transformer",
                suffix=" (tied, continued)",
                slug="mixed_tied_continued",
                model_defs=TIED_MIXED,
                continues="Mixed (tied)",
                continue_steps="stage2",
            ),
            # Multi-domain distillation (issue 54 item 1; Currey et al., 2020): a plain
            # Transformer, Mixed's recipe and steps, trained on the FT teachers' translations
            # of each domain's training sources beside the references
            # (ldr_experiments.distillation); judged against Mixed, served as one model.
            Run(
                "mixed_transformer",
                row="Distilled student",
                slug="distilled",
                model_defs=UNTIED_MIXED,
                distilled=True,
            ),
            # Rebalanced sampling, the no-parameter baseline (issue 54 item 3; the TACL 2021
            # table's Mixed-Bal): every domain drawn with the same probability (alpha 0)
            # instead of the table's alpha 0.5; judged against Mixed, the same in all else.
            Run(
                "mixed_transformer",
                suffix=" (balanced)",
                slug="mixed_balanced",
                train={"domain_sampling_alpha": 0.0},
                model_defs=UNTIED_MIXED,
            ),
        ],
    },
    # DC trained as LDR (summed) is (issue 59 item 1): its domain tag and the generic tag in
    # the two passes of each step, so that LDR's gain over DC is not the summed recipe's.
    "dc_transformer": {
        "extra": [
            Run(
                "dc_transformer",
                suffix=" (summed)",
                slug="dc_summed",
                params={"domain_training": "summed"},
                control=EQUAL_PASSES,
            )
        ]
    },
    "factorized_pa": {"default": {"model_defs": UNTIED_PA, "seeds": True, "control": CONTINUED}},
    "residual_adapters": {
        "default": {"seeds": True, "control": CONTINUED},
        # Issue 54 item 2: the adapters given what they need. Their inner size is already 4x
        # the model's (256 for 64 units, as the papers' 2048 for 512); their stage 2 is what
        # the TACL comparison gives more of: four times the steps, judged against Mixed
        # continued for as many.
        "extra": [
            Run(
                "residual_adapters",
                suffix=" (4x stage 2)",
                slug="residual_adapters_long",
                stage2_factor=4,
                control=CONTINUED_LONG,
            )
        ],
    },
    "ldr_transformer": {
        "default": {
            "params": {"domain_training": "procedure1"},
            "pred": True,
            "control": EQUAL_PASSES,
        },
        # The LDR paper's ablation: one pass with the true labels instead of Procedure 1, and
        # the loss of the authors' released configuration, summed (0.5 L_domain + 0.5
        # L_generic, every parameter), on the paper's model: the mode that reads its label
        # best (the tables of 2026-11-27), so the headline row, with every seed.
        "extra": [
            Run(
                "ldr_transformer",
                suffix=" (joint)",
                slug="ldr_joint",
                params={"domain_training": "joint"},
            ),
            Run(
                "ldr_transformer",
                suffix=" (summed)",
                slug="ldr_summed",
                params={"domain_training": "summed"},
                pred=True,
                seeds=True,
                control=EQUAL_PASSES,
            ),
        ]
        + [
            Run(
                "ldr_transformer",
                suffix=" (summed, %s)" % what,
                slug=slug,
                params={"domain_training": "summed"},
                data=data,
                train=train,
                model_defs=ablation_defs(slug, data),
                modes=("oracle", "generic"),
                control="LDR (summed)",
            )
            for what, slug, data, train in LDR_ABLATION
        ],
    },
    # LDR as its authors' released code builds and trains it (issue 53): the family's preset
    # (every layer, target side, zero regions, summed), with one-domain batches drawn by their
    # natural share (the released utils/dataprocess.py).
    "ldr_transformer_released": {
        "default": {
            "data": {"domain_batches": True},
            "train": {"domain_sampling_alpha": 1.0},
            "control": EQUAL_PASSES,
        }
    },
    "mixing_transformer": {
        "default": {"row": "Domain mixing", "seeds": True},
        # The mixing paper's encoder-only variant (E) besides E/DC.
        "extra": [
            Run(
                "mixing_transformer",
                row="Domain mixing (E)",
                slug="mixing_e",
                model_defs={
                    "small": "model_defs/small/mixing_transformer_encoder.py",
                    "paper": "model_defs/mixing_transformer_encoder.py",
                },
            )
        ],
    },
    # AdvL's gradient reversal ramps up over the whole training (Ganin and Lempitsky).
    "advl_transformer": {"default": {"params": {"gradient_reversal_steps": MAX_STEP}}},
    # The Factorized paper's curriculum (section 3.1) for the designs whose attention has
    # other shapes than Mixed's (multi-query K/V): a stage 1 of their own.
    "factorized_sf": {"default": {"curriculum": True, "control": TIED_CONTINUED}},
    "factorized_df": {"default": {"curriculum": True, "control": TIED_CONTINUED}},
}

#: The label modes of a family that reads labels (its capabilities add ``ens-uniform`` when
#: it translates ensembles of its domain views, ``pred`` with the classifier's labels).
LABEL_MODES = ("oracle", "generic", "wrong")

BUDGETS = {
    # The demo's recipe and budget per system (ldr_experiments/demo/runs.py, BUDGETS["default"]),
    # for every row: the whole table's time is estimated in docs/tables.md.
    # Issue 59: every test sentence of every domain (500 each on the default corpus), and three
    # seeds for the controls and the rows of the papers' main claims (--seeds).
    # curve_points: the dev evaluations of each stage 2 and FT (their curves; --set
    # curve_points=2 thins them when time is short).
    "default": dict(
        demo.BUDGETS["default"],
        contrastive_items=500,
        eval_sentences=None,
        seeds=3,
        curve_points=8,
    ),
    # Two points per curve: evaluating the dev sets costs more than a quick training step. Two
    # seeds: every path of the twins, at the least cost.
    "quick": dict(demo.BUDGETS["quick"], curve_points=2, seeds=2),
    # The papers' schedule (the LDR paper's section 3.2, the Factorized paper's 3.1):
    # Transformer base, Noam decay with 4000 warmup steps, 200,000 steps (Factorized stage 2:
    # 50,000), batches of 4096 tokens, the whole test sets. For GPUs.
    "paper": {
        "steps": 200000,
        "warmup": 4000,
        "batch_size": 4096,
        "alpha": 0.5,
        "max_length": 100,
        "finetune_steps": 20000,
        "stage2_steps": 50000,
        "classifier_steps": 20000,
        "eval_sentences": None,
        "evaluate_in_lanes": True,
        "contrastive_items": 2000,
        "examples": 2,
        "log_steps": 100,
        "max_decoding_length": 250,
        "model_dim": 512,
        "seeds": 3,
    },
}


def table_runs(families=None, architecture=DEFAULT_ARCHITECTURE, seeds=1, rows=None):
    """The rows of the table: a :class:`ldr_experiments.demo.Run` per family (its options from
    :data:`VARIANTS`), then the family's extra rows.

    Args:
      families: Registry names, in the order wanted (default: every registered family of
        :obj:`architecture`, in registration order). Mixed, the baseline, is always there,
        and so is the registry stage 1 of a family (Factorized PA's is Mixed).
      architecture: The architecture of the default families.
      seeds: The seeds of the rows trained with every seed (:attr:`Run.seeds`: the controls
        and the rows of the papers' main claims): their twins, seeds 2 to :obj:`seeds`, follow
        the rows.
      rows: Row names (``--rows``): only these rows of :obj:`families`' and what they need
        (:func:`needed_rows`); ``None``: every row.

    Returns:
      The runs, the baseline (Mixed) first.
    """
    if families is None:
        families = [f.name for f in registry.families() if f.architecture == architecture]
    else:
        families = list(dict.fromkeys(families))
        for name in list(families):
            stage1 = registry.get(name).stage1
            if stage1 is not None and stage1 not in families:
                families.insert(0, stage1)
    # Mixed, the baseline of every comparison (and its seed spread), leads.
    families = [BASELINE_FAMILY] + [name for name in families if name != BASELINE_FAMILY]
    runs = []
    for name in families:
        options = VARIANTS.get(name, {})
        runs.append(Run(name, **options.get("default", {})))
        runs.extend(options.get("extra", []))
    # A continued control no row of this table is judged against is not trained (Mixed
    # (equal passes) is: it says what the compute alone adds).
    used = {run.control for run in runs}
    runs = [
        run for run in runs if run.continues is None or run.name in used or run.name == EQUAL_PASSES
    ]
    if rows is not None:
        runs = needed_rows(runs, rows)
    names = {run.name for run in runs}
    # A control this table does not train (its family not chosen) is no control.
    runs = [run if run.control in names else dataclasses.replace(run, control=None) for run in runs]
    runs = [_with_modes(run) for run in runs]
    return runs + [twin for run in runs if run.seeds for twin in demo.seed_twins(run, seeds)]


def needed_rows(runs, rows):
    """The runs of :obj:`rows` and of what they need: the baseline (Mixed: the base of every
    continued training, FT_<domain> and the matched control), each row's control of the same
    compute and the row it continues, in turn theirs (a verdict is only ever made against a
    control that was trained).

    Raises:
      UserError: One line naming a row this table does not have, and the rows it has.
    """
    by_name = {run.name: run for run in runs}
    unknown = [row for row in rows if row not in by_name]
    if unknown:
        raise errors.UserError(
            "--rows: no row %s in this table (its rows: %s)"
            % (", ".join(repr(row) for row in unknown), ", ".join(by_name))
        )
    keep = set()
    todo = [runs[0].name] + list(rows)
    while todo:
        name = todo.pop()
        if name in keep:
            continue
        keep.add(name)
        run = by_name[name]
        todo.extend(dep for dep in (run.control, run.continues) if dep in by_name)
    return [run for run in runs if run.name in keep]


def _with_modes(run):
    """:obj:`run` with the label modes its family supports (:data:`LABEL_MODES`, ``pred``
    where asked, ``ens-uniform`` where it translates ensembles of its domain views)."""
    caps = probe.capabilities(run.family)
    if run.modes is not None or caps.labels != probe.LABEL_NEEDED:
        return run
    modes = LABEL_MODES + (("pred",) if run.pred else ())
    if caps.ensembles is None:
        modes += ("ens-uniform",)
    return dataclasses.replace(run, modes=modes)


def baseline_run(runs):
    """The baseline of the comparisons: the first run (Mixed when it is in the table)."""
    return runs[0]


def contrastive_rows(runs):
    """The rows of the contrastive test: the baseline and every row whose family has domain
    parameters or reads labels (the test asks whether the label picks the word)."""
    rows = []
    for run in runs:
        caps = probe.capabilities(run.family)
        if run.seed_of is not None:
            continue  # A seed twin: its row's items are scored once.
        if run is runs[0] or caps.labels != probe.LABEL_IGNORED:
            rows.append(run.name)
    return tuple(rows)
