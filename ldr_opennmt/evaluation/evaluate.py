"""Translate every domain's test set with several label modes and score it.

Label modes:

* ``oracle``: the true domain of each sentence;
* ``generic``: the reserved ``generic`` label (no domain parameter active);
* ``wrong``: a fixed, deliberately wrong domain: the next domain in the
  declared list (medical -> religious -> software -> medical);
* ``pred``: labels predicted by a domain classifier, read from
  ``{pred_dir}/test.{domain}.pred`` (one label per line).

Models that ignore domains (Mixed) are translated once. Predictions are written
to ``.partial`` files and renamed when complete, so an interrupted evaluation
resumes from the translations it already has.
"""

import collections
import json
import os

from tqdm import tqdm

from ldr_opennmt.data import corpus as corpus_lib
from ldr_opennmt.domains import GENERIC
from ldr_opennmt.errors import UserError
from ldr_opennmt.evaluation import scoring
from ldr_opennmt.training.runner import Runner
from ldr_opennmt.utils import read_lines, write_lines, write_lines_atomic

MODES = ("oracle", "generic", "wrong", "pred")


def labels_for(mode, domain, domains, count, pred_dir=None):
    """The label lines of :obj:`count` test sentences of :obj:`domain` in :obj:`mode`."""
    if mode == "oracle":
        return [domain] * count
    if mode == "generic":
        return [GENERIC] * count
    if mode == "wrong":
        return [domains[(domains.index(domain) + 1) % len(domains)]] * count
    if mode == "pred":
        if pred_dir is None:
            raise UserError("label mode 'pred' needs predicted label files (--pred-dir)")
        path = os.path.join(pred_dir, "test.%s.pred" % domain)
        if not os.path.exists(path):
            raise UserError("%s: missing predicted labels" % path)
        with open(path) as f:
            labels = f.read().splitlines()[:count]
        scoring.check_aligned(labels, [None] * count, path)
        return labels
    raise UserError("unknown label mode %r (known: %s)" % (mode, ", ".join(MODES)))


class System:
    """A trained system given by its OpenNMT-tf run configuration(s)."""

    def __init__(self, name, config_paths, modes=None):
        """Initializes the system.

        Args:
          name: The row name.
          config_paths: Its run configuration files (with ``model_dir``).
          modes: Label modes to evaluate it with, overriding those of
            :func:`evaluate` (e.g. ``["oracle"]`` for a fine-tuned baseline).
        """
        self.name = name
        self.config_paths = list(config_paths)
        if modes is not None:
            unknown = [m for m in modes if m not in MODES]
            if unknown or not modes:
                raise UserError(
                    "system %s: unknown label modes %s (known: %s)"
                    % (name, unknown or modes, ", ".join(MODES))
                )
        self.modes = tuple(modes) if modes is not None else None
        try:
            self.config = Runner.read_config(self.config_paths)
        except UserError as e:
            raise UserError("system %s: %s" % (name, e)) from e
        self.model_dir = self.config["model_dir"]
        self._runner = None

    @property
    def runner(self):
        """The multi-domain Runner of the system (reads per-domain corpora and
        fine-tuning configurations); built on first use."""
        if self._runner is None:
            try:
                self._runner = Runner.from_files(self.config_paths, auto_config=True)
            except UserError as e:
                raise UserError("system %s: %s" % (self.name, e)) from e
        return self._runner

    @property
    def model(self):
        return self.runner.model

    @property
    def reads_labels(self):
        """Whether the model's inputs include a label file (read or ignored)."""
        return hasattr(self.model.features_inputter, "domain_inputter")

    @property
    def uses_domains(self):
        """Whether the labels change the translation: Mixed models ignore them, domain
        mixing models read them for training only (``optional_labels``)."""
        domain_inputter = getattr(self.model.features_inputter, "domain_inputter", None)
        return (
            domain_inputter is not None
            and domain_inputter.required
            and not domain_inputter.optional_labels
        )

    def checkpoint(self):
        """The checkpoint translations are made with (the latest one)."""
        try:
            return self.runner.latest_checkpoint()
        except UserError as e:
            raise UserError("system %s: %s" % (self.name, e)) from e

    def translate(self, source_file, label_file, output):
        """Translates with the latest checkpoint into :obj:`output` (atomically)."""
        partial = output + ".partial"
        features = [source_file, label_file] if self.reads_labels else source_file
        self.runner.infer(features, predictions_file=partial, checkpoint_path=self.checkpoint())
        os.replace(partial, output)


