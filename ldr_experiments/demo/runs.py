"""The demo's systems (:data:`SYSTEMS`), budgets (:data:`BUDGETS`) and configurations: its
plan's declarations."""

import dataclasses
import functools
import os
from typing import Any, Mapping, Optional, Tuple

from ldr_experiments import common
from ldr_opennmt import errors, probe, registry
from ldr_opennmt.evaluation import evaluate
from ldr_opennmt.evaluation import systems as systems_lib

DATA_CONFIG = "data_configs/default_corpora.yml"
CLASSIFIER_DEF = "model_defs/small/domain_classifier.py"
#: The label modes of a family that reads domain labels at translation.
LABEL_MODES = ("oracle", "generic", "wrong")


@dataclasses.dataclass(frozen=True)
class Run:
    """A system of the demo: a family of the registry and the options of this run.

    Attributes:
      family: The family's registry name: its model definition
        (:func:`ldr_experiments.systems.model_def`), its row
        title, its stage-1 family and ``finetune`` mode, the label modes it is evaluated
        with (its capabilities) are the registry's.
      suffix: Added to the family's title in the row name (``"Mixed" + " (seed 2)"``).
      row: The row name instead of the title and suffix.
      slug: Its directory and stage name (default: the family name without
        ``_transformer``).
      params: ``params`` options of its run configuration.
      train: ``train`` options of its run configuration.
      data: ``data`` options of its run configuration (e.g. ``domain_batches``).
      seed: The ``--seed`` of a training from scratch.
      modes: Its label modes (default: ``oracle``, ``generic``, ``wrong`` for a family
        that needs a label at translation, none for one that ignores labels).
      pred: Also translated with the domain classifier's labels (``pred``).
      headline: One of the systems of the contrastive test and of the findings.
      full: Trained with ``--full`` only.
      model_defs: The model definition files instead of the family's, by scale
        (``{"small": ..., "paper": ...}``): a variant the registry has no file for (the
        encoder-only domain mixing).
      curriculum: Trained in two stages of its own (the Factorized paper's section 3.1):
        stage 1 with ``domain_training: general`` (every sentence as generic), then
        ``finetune: unfold`` and stage 2 on the domain blocks alone, the rest frozen.
      seed_of: The row this one trains again with another :attr:`seed` (and nothing else
        changed): the pair gives that row's seed spread.
      seeds: Trained with every seed of the table's ``--seeds N`` (a control, or a row of a
        paper's main claim): :func:`seed_twins` adds its twins, seeds 2 to N.
      continues: The row (its name) this one continues with every parameter trained, on the
        same data: a control that costs what a second stage or a second pass costs.
      continue_steps: How long it continues: ``"passes"`` (as many steps as the row it
        continues took: a Mixed of the forward-backward passes of a two-pass row), or
        ``"stage2"`` (a stage 2's steps, on the stage 2's batches).
      control: The row of the same training compute it is judged against besides its
        matched Mixed (its equal-compute control), if any.
      distilled: Trained on the FT teachers' translations of the training sources
        (:mod:`ldr_experiments.distillation`: the tables set its corpora and its ``after``).
      after: Stages its training waits for besides the trainings it continues.
      stage2_factor: Its stage 2 (or, with :attr:`continue_steps` ``"stage2"``, its
        continuation) takes this many times the budget's stage-2 steps.
    """

    family: str
    suffix: str = ""
    row: Optional[str] = None
    slug: Optional[str] = None
    params: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    train: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    data: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    seed: int = 1
    modes: Optional[Tuple[str, ...]] = None
    pred: bool = False
    headline: bool = False
    full: bool = False
    model_defs: Optional[Mapping[str, str]] = None
    curriculum: bool = False
    seed_of: Optional[str] = None
    seeds: bool = False
    continues: Optional[str] = None
    continue_steps: Optional[str] = None
    control: Optional[str] = None
    distilled: bool = False
    after: Tuple[str, ...] = ()
    stage2_factor: int = 1

    @property
    def definition(self):
        """The family's :class:`ldr_opennmt.registry.Family`."""
        return registry.get(self.family)

    @property
    def name(self):
        """The row name: the family's title and :attr:`suffix`, or :attr:`row`."""
        return self.row or self.definition.title + self.suffix

    @property
    def directory(self):
        """The directory (and stage) name."""
        return self.slug or self.family.replace("_transformer", "")

    def model_def(self, scale="small"):
        """Its model definition file at one scale (``small``: ``model_defs/small/``,
        ``paper``: ``model_defs/``; a family of a user module without one: the module's
        file, whose ``model()`` gives its size)."""
        from ldr_experiments import systems  # The repository's files per family.

        if self.model_defs:
            return self.model_defs[scale]
        family = self.definition
        path = systems.model_def(family.name, scale)
        if path is None and family.module.endswith(".py"):
            # A user module's file is its model definition (onmt-main --model FILE).
            path = family.module
        if path is None:
            raise errors.UserError(
                "family %s has no %s model definition in the registry" % (self.family, scale)
            )
        return path

    @property
    def reads_labels(self):
        """Whether its translations read the domain label (the registry's capabilities)."""
        return probe.capabilities(self.family).labels == probe.LABEL_NEEDED

    def label_modes(self):
        """The label modes it is translated with (``None``: it ignores labels)."""
        if self.modes is not None:
            return tuple(self.modes)
        if not self.reads_labels:
            return None
        return LABEL_MODES + (("pred",) if self.pred else ())


