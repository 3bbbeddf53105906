"""Multi-domain sequence-level knowledge distillation (Currey, Mathur and Dinu, EMNLP 2020) as
stages of the tables' pipeline (``docs/families/distillation.md``).

Each fine-tuned teacher FT_<domain> (the training stage ``ft_<domain>``) translates its own
domain's training sources (sequence-level distillation, Kim and Rush, 2016), and one student,
a plain Transformer, trains on the union of the distilled corpora: with the original references
beside them (:data:`WITH_REFERENCES`, the paper's setting) or alone. The student is served as one
model: no label, no teacher at translation time.

One stage per domain, ``distill_<domain>`` (:meth:`Distillation.stages`), after ``ft_<domain>``:

1. ``ldr-export ctranslate2`` of the teacher's latest checkpoint (the package's command, in the
   stage's lane, its output in ``logs/distill_<domain>.log``) into
   ``OUT/distill/ct2_<domain>/`` (the domain's model and ``generic``: a teacher without
   domain-specific parameters, Mixed fine-tuned, is translated as ``generic``);
2. the domain's training sources translated with that export through the package's
   :class:`ldr_opennmt.serving.translator.Translator` (CTranslate2: one translation at a time,
   one thread per core of the lane), in the corpus's own form: the training files are
   tokenized and BPE-split, and so are the translations (``tokenized``: no tokenizer either
   way), one line per source line (an empty source gives an empty line, which training drops);
   written to ``OUT/distill/train.<domain>.<tgt>`` under a temporary name renamed at the end,
   with progress lines (sentences done of the total, sentences per second) on standard error
   and in the stage's log;
3. the time the translations took in ``OUT/distill/<domain>.json`` (sentences, seconds,
   sentences per second, beam, threads, the export's seconds);
4. with the references, the student's corpus of that domain: ``OUT/distill/union.<domain>.<src>``
   and ``.<tgt>``, each source twice, once with its reference and once with its distilled
   translation (``train_corpora`` maps one domain to one file pair).

Its stamp: the teacher's checkpoint (:func:`ldr_experiments.common.checkpoint_digest`) and
configuration, the sources (and references), the beam, the decoding length and
:attr:`Distillation.with_references`; it owns everything it writes. The student's run
configuration puts :meth:`Distillation.train_corpora` under ``data: train_corpora``; its
training's stamp digests those files (:func:`ldr_experiments.common.training_stamp`).
"""

import json
import math
import os
import time

from ldr_experiments import common, engine
from ldr_opennmt import config_loader, stamps
from ldr_opennmt.domains import GENERIC
from ldr_opennmt.errors import UserError
from ldr_opennmt.utils import atomic_output, make_directories, open_for_append, read_lines

#: Whether the student trains on the original references as well as the distilled targets by
#: default: the paper's multi-domain student (MDKD) trains from scratch on each domain's
#: original training data together with that domain's distilled data, following sequence-level
#: distillation where the student sees both (Kim and Rush, 2016); distilled targets alone are
#: the ablation (``with_references=False``).
WITH_REFERENCES = True
#: The beam of the teachers' translations when the budget sets none (``beam``): the tables'
#: own beam (``params: beam_width`` of the data configurations, "beam 4" in the report).
BEAM = 4
#: The most target tokens per translation when the budget sets none (``max_decoding_length``):
#: CTranslate2's default in the package (ldr-serve, ldr-translate).
MAX_DECODING_LENGTH = 256
#: Sentences per CTranslate2 call (sorted by length within a chunk).
BATCH_SIZE = 32
#: About this many progress lines per domain; a chunk has at least :data:`MIN_CHUNK` sentences.
PROGRESS_LINES = 20
MIN_CHUNK = 200
#: The layout of what the stage writes, part of its stamp: the stage's code is in this package
#: (an ``evaluate`` stage's code digest covers ``ldr_opennmt`` only), so a change of its files
#: changes this number.
LAYOUT = 1
#: The directory of the distillation's files in the results directory.
DIRECTORY = "distill"


