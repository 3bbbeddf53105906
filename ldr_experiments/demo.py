"""The README's main command (``docs/demo.md``): the whole multi-domain experiment on the
default corpus.

    bash run/demo.sh [--quick] [--full]
    PYTHONPATH=run python -m experiments.demo [--quick] [--full]    # the same, from the root

The experiment is a list of declared stages (:class:`ldr_experiments.common.Stage`), each with
its inputs, its outputs and a stamp of what it depends on (:mod:`ldr_opennmt.stamps`):

1. ``corpus``: builds the default corpus (``ldr-data build default``, cleaning filters
   reported; its stamp is the corpus's own ``DONE``) and ``items``, the contrastive items
   from it;
2. one training stage per system of :data:`SYSTEMS` (named by its directory: ``mixed``,
   ``ldr``, ...), a short list of registry families
   (:mod:`ldr_opennmt.registry`: model definition, row title, stage-1 family and label
   modes are the registry's) with this run's options: Mixed (twice: seeds 1 and 2, the
   run-to-run spread every difference is judged by) and LDR, small Transformers from
   ``model_defs/small/``, trained with ``ldr-main`` on per-domain corpora
   (``data_configs/default_corpora.yml``), and Factorized PA with the paper's curriculum,
   Mixed being its stage 1 (unfold, then stage 2 on the domain blocks alone); ``--full``
   adds DC, LDR^1 (alpha = 1) and word-level domain mixing;
3. fine-tunes Mixed on each domain (the FT_* baselines), trains a domain classifier and
   labels the test sets with it (LDR_pred);
4. ``eval_<system>``, one stage per system: its test translations (``ldr-eval``) with oracle,
   generic and wrong labels for the families that read them, predicted labels for LDR;
5. ``contrastive_<system>``, one stage per system of the contrastive lexical-choice test
   (``ldr-eval contrastive``): Mixed, DC, LDR and Factorized PA in every label mode;
6. ``score`` (BLEU, chrF, significance, the contrastive summary) and ``report``:
   ``report.md`` with the corpus and cleaning tables, classifier precision/recall, BLEU and
   chrF tables with the seed spread, the contrastive tables, "what this shows and what it
   cannot" (generated from the figures), example translations, time and speed per stage,
   configurations and the commands to rerun any step. Its first line says when (UTC), on
   which machine (CPU model and cores, from ``/proc/cpuinfo``) and by which command it was
   written (:func:`provenance`): facts the report stage's stamp file records, never compares,
   so that a rerun with the same inputs keeps the report and the line that dates it.

A stage is skipped while its stamp matches (the same checkpoint files, configuration,
input files and options; ``OUT/stages/NAME.json``), saying so; one whose inputs changed
runs again, saying what changed, after removing what it made from the former inputs. So
``--quick``, ``--full`` after the default run and a rerun after a crash all reuse what is
done: an interrupted training continues from its last checkpoint, and a rerun with
nothing changed takes seconds.
"""

import argparse
import dataclasses
import datetime
import functools
import json
import os
import platform
import sys
import time
from typing import Any, Mapping, Optional, Tuple

from ldr_experiments import engine
from ldr_opennmt import config_loader, errors, registry, stamps
from ldr_opennmt.data import corpus as corpus_lib
from ldr_opennmt.data import filters
from ldr_opennmt.evaluation import classification, contrastive, evaluate
from ldr_opennmt.evaluation import systems as systems_lib
from ldr_opennmt.utils import DEFAULT_CACHE, copy_file_atomic, write_lines_atomic

from . import baselines, common
from .common import ROOT

DATA_CONFIG = "data_configs/default_corpora.yml"
CLASSIFIER_DEF = "model_defs/small/domain_classifier.py"
#: The label modes of a family that reads domain labels at translation.
LABEL_MODES = ("oracle", "generic", "wrong")


@dataclasses.dataclass(frozen=True)
class Run:
    """A system of the demo: a family of the registry and the options of this run.

    Attributes:
      family: The family's registry name: its model definition (``small_def``), its row
        title, its stage-1 family and ``finetune`` mode, the label modes it is evaluated
        with (its capabilities) are the registry's.
      suffix: Added to the family's title in the row name (``"Mixed" + " (seed 2)"``).
      row: The row name instead of the title and suffix.
      slug: Its directory and stage name (default: the family name without
        ``_transformer``).
      params: ``params`` options of its run configuration.
      train: ``train`` options of its run configuration.
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
    """

    family: str
    suffix: str = ""
    row: Optional[str] = None
    slug: Optional[str] = None
    params: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    train: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    seed: int = 1
    modes: Optional[Tuple[str, ...]] = None
    pred: bool = False
    headline: bool = False
    full: bool = False
    model_defs: Optional[Mapping[str, str]] = None
    curriculum: bool = False

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
        from . import systems  # The repository's files per family.

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
        return registry.capabilities(self.family).labels == registry.LABEL_NEEDED

    def label_modes(self):
        """The label modes it is translated with (``None``: it ignores labels)."""
        if self.modes is not None:
            return tuple(self.modes)
        if not self.reads_labels:
            return None
        return LABEL_MODES + (("pred",) if self.pred else ())