def twin_name(name, seed):
    """The row name of seed :obj:`seed` of row :obj:`name` (``Mixed (seed 2)``,
    ``LDR (summed, seed 2)``); seed 1 is the row itself."""
    if seed == 1:
        return name
    if name.endswith(")"):
        return "%s, seed %d)" % (name[:-1], seed)
    return "%s (seed %d)" % (name, seed)


def seed_twins(run, count):
    """The twins of :obj:`run` (a :attr:`Run.seeds` row) for seeds 2 to :obj:`count`: the
    same row with another seed, translated in the label modes the stated test and the label's
    effect need (``oracle`` and ``generic``; none for a row that ignores labels), continuing
    the twin of the same seed of the row it continues."""
    twins = []
    for seed in range(2, count + 1):
        modes = ("oracle", "generic") if run.reads_labels else None
        twins.append(
            dataclasses.replace(
                run,
                row=twin_name(run.name, seed),
                suffix="",
                slug="%s_seed%d" % (run.directory, seed),
                seed=seed,
                seed_of=run.name,
                seeds=False,
                modes=modes,
                pred=False,
                headline=False,
                continues=twin_name(run.continues, seed) if run.continues else None,
                control=None,  # The row's verdict pairs the seeds of row and control.
            )
        )
    return twins


#: The demo's LDR model definitions: the output layer tied like the Mixed baseline's at each
#: scale (mixed_transformer's small definition is tied, its paper-size one is not:
#: :func:`ldr_experiments.systems.model_def`).
LDR_DEFS = {
    "small": "model_defs/small/ldr_transformer_tied.py",
    "paper": "model_defs/ldr_transformer.py",
}