class Distillation:
    """The distillation stages of a plan (:class:`ldr_experiments.demo.Plan`, the tables'
    :class:`~ldr_experiments.tables.TablesPlan`) and the student's training corpora.

    Args:
      plan: The plan, its corpus written (:meth:`~ldr_experiments.demo.Plan.write_data_config`:
        ``data_config``, ``domains``, ``source``, ``target``); its teachers are the training
        stages ``ft_<domain>`` (their :class:`~ldr_experiments.demo.runs.Trained` record in
        ``plan.trained`` when declared, else ``OUT/runs/ft_<domain>`` with
        ``[data_config, OUT/configs/ft_<domain>.yml]``).
      with_references: The student also trains on the original references (each source twice,
        with its reference and with its distilled translation); default :data:`WITH_REFERENCES`.
      beam: The teachers' beam (default: the budget's ``beam``, else :data:`BEAM`).
      device: CTranslate2's device for the translations (``cpu``; ``auto``: a GPU where
        CTranslate2 sees one).
    """

    def __init__(self, plan, with_references=WITH_REFERENCES, beam=None, device="cpu"):
        if plan.data_config is None or not plan.domains:
            raise ValueError("the plan's corpus is not known yet (write_data_config first)")
        self.plan = plan
        self.with_references = bool(with_references)
        budget = getattr(plan, "budget", None) or {}
        self.beam = int(beam if beam is not None else budget.get("beam", BEAM))
        if self.beam < 1:
            raise ValueError("beam must be >= 1, got %d" % self.beam)
        self.max_decoding_length = int(budget.get("max_decoding_length") or MAX_DECODING_LENGTH)
        self.device = device
        self.directory = os.path.join(plan.steps.out, DIRECTORY)
        self._originals = None

    # Paths.

    def stage_name(self, domain):
        """The name of a domain's stage (``distill_<domain>``)."""
        return "distill_%s" % domain

    def export_dir(self, domain):
        """The CTranslate2 export of FT_<domain>."""
        return os.path.join(self.directory, "ct2_%s" % domain)

    def distilled(self, domain):
        """FT_<domain>'s translations of the domain's training sources."""
        return os.path.join(self.directory, "train.%s.%s" % (domain, self.plan.target))

    def timing_path(self, domain):
        """The JSON of the time the translations took."""
        return os.path.join(self.directory, "%s.json" % domain)

    def union(self, domain):
        """``[source, target]`` of the student's corpus of a domain with the references."""
        return [
            os.path.join(self.directory, "union.%s.%s" % (domain, lang))
            for lang in (self.plan.source, self.plan.target)
        ]

    def originals(self):
        """``{domain: [source, target]}``: the training corpora the teachers were fine-tuned
        on (the data configuration's ``train_corpora``; a domain it does not list: the corpus's
        ``train.<domain>.<lang>`` files)."""
        if self._originals is None:
            data = config_loader.load_run_config([self.plan.data_config]).get("data") or {}
            listed = data.get("train_corpora") or {}
            self._originals = {}
            for domain in self.plan.domains:
                spec = listed.get(domain)
                if isinstance(spec, dict):
                    spec = [spec.get("source"), spec.get("target")]
                if not spec:
                    spec = [
                        os.path.join(self.plan.data, "train.%s.%s" % (domain, lang))
                        for lang in (self.plan.source, self.plan.target)
                    ]
                self._originals[domain] = list(spec)
        return self._originals

    def teacher(self, domain):
        """``(configuration files, model directory)`` of FT_<domain>."""
        slug = "ft_%s" % domain
        for trained in self.plan.trained:
            if trained.slug == slug:
                return list(trained.config_paths), trained.model_dir
        steps = self.plan.steps
        config = os.path.join(steps.configs_dir, "%s.yml" % slug)
        return [self.plan.data_config, config], os.path.join(steps.runs_dir, slug)

    # What the student reads.

    def train_corpora(self):
        """The student's ``data: train_corpora``: ``{domain: [source, target]}`` in the
        plan's domain order; with the references, each domain's union of its original and
        distilled pairs (:meth:`union`), else its sources with the distilled targets."""
        if self.with_references:
            return {domain: self.union(domain) for domain in self.plan.domains}
        return {
            domain: [self.originals()[domain][0], self.distilled(domain)]
            for domain in self.plan.domains
        }

    def outputs(self):
        """The files the student trains on that the stages write (for its stamp)."""
        files = []
        for domain in self.plan.domains:
            files += self.union(domain) if self.with_references else [self.distilled(domain)]
        return files

    def stage_names(self):
        """The names of the stages (what the student's training comes after)."""
        return [self.stage_name(domain) for domain in self.plan.domains]

    # The stages.

    def stages(self):
        """One :class:`ldr_experiments.common.Stage` per domain (see the module's text); the
        report's commands get each export and the ``ldr-translate`` line that makes the same
        translations in one process (:meth:`translate_command`)."""
        for domain in self.plan.domains:
            self.plan.steps.commands += [
                (
                    "Export FT_%s to CTranslate2 (distillation)" % domain,
                    self.export_command(domain),
                ),
                ("Distil the %s training sources" % domain, self.translate_command(domain)),
            ]
        return [self._stage(domain) for domain in self.plan.domains]

    def _stage_outputs(self, domain):
        outputs = [self.distilled(domain), self.timing_path(domain)]
        return outputs + (self.union(domain) if self.with_references else [])

    def stamp(self, domain):
        """What a domain's distillation depends on."""
        config_paths, model_dir = self.teacher(domain)
        source, target = self.originals()[domain]
        return stamps.make_stamp(
            layout=LAYOUT,
            checkpoint=common.checkpoint_digest(model_dir),
            config=config_loader.load_run_config(config_paths),
            sources=stamps.file_digest(source),
            references=stamps.file_digest(target) if self.with_references else None,
            beam=self.beam,
            max_decoding_length=self.max_decoding_length,
            with_references=self.with_references,
        )

    def _stage(self, domain):
        name = self.stage_name(domain)
        outputs = self._stage_outputs(domain)
        return common.Stage(
            name,
            "distill %s (FT_%s translates its training sources)" % (domain, domain),
            "3/6",
            lambda: self.stamp(domain),
            outputs,
            lambda cores: self.run(domain, cores),
            after=["ft_%s" % domain],
            owns=outputs + [self.export_dir(domain)],
            kind=engine.EVALUATE,  # It translates with a trained model, as eval_* do.
        )

    def export_command(self, domain):
        """``ldr-export ctranslate2`` of FT_<domain>'s latest checkpoint: the domain's model
        and ``generic`` (what a teacher without domain-specific parameters translates with)."""
        config_paths, _ = self.teacher(domain)
        command = ["ldr-export", "ctranslate2", "--config", *config_paths, "--auto_config"]
        command += ["--output_dir", self.export_dir(domain), "--domains", domain, GENERIC]
        # A run killed after the export and before the translations exports again over it
        # (--force replaces only an earlier export of ldr-export).
        return command + ["--force"]

    def translate_command(self, domain):
        """The ``ldr-translate`` line of the same translations, in one process: the same
        package code (:class:`~ldr_opennmt.serving.ct2_models.DomainModel`, batches of
        :data:`BATCH_SIZE` sorted by length), without the stage's progress lines, timing and
        thread count (CTranslate2's default there)."""
        command = ["ldr-translate", "--export", self.export_dir(domain), "--domain", domain]
        command += ["--input", self.originals()[domain][0], "--output", self.distilled(domain)]
        command += ["--tokenized", "--keep_empty", "--beam_size", str(self.beam)]
        command += ["--max_decoding_length", str(self.max_decoding_length)]
        return command + ["--batch_size", str(BATCH_SIZE)]

    def run(self, domain, cores=None):
        """Exports FT_<domain>, translates the domain's training sources with it, writes the
        timing and, with the references, the student's corpus of the domain."""
        steps = self.plan.steps
        name = self.stage_name(domain)
        make_directories(self.directory, os.path.abspath(steps.out))
        started = time.time()
        steps.run_command(name, self.export_command(domain), cores)
        export_seconds = time.time() - started
        source, target = self.originals()[domain]
        sources = read_lines(source)
        threads = len(cores) if cores else len(os.sched_getaffinity(0))
        translator = _translator(
            self.export_dir(domain), self.beam, self.max_decoding_length, threads, self.device
        )
        log_path = os.path.join(steps.logs_dir, "%s.log" % name)
        with open_for_append(log_path) as log_file:

            def report(line):
                log_file.write(line + "\n")
                common.log("[%s] %s" % (steps.name, line))

            report(
                "distill %s: %d sentences, beam %d, %d thread%s, %s"
                % (domain, len(sources), self.beam, threads, "s"[: threads != 1], self.device)
            )
            seconds = translate_file(
                lambda lines: translator.translate(lines, domain=domain, batch_size=BATCH_SIZE),
                sources,
                self.distilled(domain),
                report=lambda *counts: report(progress_line(domain, *counts)),
                root=steps.out,
            )
        timing = {
            "domain": domain,
            "sentences": len(sources),
            "seconds": round(seconds, 3),
            "sentences_per_second": round(len(sources) / seconds, 2) if seconds > 0 else None,
            "beam": self.beam,
            "max_decoding_length": self.max_decoding_length,
            "threads": threads,
            "device": self.device,
            "export_seconds": round(export_seconds, 3),
        }
        with atomic_output(self.timing_path(domain), root=steps.out) as tmp:
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump(timing, f, indent=2)
                f.write("\n")
        if self.with_references:
            write_union(source, target, self.distilled(domain), *self.union(domain), root=steps.out)