#: The demo's LDR model definitions: the output layer tied like the Mixed baseline's at each
#: scale (the registry's small_def of mixed_transformer is tied, its model_def is not).
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
    # Mixed again with another seed: the run-to-run spread every difference is judged by.
    Run("mixed_transformer", suffix=" (seed 2)", slug="mixed_seed2", seed=2),
    # DC (domain control: a domain tag embedding) under --full: the default run's 30
    # minutes hold Mixed twice, LDR and the systems that start from Mixed.
    Run("dc_transformer", headline=True, full=True),
    # LDR with its output layer tied like Mixed's at each scale (small: tied, paper: its
    # own, as model_defs/mixed_transformer.py): the tables found that an output layer of
    # its own is worth +3.8 BLEU at the demo's size, the whole of LDR's former gain on a
    # tied Mixed. Its control differs from it by the method alone (findings: "control").
    Run(
        "ldr_transformer",
        params={"domain_training": "procedure1"},
        pred=True,
        headline=True,
        model_defs=LDR_DEFS,
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
    # Transformer's attention shapes, so the converged Mixed model is unfolded into PA's
    # domain blocks and stage 2 trains them alone, the rest frozen. (SF and DF use
    # multi-query attention and need their own stage 1: a full training more.)
    Run("factorized_pa", headline=True),
)
#: The baseline of the comparisons; the fine-tuning baselines continue it on one domain each.
BASELINE = SYSTEMS[0]
FINETUNE_BASE = BASELINE.name
SEED_ROW = SYSTEMS[1].name
SEED = SYSTEMS[1].seed
#: The systems that read domain labels (the findings compare their label modes).
LABEL_SYSTEMS = tuple(run.name for run in SYSTEMS if run.headline and run is not BASELINE)
#: The systems of the contrastive lexical-choice test (every label mode for those above).
CONTRASTIVE_SYSTEMS = (BASELINE.name,) + LABEL_SYSTEMS

#: Below this average BLEU a row is too weak for its differences to mean much (issue 14's bar
#: for every row of the main table but the fine-tuned ones, whose forgetting is the point).
TRANSLATES = 10.0

#: About what --full adds to the default run (DC, LDR^1 and Mixing, trained and evaluated).
FULL_EXTRA_MINUTES = 20

#: The report's first line (:func:`provenance_line`): when (UTC), on which machine and by
#: which command it was written. ``docs/_ext/ldr_docs.py`` reads it back.
PROVENANCE = "Written %(written)s on %(machine)s by `%(command)s`."
#: The command the report names (``bash run/demo.sh`` and the arguments given).
DEMO_COMMAND = ["bash", "run/demo.sh"]
#: The report's layout, part of its stamp: 2 since its first line is :data:`PROVENANCE`
#: (a report of layout 1 is written again, from the same results, by the next run).
REPORT_LAYOUT = 2