#: The demo's systems, in the order of the tables. A family whose registry entry has a
#: stage 1 (Factorized PA: Mixed, then ``finetune: unfold``) continues the first system of
#: that family here. Every system is also trained on batches mixing domains
#: (common.MIXED_BATCHES).
SYSTEMS = (
    Run("mixed_transformer", headline=True),
    # The equal-compute control of LDR (summed) (issue 59 item 5): Mixed continued, every
    # parameter on its own batches, for as many steps again: the forward-backward passes of
    # summed's two batches a step. Its gain over Mixed is what the compute alone adds.
    Run(
        "mixed_transformer",
        suffix=" (equal passes)",
        slug="mixed_passes",
        continues="Mixed",
        continue_steps="passes",
    ),
    # Factorized PA's control of the same compute: Mixed continued for the stage 2's steps
    # (under --full with PA: the default run's 30 minutes hold LDR and its controls).
    Run(
        "mixed_transformer",
        suffix=" (continued)",
        slug="mixed_continued",
        continues="Mixed",
        continue_steps="stage2",
        full=True,
    ),
    # Mixed again with another seed (the run-to-run spread) under --full: the default run's
    # verdicts are the stated test's (ldr_opennmt/evaluation/verdicts.py), over sentences.
    Run("mixed_transformer", suffix=" (seed 2)", slug="mixed_seed2", seed=2, full=True),
    # DC (domain control: a domain tag embedding) under --full: the default run's 30
    # minutes hold Mixed, its equal-compute control, LDR and the systems that start from Mixed.
    Run("dc_transformer", headline=True, full=True),
    # LDR summed (0.5 L_domain + 0.5 L_generic, the loss of the authors' released
    # configuration; the tables of 2026-11-29 found it label-blind), its output layer tied like
    # Mixed's at each scale (small: tied, paper: its own, as model_defs/mixed_transformer.py):
    # the tables found that an output layer of its own is worth +3.8 BLEU at the demo's size.
    # Judged against Mixed (the same steps) and Mixed (equal passes) (the same compute).
    Run(
        "ldr_transformer",
        suffix=" (summed)",
        slug="ldr_summed",
        params={"domain_training": "summed"},
        pred=True,
        headline=True,
        model_defs=LDR_DEFS,
        control="Mixed (equal passes)",
    ),
    Run(
        "ldr_transformer",
        suffix="^1",
        slug="ldr_alpha1",
        params={"domain_training": "procedure1"},
        train={"domain_sampling_alpha": 1.0},
        modes=("oracle",),
        full=True,
        model_defs=LDR_DEFS,
    ),
    # Domain mixing needs the labels for training only; it translates without them.
    Run("mixing_transformer", row="Mixing", full=True),
    # The Factorized design the demo trains, with the curriculum whose stage 1 (domain-
    # agnostic training on all data) is the Mixed model itself: PA keeps a plain
    # Transformer's attention shapes, so the trained Mixed model is unfolded into PA's
    # domain blocks and stage 2 trains them alone, the rest frozen. (SF and DF use
    # multi-query attention and need their own stage 1: a full training more.)
    Run("factorized_pa", headline=True, control="Mixed (continued)", full=True),
)
#: The baseline of the comparisons; the fine-tuning baselines continue it on one domain each.
BASELINE = SYSTEMS[0]
SEED_ROW = "Mixed (seed 2)"
SEED = 2
#: The demo's LDR row and its equal-compute control.
LDR_ROW = "LDR (summed)"
EQUAL_PASSES = "Mixed (equal passes)"
#: The systems that read domain labels (the findings compare their label modes).
LABEL_SYSTEMS = tuple(run.name for run in SYSTEMS if run.headline and run is not BASELINE)
#: The systems of the contrastive lexical-choice test (every label mode for those above).
CONTRASTIVE_SYSTEMS = (BASELINE.name,) + LABEL_SYSTEMS

#: Below this average BLEU a row is too weak for its differences to mean much (issue 14's bar
#: for every row of the main table but the fine-tuned ones, whose forgetting is the point).
TRANSLATES = 10.0

#: About what --full adds to the default run (Mixed's second seed, DC, LDR^1, Mixing, Factorized
#: PA and its control, trained and evaluated).
FULL_EXTRA_MINUTES = 30

#: The command the report names (``bash run/demo.sh`` and the arguments given).
DEMO_COMMAND = ["bash", "run/demo.sh"]
#: The report's layout, part of its stamp: 2 since its first line is :data:`PROVENANCE`
#: (a report of layout 1 is written again, from the same results, by the next run).
REPORT_LAYOUT = 2

BUDGETS = {
    # The recipe of the small models and the measurements that chose it (2026-11-23/24: the
    # batch size, the sampling, the steps): docs/demo.md, "How the demo spends its 30 minutes".
    "default": {
        "steps": 4500,
        "warmup": 800,
        "batch_size": 1024,
        "alpha": 0.5,
        "max_length": 80,
        "finetune_steps": 250,
        "stage2_steps": 400,
        "classifier_steps": 400,
        "eval_sentences": 200,
        # Each system is evaluated in its lane as soon as it is trained (one process each).
        "evaluate_in_lanes": True,
        "contrastive_items": 500,
        "examples": 2,
        "log_steps": 100,
        "max_decoding_length": 100,
    },
    "quick": {
        "steps": 60,
        "warmup": 30,
        "batch_size": 1024,
        "alpha": 0.5,
        "max_length": 80,
        "finetune_steps": 10,
        "stage2_steps": 10,
        "classifier_steps": 30,
        "eval_sentences": 20,
        # A smoke run: the start-up of a process per evaluation would cost more than it saves.
        "evaluate_in_lanes": False,
        "contrastive_items": 60,
        "examples": 1,
        "log_steps": 20,
        "max_decoding_length": 30,
    },
}


