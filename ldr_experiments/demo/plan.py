"""The demo's stages (:class:`Plan`): corpus, trainings, translations, scores and report."""

import json
import os
import time

from ldr_experiments import baselines, common, engine, equal_budgets
from ldr_experiments.demo.runs import (
    BASELINE,
    CLASSIFIER_DEF,
    CONTRASTIVE_SYSTEMS,
    DATA_CONFIG,
    REPORT_LAYOUT,
    Run,
    Trained,
    _continued_config,
    _finetune_config,
    _stage2_config,
    classifier_config,
    twin_name,
)
from ldr_experiments.machine import provenance, provenance_line
from ldr_opennmt import config_loader, probe, stamps
from ldr_opennmt.data import corpus as corpus_lib
from ldr_opennmt.evaluation import contrastive, evaluate
from ldr_opennmt.utils import copy_file_atomic, write_lines_atomic


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
        self.corpus_budget_notes = []
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
        """Writes the data configuration every system trains with (after the corpus). On a
        corpus other than the default one, with the default configuration, its ``data``
        paths are the corpus's (:func:`ldr_experiments.common.corpus_data_section`): its
        domains and languages, read from its ``corpus.json``."""
        self.domains = info["domains"]
        self.source, self.target = info["source_lang"], info["target_lang"]
        #: The budgets the corpus decided (equal_budgets.fit_to_corpus), said in the report.
        self.corpus_budget_notes = (
            [] if info.get("planned") else equal_budgets.fit_to_corpus(self.budget, info)
        )
        for note in self.corpus_budget_notes:
            common.log("[%s] %s" % (self.steps.name, note))
        config = common.load_yaml(self.data_config_source)
        if self.data != common.DEFAULT_CORPUS and self.data_config_source == DATA_CONFIG:
            config["data"].update(common.corpus_data_section(self.data, info))
        self.data_config = common.write_config(
            config, os.path.join(self.steps.configs_dir, "data.yml")
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
        # The package's seed words are the default corpus's (its domains, English-French);
        # on another corpus the lexicon is found from the corpus alone.
        # A corpus of one's own may have no word whose translation depends on its domain: the
        # report then says the contrastive test was not run (and why) instead of stopping.
        own = {} if self.data == common.DEFAULT_CORPUS else {"seed_words": None, "allow_none": True}
        items = contrastive.build_items(self.data, self.items_path, max_items=maximum, **own)
        if not items:
            common.log(
                "[%s] the contrastive test is not run: %s"
                % (self.steps.name, contrastive.no_items_reason(self.items_path))
            )

    # Stages 2 and 3: the trainings.

    def training_stages(self, runs):
        """One training stage per system of :obj:`runs` (:class:`Run`), then the fine-tuning
        baselines and the domain classifier with its predictions."""
        budget, runs_dir = self.budget, self.steps.runs_dir
        stages, configs = [], {}
        scratch = [run for run in runs if run.definition.stage1 is None and run.continues is None]
        stage1_configs = {}
        for index, run in enumerate(scratch):
            params, slug, title = dict(run.params), run.directory, run.name
            if run.curriculum:
                # Its own stage 1: every sentence as generic (the general copies).
                params["domain_training"] = "general"
                slug += "_stage1"
                title += " stage 1 (domain-agnostic, %d steps)" % budget["steps"]
            data = dict(common.MIXED_BATCHES, **run.data)
            if probe.capabilities(run.family).domain_tokens:
                # Targets that start with a domain token (TTM): a target vocabulary with
                # the domain tokens appended.
                data["target_vocabulary"] = baselines.domain_token_vocabulary(
                    self.data_config,
                    os.path.join(self.steps.configs_dir, "%s_target_vocabulary.txt" % slug),
                )
            config = common.train_config(slug, params, dict(run.train), budget, runs_dir, data=data)
            if run.curriculum:
                stage1_configs[run.directory] = config
            else:
                configs[run.name] = config
            stages.append(
                self._train(
                    run,
                    config,
                    title,
                    budget["steps"],
                    "2/6 (%d/%d)" % (index + 1, len(scratch)),
                    options=("--seed", str(run.seed)),
                    after=run.after,
                    slug=slug,
                    evaluated=not run.curriculum,
                )
            )
        by_name = {run.name: run for run in runs}
        for run in runs:
            family = run.definition
            if run.continues is not None:
                # A control of the same compute: the row it continues, every parameter
                # trained on, for as many steps as that row took (passes) or a stage 2's.
                base = by_name[run.continues]
                stages.append(self._continue(run, base, configs[base.name]))
                continue
            if run.curriculum:
                base_config, base_slug, finetune = (
                    stage1_configs[run.directory],
                    run.directory + "_stage1",
                    "unfold",
                )
                how = "its stage 1 unfolded, domain blocks"
            elif family.stage1 is not None:
                base = self._stage1_run(scratch, family.stage1, run.seed)
                base_config, base_slug, finetune = (
                    configs[base.name],
                    base.directory,
                    family.finetune,
                )
                how = (
                    "%s unfolded, domain blocks" if finetune == "unfold" else "on a frozen %s"
                ) % base.name
            else:
                continue
            stage2_steps = budget["stage2_steps"] * run.stage2_factor
            config = _stage2_config(
                run.directory,
                base_config,
                dict(budget, stage2_steps=stage2_steps),
                runs_dir,
                finetune == "unfold",
            )
            title = "%s stage 2 (%s, %d steps)" % (run.name, how, stage2_steps)
            final = budget["steps"] + stage2_steps
            # Seeded like every training (the seed of the run it continues): a continued
            # training draws its batches in the same order on every run.
            stages.append(
                self._train(
                    run,
                    config,
                    title,
                    final,
                    "2/6",
                    options=("--seed", str(run.seed)),
                    after=[base_slug],
                    curve=True,
                )
            )
        # FT_<domain> continues the baseline, and each seed twin of the baseline (its
        # FT_<domain> of that seed: the upper reference of the rows of that seed).
        bases = [self.baseline] + [
            run for run in runs if run.seed_of == self.baseline.name and run.continues is None
        ]
        for baseline in bases:
            for domain in self.domains:
                stages.append(self._finetune(baseline, domain, configs[baseline.name]))
        return stages + self._classifier_stages()

    def _stage1_run(self, scratch, family, seed):
        """The run a stage 2 of seed :obj:`seed` continues: the first row of :obj:`family`
        trained from scratch (the baseline, for Mixed), or its twin of that seed."""
        first = [run for run in scratch if run.family == family][0]
        for run in scratch:
            if run.seed == seed and (run is first or run.seed_of == first.name):
                return run
        raise ValueError(
            "no seed %d of %s to continue: a row of seed %d continues the stage 1 of its seed"
            % (seed, first.name, seed)
        )

    def _finetune(self, baseline, domain, base_config):
        """FT_<domain>: :obj:`baseline` (the baseline or a seed twin of it) fine-tuned on
        one domain."""
        budget = self.budget
        name = twin_name("FT_%s" % domain, baseline.seed)
        slug = "ft_%s" % domain + ("" if baseline.seed == 1 else "_seed%d" % baseline.seed)
        config = _finetune_config(domain, base_config, budget, self.steps.runs_dir, slug)
        run = Run(
            baseline.family,
            row=name,
            slug=slug,
            modes=("oracle",),
            model_defs=baseline.model_defs,
            seed=baseline.seed,
            seed_of=None if baseline.seed == 1 else "FT_%s" % domain,
        )
        final = budget["steps"] + budget["finetune_steps"]
        return self._train(
            run,
            config,
            run.name,
            final,
            "3/6",
            options=("--seed", str(baseline.seed)),
            after=[baseline.directory],
            curve=baseline.seed == 1,
        )

    def _continue(self, run, base, base_config):
        """A control that continues :obj:`base` with every parameter trained: for the steps
        :obj:`base` took (``passes``: the forward-backward passes of a two-pass row, on
        :obj:`base`'s own batches), or a stage 2's (on the stage 2's batches)."""
        budget = self.budget
        if run.continue_steps == "passes":
            steps = budget["steps"]
        elif run.continue_steps == "stage2":
            steps = budget["stage2_steps"] * run.stage2_factor
        else:
            raise ValueError("continue_steps: passes or stage2, got %r" % run.continue_steps)
        config = _continued_config(
            run.directory, base_config, dict(budget, stage2_steps=steps), self.steps.runs_dir
        )
        title = "%s (%s continued %d steps, every parameter)" % (run.name, base.name, steps)
        return self._train(
            run,
            config,
            title,
            budget["steps"] + steps,
            "2/6",
            options=("--seed", str(run.seed)),
            after=[base.directory],
            # A stage 2's control trains on the stage 2's batches (TablesPlan._train).
            curve=run.continue_steps == "stage2",
        )

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
            ("--seed", "1"),
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
            kind=engine.EVALUATE,  # It translates the test sets with the classifier.
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
                # Its stamp file is its own (not the engine's): the code that writes it
                # (findings, claims) is added here, so a changed report code rewrites it.
                code=engine.stage_code(engine.LOCAL),
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
    """The stages in the order a free lane takes them (the engine's priorities): trainings
    from scratch first (LDR, the slowest, leading), then the classifier, its predictions and the
    contrastive items, the trainings that continue Mixed, and every evaluation as soon as
    its system is trained."""

    def rank(job):
        if job.name.startswith(("eval_", "contrastive_")):
            return 3
        if job.name in ("classifier", "predict", "items"):
            return 1
        return 2 if job.after else 0

    order = {"ldr": 0, "ldr_summed": 0, "mixed_passes": 0}
    return sorted(jobs, key=lambda job: (rank(job), order.get(job.name, 1)))