def evaluate(
    corpus_dir,
    systems,
    out_dir,
    modes=("oracle", "generic", "wrong"),
    baseline=None,
    max_sentences=None,
    pred_dir=None,
    bootstrap_samples=1000,
    cache_only=False,
):
    """Runs the evaluation and writes ``scores.json``, ``table.md`` and ``bleu.png``.

    Args:
      corpus_dir: A corpus built by ``ldr-data``.
      systems: A list of :class:`System`.
      out_dir: Where translations and results are written.
      modes: Label modes for systems that use domains.
      baseline: Name of the system the significance tests compare against.
      max_sentences: Evaluate only the first N test sentences of each domain.
      pred_dir: Directory of predicted label files (mode ``pred``).
      bootstrap_samples: Paired bootstrap resamples.
      cache_only: Only translate (what is not translated yet) and write no scores: a
        later evaluation of these systems and others reuses the translations. Runs of
        different systems may share :obj:`out_dir` side by side.

    Returns:
      The results dict (also written to ``scores.json``), or ``None`` with
      :obj:`cache_only`.
    """
    info = corpus_lib.load_info(corpus_dir)
    domains = info["domains"]
    tgt = info["target_lang"]
    src = info["source_lang"]
    detok = corpus_lib.load_tokenizer(corpus_dir, tgt)
    os.makedirs(out_dir, exist_ok=True)

    sources, references, counts = [], {}, collections.OrderedDict()
    for system in systems:
        declared = system.config.get("data", {}).get("domains")
        for domain in declared or []:
            if domain not in domains:
                raise UserError(
                    "system %s declares domain %r but the corpus %s has no files for it "
                    "(its domains: %s)" % (system.name, domain, corpus_dir, ", ".join(domains))
                )
    for domain in domains:
        for path in (
            os.path.join(corpus_dir, "test.%s.%s" % (domain, src)),
            os.path.join(corpus_dir, "raw", "test.%s.%s" % (domain, tgt)),
        ):
            if not os.path.exists(path):
                raise UserError("test set of %s: %s: no such file" % (domain, path))
        lines = read_lines(os.path.join(corpus_dir, "test.%s.%s" % (domain, src)))[:max_sentences]
        refs = read_lines(os.path.join(corpus_dir, "raw", "test.%s.%s" % (domain, tgt)))[
            : len(lines)
        ]
        scoring.check_aligned(lines, refs, "test set of %s" % domain)
        sources.extend(lines)
        references[domain] = refs
        counts[domain] = len(lines)

    outputs = collections.OrderedDict()
    for system in tqdm(systems, desc="translating", unit="system", disable=None):
        if not system.uses_domains:
            system_modes = ("oracle",)
        else:
            system_modes = system.modes or tuple(modes)
        for mode in system_modes:
            # Models that ignore domains are translated once and named alone.
            row = system.name if len(system_modes) == 1 else "%s (%s)" % (system.name, mode)
            outputs[(system.name, mode)] = (
                row,
                os.path.join(out_dir, "%s.%s.%s" % (system.name, mode, tgt)),
            )
        # Translations are reused only if made by the same checkpoint on the same
        # test sentences; otherwise they are redone.
        stamp_path = os.path.join(out_dir, "%s.stamp" % system.name)
        stamp = "%s\n%d sentences\n" % (system.checkpoint(), len(sources))
        if not os.path.exists(stamp_path) or read_lines(stamp_path) != stamp.splitlines():
            for mode in system_modes:
                if os.path.exists(outputs[(system.name, mode)][1]):
                    os.remove(outputs[(system.name, mode)][1])
        missing = [m for m in system_modes if not os.path.exists(outputs[(system.name, m)][1])]
        if not missing:
            continue
        # One inference run per system (one model load and trace): the test set is
        # repeated once per label mode.
        labels = []
        for mode in missing:
            for domain in domains:
                labels.extend(labels_for(mode, domain, domains, counts[domain], pred_dir))
        run_source = os.path.join(out_dir, "%s.input.%s" % (system.name, src))
        run_labels = os.path.join(out_dir, "%s.input.labels" % system.name)
        run_output = os.path.join(out_dir, "%s.output.%s" % (system.name, tgt))
        write_lines(run_source, sources * len(missing))
        write_lines(run_labels, labels)
        system.translate(run_source, run_labels, run_output)
        translations = read_lines(run_output)
        scoring.check_aligned(translations, sources * len(missing), run_output)
        for i, mode in enumerate(missing):
            write_lines_atomic(
                outputs[(system.name, mode)][1],
                translations[i * len(sources) : (i + 1) * len(sources)],
            )
        for path in (run_source, run_labels, run_output):
            os.remove(path)
        write_lines(stamp_path, stamp.splitlines())
    if cache_only:
        return None

    rows = []
    hypotheses = {}
    for row, output in outputs.values():
        lines = read_lines(output)
        scoring.check_aligned(lines, sources, output)
        start = 0
        scores = {}
        for domain in domains:
            hyps = [
                detok.detokenize(line.split()) for line in lines[start : start + counts[domain]]
            ]
            start += counts[domain]
            hypotheses[(row, domain)] = hyps
            scores[domain] = scoring.score(hyps, references[domain])
        rows.append((row, scores))

    significance = {}
    if baseline is not None:
        names = [row for row, _ in rows]
        if baseline not in names and "%s (oracle)" % baseline in names:
            baseline = "%s (oracle)" % baseline  # A baseline that uses domains.
        if baseline not in names:
            raise UserError(
                "baseline %r is not one of the systems (%s)" % (baseline, ", ".join(names))
            )
        for domain in domains:
            others = {row: hypotheses[(row, domain)] for row, _ in rows if row != baseline}
            p_values = scoring.paired_bootstrap(
                hypotheses[(baseline, domain)],
                others,
                references[domain],
                n_samples=bootstrap_samples,
            )
            for row, p_value in p_values.items():
                significance.setdefault(row, {})[domain] = p_value

    results = {
        "domains": domains,
        "sentences": counts,
        "rows": rows,
        "significance": significance,
        "baseline": baseline,
        "signatures": scoring.signatures(),
        # The tokenized translations of each row, in the order of the domains.
        "outputs": collections.OrderedDict((row, output) for row, output in outputs.values()),
    }
    with open(os.path.join(out_dir, "scores.json"), "w") as f:
        json.dump(results, f, indent=2)
    with open(os.path.join(out_dir, "table.md"), "w") as f:
        f.write(format_tables(results) + "\n")
    scoring.bar_chart(rows, domains, "bleu", os.path.join(out_dir, "bleu.png"), "BLEU per domain")
    return results