def _finetune_config(domain, base_config, budget, runs_dir, slug=None):
    config = {
        "model_dir": os.path.join(runs_dir, slug or "ft_%s" % domain),
        "finetune": {
            "base": base_config["model_dir"],
            "domain": domain,
            "steps": budget["finetune_steps"],
        },
        "params": base_config["params"],
        "train": {
            "save_summary_steps": max(budget["finetune_steps"] // 4, 1),
            "save_checkpoints_steps": budget["finetune_steps"],
            "maximum_features_length": budget["max_length"],
            "maximum_labels_length": budget["max_length"],
            "batch_size": budget["batch_size"],
        },
    }
    return config


def _stage2_config(slug, base_config, budget, runs_dir, unfold=True):
    """The stage 2 of a family on top of its trained stage-1 system (``finetune: unfold``
    for Factorized PA, the base frozen otherwise): its schedule continues (the step count
    goes on from the base's)."""
    steps = budget["stage2_steps"]
    train = dict(base_config["train"], save_summary_steps=max(steps // 4, 1))
    train["save_checkpoints_steps"] = steps
    del train["max_step"]  # finetune: steps sets it.
    # A stage 1 of the family's own trained its general copies (domain_training: general);
    # stage 2 trains the domain blocks (the finetune mode's default).
    params = {k: v for k, v in base_config["params"].items() if k != "domain_training"}
    finetune = {"base": base_config["model_dir"], "steps": steps}
    if unfold:
        finetune["unfold"] = True
    return {
        "model_dir": os.path.join(runs_dir, slug),
        "data": dict(common.MIXED_BATCHES),
        "finetune": finetune,
        "params": params,
        "train": train,
    }


def _continued_config(slug, base_config, budget, runs_dir):
    """A trained system continued for ``budget["stage2_steps"]`` steps with every parameter
    trained, on its own data and schedule (the step count goes on from the base's): the
    equal-compute controls (``finetune`` without a domain nor ``unfold``: nothing frozen)."""
    steps = budget["stage2_steps"]
    train = dict(base_config["train"], save_summary_steps=max(steps // 4, 1))
    train["save_checkpoints_steps"] = steps
    del train["max_step"]  # finetune: steps sets it.
    return {
        "model_dir": os.path.join(runs_dir, slug),
        "data": dict(base_config.get("data") or common.MIXED_BATCHES),
        "finetune": {"base": base_config["model_dir"], "steps": steps},
        "params": dict(base_config["params"]),
        "train": train,
    }


def classifier_config(budget, runs_dir):
    """The run configuration of the small domain classifier (budget: ``classifier_steps``,
    ``log_steps``)."""
    return {
        "model_dir": os.path.join(runs_dir, "classifier"),
        "params": {"optimizer": "Adam", "learning_rate": 0.002},
        "train": {
            "batch_type": "examples",
            "batch_size": 64,
            "max_step": budget["classifier_steps"],
            "sample_buffer_size": 50000,
            "save_summary_steps": budget["log_steps"],
            "save_checkpoints_steps": budget["classifier_steps"],
        },
        "infer": {"batch_size": 64},
    }


@dataclasses.dataclass
class Trained:
    """A trained system, as the evaluation stages see it.

    Attributes:
      name: Its row name.
      slug: Its directory and training stage name.
      config_paths: Its run configuration files.
      model_dir: Its model directory.
      modes: Its label modes (``None``: it ignores labels).
      reads_labels: Whether its translations read the label.
    """

    name: str
    slug: str
    config_paths: list
    model_dir: str
    modes: Optional[Tuple[str, ...]]
    reads_labels: bool

    @property
    def file_name(self):
        """The name of its evaluation files (``NAME.oracle.fr``)."""
        return systems_lib.system_file_name(self.name)

    @functools.cached_property
    def system(self):
        """Its :class:`ldr_opennmt.evaluation.evaluate.System`, once trained (one object:
        its model is loaded once in this process)."""
        return evaluate.System(self.name, self.config_paths, self.modes)