BUDGETS = {
    # The recipe of the small models (measured 2026-11-23 on the README's 2-core machine,
    # BLEU on the first 200 test sentences per domain): batches mixing domains with
    # alpha = 0.5 (medical and software, short segments, 31% and 16% of the sentences
    # instead of 24% and 6%), training pairs capped at 80 tokens, target embeddings tied.
    # Batches of 1024 tokens beat 2048 at equal tokens (twice the updates): Mixed averaged
    # 10.8 BLEU after 2250 steps of 1024 tokens against 8.4 after 1125 steps of 2048, and
    # 14.6 after 3000 against 11.9 after 1500. Measured 2026-11-24 (one core per lane):
    # 0.13 s per Mixed step, 0.23 s per Procedure 1 LDR step; Mixed averaged 14.0 BLEU
    # after 2500 steps, 15.9 after 3000, 16.6 after 3500, 20.0 after 4500, and a run of
    # 4000 steps left the two Mixed seeds 3.2 apart (17.8 and 14.6). So the default takes
    # 4500 steps: 28 minutes at that speed (the two runs and their tables: docs/demo.md, "Two
    # default runs, recorded by hand"); on a slower host it takes longer, and the report
    # prints the time per step it measured and the machine it ran on.
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


def _finetune_config(domain, base_config, budget, runs_dir):
    config = {
        "model_dir": os.path.join(runs_dir, "ft_%s" % domain),
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


class Plan:
    """The demo's paths and budget, and the stages that build its results.

    Args:
      args: The parsed command line (``data``, ``cache``; optional ``scale``).
      budget: The budget (:data:`BUDGETS`).
      steps: The :class:`ldr_experiments.common.Steps` of the results directory.
      baseline: The :class:`Run` the others are compared with and the FT_* rows continue.
      contrastive_systems: The row names of the contrastive lexical-choice test.
      data_config: The data configuration every system trains with.
    """

    def __init__(
        self,
        args,
        budget,
        steps,
        baseline=None,
        contrastive_systems=None,
        data_config=DATA_CONFIG,
    ):
        self.data = args.data
        self.cache = args.cache
        self.scale = getattr(args, "scale", "small")
        self.budget = budget
        self.steps = steps
        self.baseline = baseline or BASELINE
        self.contrastive_systems = tuple(
            CONTRASTIVE_SYSTEMS if contrastive_systems is None else contrastive_systems
        )
        self.data_config_source = data_config
        #: Evaluate every this many steps (per-domain dev loss, ``--with_eval``) the
        #: trainings that continue a trained model (stage 2, FT_*): their curves. ``None``:
        #: no evaluation during training (the demo).
        self.curve_every = None
        out = steps.out
        self.eval_dir = os.path.join(out, "eval")
        self.contrastive_dir = os.path.join(out, "contrastive")
        self.items_path = os.path.join(self.contrastive_dir, "items.jsonl")
        self.pred_dir = os.path.join(out, "pred")
        self.scores_path = os.path.join(self.eval_dir, "scores.json")
        self.contrastive_path = os.path.join(self.contrastive_dir, contrastive.RESULTS_FILE)
        self.classification_path = os.path.join(self.pred_dir, "classification.json")
        #: The report's layout, part of its stamp: a new one rewrites a report.
        self.report_layout = REPORT_LAYOUT
        self.data_config = None  # Written once the corpus is there (write_data_config).
        self.domains = self.source = self.target = None
        self.trained = []

    # Paths.

    def _config(self, config, slug):
        return common.write_config(config, os.path.join(self.steps.configs_dir, "%s.yml" % slug))

    def _corpus_file(self, *names):
        return os.path.join(self.data, *names)

    def _test_files(self, extensions=None):
        """The test files (source, target, labels) of every domain."""
        extensions = extensions or (self.source, self.target, "domain")
        return [
            self._corpus_file("test.%s.%s" % (domain, extension))
            for domain in self.domains
            for extension in extensions
        ]

    def _pred_files(self):
        return [os.path.join(self.pred_dir, "test.%s.pred" % d) for d in self.domains]

    def _corpus_digest(self):
        return stamps.file_digest(self._corpus_file(corpus_lib.DONE_FILE))

    # Stage 1: the corpus and the contrastive items.

    def corpus_stage(self):
        """Builds the default corpus; its stamp is the corpus's own (``DONE``)."""
        self.steps.commands.append(
            (
                "Build the corpus",
                ["ldr-data", "build", "default", "--out", self.data, "--cache", self.cache],
            )
        )
        return common.Stage(
            "corpus",
            "corpus",
            "1/6",
            corpus_lib.default_stamp,
            [self._corpus_file("corpus.json")],
            lambda cores: common.prepare_corpus(self.data, self.cache),
            owns=(),
            stamp_path=self._corpus_file(corpus_lib.DONE_FILE),
        )

    def write_data_config(self, info):
        """Writes the data configuration every system trains with (after the corpus)."""
        self.domains = info["domains"]
        self.source, self.target = info["source_lang"], info["target_lang"]
        self.data_config = common.write_config(
            common.load_yaml(self.data_config_source),
            os.path.join(self.steps.configs_dir, "data.yml"),
        )

    def items_stage(self):
        """The contrastive items, built from the corpus."""
        maximum = self.budget["contrastive_items"]
        stem = os.path.splitext(self.items_path)[0]
        return common.Stage(
            "items",
            "contrastive items",
            "1/6",
            lambda: stamps.make_stamp(corpus=self._corpus_digest(), max_items=maximum),
            [self.items_path],
            lambda cores: self._build_items(maximum),
            owns=[self.items_path, stem + ".lexicon.json", stem + ".md"],
        )

    def _build_items(self, maximum):
        os.makedirs(self.contrastive_dir, exist_ok=True)
        contrastive.build_items(self.data, self.items_path, max_items=maximum)

    # Stages 2 and 3: the trainings.

    def training_stages(self, runs):
        """One training stage per system of :obj:`runs` (:class:`Run`), then the fine-tuning
        baselines and the domain classifier with its predictions."""
        budget, runs_dir = self.budget, self.steps.runs_dir
        stages, configs = [], {}
        scratch = [run for run in runs if run.definition.stage1 is None]
        stage1_configs = {}
        for index, run in enumerate(scratch):
            params, slug, title = dict(run.params), run.directory, run.name
            if run.curriculum:
                # Its own stage 1: every sentence as generic (the general copies).
                params["domain_training"] = "general"
                slug += "_stage1"
                title += " stage 1 (domain-agnostic, %d steps)" % budget["steps"]
            data = dict(common.MIXED_BATCHES)
            if registry.capabilities(run.family).domain_tokens:
                # Targets that start with a domain token (TTM): a target vocabulary with
                # the domain tokens appended.
                data["target_vocabulary"] = baselines.domain_token_vocabulary(
                    self.data_config_source,
                    os.path.join(self.steps.configs_dir, "%s_target_vocabulary.txt" % slug),
                )
            config = common.train_config(slug, params, dict(run.train), budget, runs_dir, data=data)
            if run.curriculum:
                stage1_configs[run.directory] = config
            else:
                configs[run.family] = configs.get(run.family, config)
            stages.append(
                self._train(
                    run,
                    config,
                    title,
                    budget["steps"],
                    "2/6 (%d/%d)" % (index + 1, len(scratch)),
                    options=("--seed", str(run.seed)),
                    slug=slug,
                    evaluated=not run.curriculum,
                )
            )
        for run in runs:
            family = run.definition
            if run.curriculum:
                base_config, base_slug, finetune = (
                    stage1_configs[run.directory],
                    run.directory + "_stage1",
                    "unfold",
                )
                how = "its stage 1 unfolded, domain blocks"
            elif family.stage1 is not None:
                base = [r for r in scratch if r.family == family.stage1][0]
                base_config, base_slug, finetune = (
                    configs[base.family],
                    base.directory,
                    family.finetune,
                )
                how = (
                    "%s unfolded, domain blocks" if finetune == "unfold" else "on a frozen %s"
                ) % base.name
            else:
                continue
            config = _stage2_config(
                run.directory, base_config, budget, runs_dir, finetune == "unfold"
            )
            title = "%s stage 2 (%s, %d steps)" % (run.name, how, budget["stage2_steps"])
            final = budget["steps"] + budget["stage2_steps"]
            stages.append(
                self._train(run, config, title, final, "2/6", after=[base_slug], curve=True)
            )
        for domain in self.domains:
            baseline = self.baseline
            config = _finetune_config(domain, configs[baseline.family], budget, runs_dir)
            run = Run(
                baseline.family,
                row="FT_%s" % domain,
                slug="ft_%s" % domain,
                modes=("oracle",),
                model_defs=baseline.model_defs,
            )
            final, after = budget["steps"] + budget["finetune_steps"], [baseline.directory]
            stages.append(self._train(run, config, run.name, final, "3/6", after=after, curve=True))
        return stages + self._classifier_stages()

    def _train(
        self,
        run,
        config,
        title,
        final_step,
        progress,
        options=(),
        after=(),
        slug=None,
        evaluated=True,
        curve=False,
    ):
        """Declares a system's training (and, when :obj:`evaluated`, its evaluation's
        :class:`Trained`; a stage 1 of its own is not evaluated). A :obj:`curve` training
        (one that continues a trained model) is evaluated on the dev sets every
        :attr:`curve_every` steps when that is set."""
        slug = slug or run.directory
        train_options = ()
        if curve and self.curve_every:
            # The dev loss of each domain (no scorer: decoding the dev sets at every point
            # would cost more than the training).
            config = dict(config, eval={"steps": self.curve_every, "scorers": []})
            train_options = ("--with_eval",)
        paths = [self.data_config, self._config(config, slug)]
        model_dir, model_def = config["model_dir"], run.model_def(self.scale)
        if evaluated:
            trained = Trained(
                run.name, run.directory, paths, model_dir, run.label_modes(), run.reads_labels
            )
            self.trained.append(trained)
        return self.steps.train_stage(
            title,
            slug,
            model_def,
            paths,
            model_dir,
            final_step,
            progress,
            options,
            after,
            train_options=train_options,
        )

    def _classifier_stages(self):
        classifier = classifier_config(self.budget, self.steps.runs_dir)
        path = self._config(classifier, "classifier")
        train = self.steps.train_stage(
            "the domain classifier",
            "classifier",
            CLASSIFIER_DEF,
            [self.data_config, path],
            classifier["model_dir"],
            self.budget["classifier_steps"],
            "3/6",
        )
        features = self._test_files((self.source,))
        labels = self._test_files(("domain",))
        command = ["ldr-main", "--config", self.data_config, path, "predict_domains"]
        command += ["--features_file"] + features + ["--labels_file"] + labels
        command += ["--output_dir", self.pred_dir, "--model_config", self.data_config]
        self.steps.commands.append(("Predict the test sets' domains", command))
        outputs = [self.classification_path] + self._pred_files()

        def stamp():
            return stamps.make_stamp(
                checkpoint=common.checkpoint_digest(classifier["model_dir"]),
                config=config_loader.load_run_config([self.data_config, path]),
                test=stamps.files_digest(features + labels),
            )

        predict = common.Stage(
            "predict",
            "predict the test sets' domains",
            "3/6",
            stamp,
            outputs,
            lambda cores: self.steps.run_command("predict", command, cores),
            after=["classifier"],
        )
        return [train, predict]

    # Stages 4 and 5: each system's translations and contrastive scores.

    def evaluation_stages(self, in_lanes):
        """Per system, its translation stage and (for the contrastive systems) its
        contrastive scoring stage: ``ldr-eval --cache-only`` processes in the lanes
        (:obj:`in_lanes`), else calls in this process."""
        stages = []
        for trained in self.trained:
            stages.append(self._translate_stage(trained, in_lanes))
            if trained.name in self.contrastive_systems:
                stages.append(self._contrastive_stage(trained, in_lanes))
        return stages

    def translations(self, trained):
        """The translation files of a system (one per label mode)."""
        return [
            os.path.join(self.eval_dir, "%s.%s.%s" % (trained.file_name, mode, self.target))
            for mode in trained.modes or ("oracle",)
        ]

    def contrastive_scores(self, trained):
        """The contrastive score files of a system (one per label mode)."""
        modes = contrastive.MODES if trained.reads_labels else ("oracle",)
        return [
            os.path.join(
                self.contrastive_dir, "%s.%s.contrastive.jsonl" % (trained.file_name, mode)
            )
            for mode in modes
        ]

    def _translate_stage(self, trained, in_lanes):
        sentences = self.budget["eval_sentences"]
        pred = "pred" in (trained.modes or ())
        command = ["ldr-eval", "--corpus", self.data, "--out", self.eval_dir]
        command += _system_args(trained.name, trained.config_paths, trained.modes)
        command += _max_sentences(sentences) + ["--cache-only"]
        command += ["--pred-dir", self.pred_dir] if pred else []

        def stamp():
            return stamps.make_stamp(
                checkpoint=common.checkpoint_digest(trained.model_dir),
                config=config_loader.load_run_config(trained.config_paths),
                test=stamps.files_digest(self._test_files()),
                pred=stamps.files_digest(self._pred_files()) if pred else None,
                modes=trained.modes,
                sentences=sentences,
            )

        def run(cores):
            if in_lanes:
                return self.steps.run_command("eval_" + trained.slug, command, cores)
            evaluate.evaluate(
                self.data,
                [trained.system],
                self.eval_dir,
                max_sentences=sentences,
                pred_dir=self.pred_dir,
                cache_only=True,
            )

        outputs = self.translations(trained)
        # And the evaluation's own stamp of them: they are its only under it.
        owns = outputs + [os.path.join(self.eval_dir, trained.file_name + ".stamp")]
        after = [trained.slug] + (["predict"] if pred else [])
        title = "translate %s" % trained.name
        return common.Stage(
            "eval_" + trained.slug,
            title,
            "4/6",
            stamp,
            outputs,
            run,
            after,
            owns,
            kind=engine.EVALUATE,
        )

    def _contrastive_stage(self, trained, in_lanes):
        command = ["ldr-eval", "contrastive", "--corpus", self.data]
        command += ["--out", self.contrastive_dir, "--items", self.items_path]
        command += _system_args(trained.name, trained.config_paths) + ["--cache-only"]

        def stamp():
            return stamps.make_stamp(
                checkpoint=common.checkpoint_digest(trained.model_dir),
                config=config_loader.load_run_config(trained.config_paths),
                items=stamps.file_digest(self.items_path),
                corpus=self._corpus_digest(),
            )

        def run(cores):
            if in_lanes:
                return self.steps.run_command("contrastive_" + trained.slug, command, cores)
            contrastive.evaluate(
                self.data,
                [trained.system],
                self.contrastive_dir,
                items_path=self.items_path,
                cache_only=True,
            )

        outputs = self.contrastive_scores(trained)
        stamp_file = os.path.join(self.contrastive_dir, trained.file_name + ".contrastive.stamp")
        after = [trained.slug, "items"]
        title = "contrastive %s" % trained.name
        return common.Stage(
            "contrastive_" + trained.slug,
            title,
            "5/6",
            stamp,
            outputs,
            run,
            after,
            outputs + [stamp_file],
            kind=engine.EVALUATE,
        )

    # Stage 6: the scores and the report.

    def score_stage(self):
        """BLEU, chrF and their significance of every system, and the contrastive summary:
        ``eval/scores.json`` and ``contrastive/contrastive.json`` (:meth:`results`)."""
        budget = self.budget
        scored = [t for t in self.trained if t.name in self.contrastive_systems]
        command = ["ldr-eval", "--corpus", self.data, "--out", self.eval_dir]
        command += ["--baseline", self.baseline.name]
        for trained in self.trained:
            command += _system_args(trained.name, trained.config_paths, trained.modes)
        command += ["--pred-dir", self.pred_dir]
        command += _max_sentences(budget["eval_sentences"])
        self.steps.commands.append(("Evaluate", command))
        command = ["ldr-eval", "contrastive", "--corpus", self.data]
        command += ["--out", self.contrastive_dir, "--items", self.items_path]
        for trained in scored:
            command += _system_args(trained.name, trained.config_paths)
        self.steps.commands.append(("Contrastive lexical choice", command))
        chart = os.path.join(self.steps.out, "bleu.png")
        outputs = [
            self.scores_path,
            os.path.join(self.eval_dir, "table.md"),
            os.path.join(self.eval_dir, "bleu.png"),
            chart,
            self.contrastive_path,
            os.path.join(self.contrastive_dir, contrastive.TABLE_FILE),
            os.path.join(self.contrastive_dir, contrastive.CHART_FILE),
        ]

        def stamp():
            return stamps.make_stamp(
                systems=[[t.name, t.modes] for t in self.trained],
                contrastive_systems=[t.name for t in scored],
                baseline=self.baseline.name,
                sentences=budget["eval_sentences"],
                test=stamps.files_digest(self._test_files()),
                translations=stamps.files_digest(
                    [path for t in self.trained for path in self.translations(t)]
                ),
                items=stamps.file_digest(self.items_path),
                contrastive_scores=stamps.files_digest(
                    [path for t in scored for path in self.contrastive_scores(t)]
                ),
            )

        def run(cores):
            systems = [t.system for t in self.trained]
            evaluate.evaluate(
                self.data,
                systems,
                self.eval_dir,
                baseline=self.baseline.name,
                max_sentences=budget["eval_sentences"],
                pred_dir=self.pred_dir,
            )
            copy_file_atomic(os.path.join(self.eval_dir, "bleu.png"), chart)
            contrastive.evaluate(
                self.data,
                [t.system for t in scored],
                self.contrastive_dir,
                items_path=self.items_path,
            )

        return common.Stage("score", "scores, significance, tables", "4-5/6", stamp, outputs, run)

    def results(self):
        """``(BLEU results, contrastive results, classifier scores)``, as the score and
        predict stages wrote them."""
        loaded = []
        for path in (self.scores_path, self.contrastive_path, self.classification_path):
            with open(path, encoding="utf-8") as f:
                loaded.append(json.load(f))
        return tuple(loaded)

    def report_inputs(self):
        """The result files the report is written from (part of its stamp)."""
        return [self.scores_path, self.contrastive_path, self.classification_path]

    def report_stage(self, write, mode, start, command):
        """Writes ``report.md`` (:obj:`write`: a callable of the total time) from the
        results, the configurations and the commands.

        Its first line is :func:`provenance_line`: the date, the machine and
        :obj:`command` (the demo's command line, a list). They are recorded, not compared:
        the stage writes its stamp file itself (``OUT/stages/report.json``, after the
        report) with them in the record (:func:`ldr_opennmt.stamps.write`), so that a rerun
        with the same inputs keeps the report and the line that dates it. (Rows of its time
        table marked "earlier run" were measured by an earlier run of the same stages.)
        """
        path = os.path.join(self.steps.out, "report.md")
        stamp_path = os.path.join(self.steps.stages_dir, "report.json")
        configs_dir = self.steps.configs_dir
        due = {}

        def stamp():
            configs = sorted(os.listdir(configs_dir))
            due["stamp"] = stamps.make_stamp(
                layout=self.report_layout,
                mode=mode,
                budget=self.budget,
                results=stamps.files_digest(self.report_inputs()),
                corpus=stamps.file_digest(self._corpus_file("corpus.json")),
                configs=[
                    [name, stamps.file_digest(os.path.join(configs_dir, name))] for name in configs
                ],
                commands=self.steps.commands,
            )
            return due["stamp"]

        def run(cores):
            record = provenance(command)
            lines = [provenance_line(record), ""] + write(time.time() - start).splitlines()
            write_lines_atomic(path, lines)
            # After the report: a stamp file is never ahead of what it vouches for.
            stamps.write(stamp_path, due["stamp"], complete=True, **record)

        return common.Stage(
            "report", "report", "6/6", stamp, [path], run, stamp_path=stamp_path, timed=False
        )


def cpu_model(cpuinfo):
    """The CPU model of a ``/proc/cpuinfo`` text (its first ``model name``; ``Model`` or
    ``cpu model`` on other architectures), or ``None``."""
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("model name", "Model", "cpu model") and value.strip():
            return value.strip()
    return None


def machine(cpuinfo_path="/proc/cpuinfo"):
    """This machine in a few words: its CPU model (:func:`cpu_model` of
    :obj:`cpuinfo_path`, else :func:`platform.processor`) and core count, e.g.
    ``AMD EPYC 7B13 (2 cores)``; ``(8 cores, 2 usable)`` when this process may run on
    fewer."""
    try:
        with open(cpuinfo_path, encoding="utf-8", errors="replace") as f:
            model = cpu_model(f.read())
    except OSError:
        model = None
    model = model or platform.processor() or platform.machine() or "an unknown CPU"
    cores = os.cpu_count() or 0
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:  # Not on Linux.
        usable = cores
    if usable and usable != cores:
        return "%s (%d cores, %d usable)" % (model, cores, usable)
    return "%s (%d cores)" % (model, cores)


def provenance(command, now=None):
    """What the report's first line says: ``{"written": "YYYY-MM-DD HH:MM UTC", "machine":
    ..., "command": ...}`` (:obj:`command`: a list, shell-quoted here; :obj:`now`: an aware
    :class:`datetime.datetime`, default the current time)."""
    now = now or datetime.datetime.now(datetime.timezone.utc)
    return {
        "written": now.astimezone(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": machine(),
        "command": common.command_line(command),
    }


def provenance_line(record):
    """The report's first line (:data:`PROVENANCE`) from a :func:`provenance` record."""
    return PROVENANCE % record


def _arguments(argv):
    """``(args, budget)`` of the command line (``args.out`` set, ``args.mode`` the run's)."""
    parser = argparse.ArgumentParser(description="Run the multi-domain demo experiment.")
    parser.add_argument("--quick", action="store_true", help="smaller budgets (about 5 minutes)")
    parser.add_argument(
        "--full",
        action="store_true",
        help="also train DC, LDR^1 (alpha = 1) and word-level domain mixing (about %d more "
        "minutes)" % FULL_EXTRA_MINUTES,
    )
    parser.add_argument(
        "--steps",
        type=int,
        help="training steps of the systems trained from scratch (default %d; %d with --quick);"
        " a run with other steps in the same --out trains every system again"
        % (BUDGETS["default"]["steps"], BUDGETS["quick"]["steps"]),
    )
    parser.add_argument("--out", help="results directory (default results/demo[-quick])")
    parser.add_argument("--data", default="data/default", help="corpus directory")
    parser.add_argument("--cache", default=DEFAULT_CACHE)
    args = parser.parse_args(argv)
    budget = dict(BUDGETS["quick" if args.quick else "default"])
    if args.steps is not None:
        if args.steps < 1:
            raise SystemExit("--steps must be >= 1, got %d" % args.steps)
        budget["steps"] = args.steps
    if args.data != "data/default":
        raise SystemExit(
            "the demo's data configuration reads data/default; use --data data/default"
        )
    args.out = args.out or ("results/demo-quick" if args.quick else "results/demo")
    args.mode = ("quick" if args.quick else "default") + (", --full" if args.full else "")
    return args, budget


@engine.driver("demo")
def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    args, budget = _arguments(argv)
    os.chdir(ROOT)
    steps = common.Steps(args.out)  # A link given as --out is resolved once.
    plan = Plan(args, budget, steps)
    start = time.time()

    steps.run_stages([plan.corpus_stage()])
    info = corpus_lib.load_info(args.data)
    plan.write_data_config(info)
    # Two lanes (one core each on the README's 2-core machine) run the stages side by side,
    # the longest first (_by_priority). With budget["evaluate_in_lanes"], each system is
    # translated and scored in its lane (an ldr-eval process) as soon as it is trained;
    # otherwise in this process after the trainings.
    lanes = 2
    in_lanes = budget["evaluate_in_lanes"]
    runs = [run for run in SYSTEMS if args.full or not run.full]
    parallel = [plan.items_stage()] + plan.training_stages(runs)
    evaluation = plan.evaluation_stages(in_lanes)
    if in_lanes:
        parallel, evaluation = parallel + evaluation, []
    common.log(
        "[demo] 2-5/6 %d stages (trainings, translations of %d test sentences per domain,"
        " contrastive scores)" % (len(parallel) + len(evaluation), budget["eval_sentences"])
    )
    steps.run_stages(_by_priority(parallel), lanes)
    steps.run_stages(evaluation + [plan.score_stage()])

    results, contrastive_results, classifier_scores = plan.results()
    spread = seed_spread(results)
    extras = {
        "spread": spread,
        "contrastive": contrastive.format_tables(contrastive_results),
        "findings": findings(
            results,
            spread,
            contrastive_rates(contrastive_results),
            output_layers=common.output_layers(plan),
            steps=budget["steps"],
        ),
        "examples": evaluate.examples(
            args.data, results, per_domain=budget["examples"], rows=_example_rows(results)
        ),
    }
    write = functools.partial(
        _report,
        args.mode,
        info,
        results,
        classifier_scores,
        steps,
        configs_dir=steps.configs_dir,
        budget=budget,
        extras=extras,
    )
    steps.run_stages([plan.report_stage(write, args.mode, start, DEMO_COMMAND + argv)])
    print(classification.format_table(classifier_scores))
    print(evaluate.format_tables(results))
    print("\n".join(extras["findings"]))
    common.log(
        "[demo] 6/6 report: %s (total %.1f min)"
        % (os.path.join(steps.out, "report.md"), (time.time() - start) / 60)
    )
    return 0


def _max_sentences(sentences):
    """``ldr-eval``'s ``--max-sentences`` option (none for ``None``: the whole test sets)."""
    return [] if sentences is None else ["--max-sentences", str(sentences)]


def _system_args(name, config_paths, modes=None):
    """A system's ``--system`` (and ``--system-modes``) arguments of ``ldr-eval``."""
    args = ["--system", "%s=%s" % (name, ",".join(config_paths))]
    if modes:
        args += ["--system-modes", "%s=%s" % (name, ",".join(modes))]
    return args


def _by_priority(jobs):
    """The stages in the order a free lane takes them (the engine's priorities): trainings from scratch
    first (LDR, the slowest, leading), then the classifier, its predictions and the
    contrastive items, the trainings that continue Mixed, and every evaluation as soon as
    its system is trained."""

    def rank(job):
        if job.name.startswith(("eval_", "contrastive_")):
            return 3
        if job.name in ("classifier", "predict", "items"):
            return 1
        return 2 if job.after else 0

    order = {"ldr": 0}
    return sorted(jobs, key=lambda job: (rank(job), order.get(job.name, 1)))


def _row_averages(results):
    return {row: evaluate.average(scores) for row, scores in results["rows"]}


def contrastive_rates(results):
    """The contrastive figures the findings quote, over all items: ``{row: %}`` with
    ``"<system> (oracle)"`` (accuracy) and ``"<system> (effect)"`` (label effect: % of
    pairs the variant's label moves towards the variant; length bias cancels)."""
    rates = {}
    for row in results["rows"]:
        value = row["values"].get("all")
        if value is None:
            continue
        if row["metric"] == "accuracy" and row["mode"] == "oracle":
            rates["%s (oracle)" % row["system"]] = value
        elif row["metric"] == "shift":
            rates["%s (effect)" % row["system"]] = value
    return rates


def seed_spread(results, first="Mixed", second=SEED_ROW):
    """The difference of average BLEU between two trainings of the same system that
    differ only by their seed (``None`` when either row is missing)."""
    averages = _row_averages(results)
    if first not in averages or second not in averages:
        return None
    return abs(averages[first] - averages[second])


def findings(
    results,
    spread,
    contrastive_figures=None,
    baseline="Mixed",
    systems=LABEL_SYSTEMS,
    output_layers=None,
    steps=None,
):
    """The "what this shows and what it cannot" paragraph, from the figures.

    Every comparison is judged against :obj:`spread` (the seed-to-seed difference of
    the baseline's average BLEU): a difference below it is reported as noise, and against
    a control named for each row: the baseline, trained like it in everything but the method
    (size, steps, seed, and the output layer tied or not, read from the checkpoints).

    Args:
      results: The BLEU results of ``evaluate.evaluate``.
      spread: The seed spread of the average BLEU (``None``: unknown).
      contrastive_figures: The contrastive figures of :func:`contrastive_rates`, or
        ``None``.
      baseline: The row the systems are compared with.
      systems: The systems that read domain labels.
      output_layers: ``{row: whether its output layer is tied}``
        (:func:`ldr_experiments.common.output_layers`), or ``None`` when unknown.
      steps: The training steps of the rows trained from scratch (for the control line).

    Returns:
      A list of Markdown lines (bullets).
    """
    averages = _row_averages(results)
    if baseline not in averages:
        return ["- No %s row: nothing to compare with." % baseline]
    noise = spread if spread is not None else 0.0

    def judged(difference):
        if spread is not None and abs(difference) <= noise:
            return "within the seed spread (%.1f): not a difference this run can show" % noise
        return "%s than the seed spread (%.1f)" % (
            "larger" if spread is not None else "no spread measured; larger",
            noise,
        )

    lines = []
    base = averages[baseline]
    lines.append(
        "- %s averages %.1f BLEU%s."
        % (
            baseline,
            base,
            "" if spread is None else "; a second seed differs by %.1f" % spread,
        )
    )
    # The bar applies to every row but the fine-tuned ones (the baseline is one of them).
    judged_rows = [row for row in averages if not row.startswith("FT_")]
    weak = sorted(row for row in judged_rows if averages[row] < TRANSLATES)
    if weak:
        lines.append(
            "- Below %.0f BLEU on average (too weak for their differences to mean much): %s."
            % (TRANSLATES, ", ".join("%s %.1f" % (row, averages[row]) for row in weak))
        )
    else:
        lowest = min(judged_rows, key=averages.get)
        lines.append(
            "- Every row but the FT_* ones averages at least %.0f BLEU (lowest: %s, %.1f)."
            % (TRANSLATES, lowest, averages[lowest])
        )
    for system in systems:
        oracle = averages.get("%s (oracle)" % system)
        if oracle is None:
            continue
        difference = oracle - base
        lines.append(
            "- %s with its domain labels: %+.1f BLEU against %s, %s."
            % (system, difference, baseline, judged(difference))
        )
        lines.append("  " + control_line(system, baseline, output_layers, steps))
        wrong = averages.get("%s (wrong)" % system)
        generic = averages.get("%s (generic)" % system)
        if wrong is not None:
            loss = oracle - wrong
            uses = spread is not None and loss > noise
            lines.append(
                "  With a wrong label it %s %.1f BLEU (%s)%s."
                % (
                    "loses" if loss >= 0 else "gains",
                    abs(loss),
                    judged(loss),
                    ": the model uses its labels" if uses else "",
                )
            )
        if generic is not None:
            lines.append(
                "  With the generic label: %+.1f BLEU against oracle." % (generic - oracle)
            )
        if contrastive_figures:
            right = contrastive_figures.get("%s (oracle)" % system)
            effect = contrastive_figures.get("%s (effect)" % system)
            if right is not None:
                text = "  Contrastive lexical choice: %.0f%% right with its labels" % right
                base_right = contrastive_figures.get("%s (oracle)" % baseline)
                if base_right is not None:
                    text += " (%s: %.0f%%)" % (baseline, base_right)
                if effect is not None:
                    text += (
                        "; giving it the other domain's label moves its choice towards that"
                        " domain's word in %.0f%% of pairs (50%%: labels make no difference)"
                        % effect
                    )
                lines.append(text + ".")
    finetuned = [row for row in averages if row.startswith("FT_")]
    for row in finetuned:
        domain = row[len("FT_") :]
        scores = dict(results["rows"])[row]
        base_scores = dict(results["rows"])[baseline]
        if domain not in scores:
            continue
        others = [d for d in scores if d != domain]
        own = scores[domain]["bleu"] - base_scores[domain]["bleu"]
        rest = sum(scores[d]["bleu"] - base_scores[d]["bleu"] for d in others) / max(len(others), 1)
        lines.append(
            "- %s: %+.1f BLEU on %s, %+.1f on the other domains (fine-tuning %s)."
            % (
                row,
                own,
                domain,
                rest,
                "forgets them" if rest < -noise else "keeps them within the spread",
            )
        )
    lines.append(
        "- What it cannot show: these are small models on %d test sentences per domain, one"
        " seed per system except %s (its spread stands for all); a difference inside the"
        " spread, or a significance mark alone, is not evidence; the paper-size claims need"
        " `--size paper` on a GPU." % (max(results["sentences"].values()), baseline)
    )
    return lines


def control_line(system, baseline, output_layers, steps):
    """What :obj:`system` is judged against: its control, and whether it is matched (the
    output layer tied or untied like the baseline's, read from both checkpoints)."""
    tied = output_layers or {}
    if system not in tied or baseline not in tied:
        return "Control: %s (output layers not read: no checkpoint)." % baseline
    layer = "tied to the target embeddings" if tied[baseline] else "of its own"
    budget = "%d steps, " % steps if steps else ""
    if tied[system] == tied[baseline]:
        return "Control: %s, matched (%sseed 1, output layer %s like %s's)." % (
            baseline,
            budget,
            layer,
            system,
        )
    return (
        "Control: %s, NOT matched: its output layer is %s, %s's is not, and that alone is"
        " worth several BLEU at this size (docs/tables.md): the difference measures the"
        " tying too." % (baseline, layer, system)
    )


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
        " shares its target input and output embeddings; %s: Mixed again with seed %d."
        " FT_<domain>: Mixed fine-tuned %d more steps on that domain only. Factorized PA: the"
        " paper's curriculum with Mixed as its domain-agnostic stage 1 (the same converged"
        " general model the FT rows start from), unfolded into every domain block, then %d"
        " steps training the domain blocks alone, the rest frozen. LDR (pred): LDR with the"
        " labels of a domain classifier (bidirectional LSTM, %d steps). Evaluation on the first"
        " %d test sentences of each domain, beam 4."
        % (
            budget["steps"],
            budget["batch_size"],
            budget["alpha"],
            budget["max_length"],
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
        "Rows: Mixed, %s (Mixed again, another seed) and, with `--full`, Mixing (domain"
        " mixing: no label at translation); DC, LDR and Factorized PA with oracle, generic,"
        " wrong (the next domain in the list) labels, LDR also with predicted labels;"
        " with `--full`, LDR^1 (alpha = 1); the FT_* baselines with oracle labels." % SEED_ROW,
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


if __name__ == "__main__":
    # A user error (a results directory that is not the drivers', a corpus not built)
    # is one line and exit status 2, as in the package's commands.
    sys.exit(errors.run_main("run/demo.sh", main))