def examples(corpus_dir, results, per_domain=2, rows=None, min_words=4, max_words=25):
    """Example translations next to their source and reference, as Markdown.

    The examples are the first :obj:`per_domain` test sentences of each domain whose
    source has :obj:`min_words` to :obj:`max_words` words (short enough to read in a table); the
    choice does not depend on the systems' outputs.

    Args:
      corpus_dir: The corpus the results were computed on.
      results: The results of :func:`evaluate`.
      per_domain: Examples per domain.
      rows: The rows to show (default: all, in the results' order).
      min_words: The shortest source shown.
      max_words: The longest source shown.

    Returns:
      A Markdown string: one table per example (system, translation).
    """
    info = corpus_lib.load_info(corpus_dir)
    src, tgt = info["source_lang"], info["target_lang"]
    detok = corpus_lib.load_tokenizer(corpus_dir, tgt)
    rows = rows or [row for row, _ in results["rows"]]
    outputs = {row: read_lines(results["outputs"][row]) for row in rows}
    lines = []
    start = 0
    for domain in results["domains"]:
        count = results["sentences"][domain]
        sources = read_lines(os.path.join(corpus_dir, "raw", "test.%s.%s" % (domain, src)))
        references = read_lines(os.path.join(corpus_dir, "raw", "test.%s.%s" % (domain, tgt)))
        chosen = [i for i in range(count) if min_words <= len(sources[i].split()) <= max_words]
        for number, i in enumerate(chosen[:per_domain], start=1):
            lines += [
                "**%s %d** (test line %d): %s" % (domain, number, i + 1, sources[i]),
                "",
                "| system | translation |",
                "|---|---|",
                "| *reference* | %s |" % _cell(references[i]),
            ]
            for row in rows:
                hypothesis = detok.detokenize(outputs[row][start + i].split())
                lines.append("| %s | %s |" % (row, _cell(hypothesis)))
            lines.append("")
        start += count
    return "\n".join(lines).rstrip() + "\n"


def _cell(text):
    return text.replace("|", "\\|")


def average(scores, metric="bleu"):
    """The average of a row's per-domain scores."""
    return sum(s[metric] for s in scores.values()) / len(scores)


def format_tables(results):
    """The BLEU and chrF tables with significance marks and signatures."""
    domains, rows = results["domains"], results["rows"]
    parts = []
    for metric, title in (("bleu", "BLEU"), ("chrf", "chrF")):
        parts.append("### %s\n" % title)
        parts.append(
            scoring.markdown_table(
                rows, domains, metric, results["significance"], baseline=results.get("baseline")
            )
        )
        parts.append("")
    if results.get("baseline"):
        parts.append(
            "`*`: BLEU differs from %s with p < 0.05 (sacrebleu paired bootstrap)."
            % results["baseline"]
        )
    parts.append(
        "Test sentences per domain: %s."
        % ", ".join("%s %d" % (d, n) for d, n in results["sentences"].items())
    )
    parts.append("")
    parts.append(
        "Signatures: BLEU `%s`; chrF `%s`."
        % (results["signatures"]["BLEU"], results["signatures"]["chrF"])
    )
    return "\n".join(parts)