def _translator(export_dir, beam, max_decoding_length, threads, device):
    """The package's CTranslate2 translator of an export, on tokenized text."""
    # Imported here: the drivers that declare these stages load no CTranslate2.
    from ldr_opennmt.serving.translator import Translator

    return Translator(
        export_dir,
        device=device,
        beam_size=beam,
        max_decoding_length=max_decoding_length,
        inter_threads=1,
        intra_threads=threads,
        tokenized=True,
    )


def chunk_size(total):
    """Sentences per progress line: about :data:`PROGRESS_LINES` lines, each of at least
    :data:`MIN_CHUNK` sentences."""
    return max(MIN_CHUNK, int(math.ceil(total / PROGRESS_LINES)))


def progress_line(domain, done, total, elapsed):
    """``distill medical: 2000/10083 sentences, 153.2 sentences/s``."""
    rate = done / elapsed if elapsed > 0 else float("inf")
    return "distill %s: %d/%d sentences, %.1f sentences/s" % (domain, done, total, rate)


def translate_file(translate, sources, path, report=None, chunk=None, root=None):
    """Writes the translations of :obj:`sources`, one line each, to :obj:`path`: under a
    temporary name renamed once every line is written (a failure leaves no file there, nor a
    temporary one).

    Args:
      translate: A callable ``(sentences) -> translations`` (lists of strings).
      sources: The source lines.
      path: The output file.
      report: Optional callable ``(done, total, seconds)`` after each chunk.
      chunk: Sentences per call of :obj:`translate` (default: :func:`chunk_size`).
      root: Optional output tree :obj:`path` is in (no link followed below it:
        :func:`ldr_opennmt.utils.atomic_output`).

    Returns:
      The seconds the translations took.

    Raises:
      RuntimeError: if :obj:`translate` returns another number of lines than it was given,
        or a line with a line break.
    """
    total = len(sources)
    chunk = chunk or chunk_size(total)
    started = time.time()
    with atomic_output(path, root=root) as tmp:
        with open(tmp, "w", encoding="utf-8") as f:
            for begin in range(0, total, chunk):
                batch = sources[begin : begin + chunk]
                lines = list(translate(batch))
                if len(lines) != len(batch):
                    raise RuntimeError(
                        "%d translations of %d sentences (lines %d-%d of %s)"
                        % (len(lines), len(batch), begin + 1, begin + len(batch), path)
                    )
                for line in lines:
                    if "\n" in line or "\r" in line:
                        raise RuntimeError("a translation with a line break: %r" % line)
                    f.write(line + "\n")
                if report is not None:
                    report(begin + len(batch), total, time.time() - started)
    return time.time() - started


def write_union(source, reference, distilled, source_out, target_out, root=None):
    """Writes a domain's corpus of the student with the references: each source twice (in
    order, side by side), once with its reference and once with its distilled translation;
    both files renamed into place once complete (:obj:`root`: as :func:`translate_file`).

    Raises:
      UserError: if the three files have different numbers of lines.
    """
    sources, references, translations = (read_lines(p) for p in (source, reference, distilled))
    if not len(sources) == len(references) == len(translations):
        raise UserError(
            "%s, %s, %s: %d, %d and %d lines (one translation per source and reference)"
            % (source, reference, distilled, len(sources), len(references), len(translations))
        )
    with atomic_output(source_out, root=root) as source_tmp, atomic_output(
        target_out, root=root
    ) as target_tmp:
        with open(source_tmp, "w", encoding="utf-8") as s, open(
            target_tmp, "w", encoding="utf-8"
        ) as t:
            for line, ref, hyp in zip(sources, references, translations):
                s.write("%s\n%s\n" % (line, line))
                t.write("%s\n%s\n" % (ref, hyp))
