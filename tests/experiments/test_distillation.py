"""The distillation stages (:mod:`ldr_experiments.distillation`): the student's corpora with and
without the references, translations written whole or not at all, and a stage run on a tiny
teacher: exported with ``ldr-export ctranslate2`` (its parser and code, in this process), its
training sources translated with CTranslate2, skipped while its stamp holds, due again when the
teacher's checkpoint changes."""

import json
import os
import types
from unittest import mock

import opennmt
import tensorflow as tf
import yaml

from ldr_experiments import common, distillation, engine
from ldr_opennmt.cli import export as export_cli
from ldr_opennmt.cli import translate as translate_cli
from ldr_opennmt.training import corpora as corpora_lib
from tests import corpus, helpers

DOMAINS = ["medical", "software"]
LANGS = ("en", "fr")
DEFINITION = """from ldr_opennmt import registry


def model():
    return registry.get("mixed_transformer").build_tiny()
"""


def _write(path, lines):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    return corpus.write_lines(path, lines)


class DistillationTest(tf.test.TestCase):
    def setUp(self):
        super().setUp()
        root = self.get_temp_dir()
        self.steps = common.Steps(os.path.join(root, "out"), name="tables")
        self.data = os.path.join(root, "distill_corpus")
        self.sources = {}
        train = {}
        for domain in DOMAINS:
            pairs = corpus.make_pairs(domain, 7, seed=1)
            # An empty source line: translated as an empty line (training drops the pair).
            pairs.insert(3, ("", "vide"))
            paths = [os.path.join(self.data, "train.%s.%s" % (domain, lang)) for lang in LANGS]
            _write(paths[0], [s for s, _ in pairs])
            _write(paths[1], [t for _, t in pairs])
            self.sources[domain] = [s for s, _ in pairs]
            train[domain] = paths
        # The vocabularies of helpers.build_model's tiny models (the same corpus).
        vocab = corpus.write_corpus(os.path.join(root, "tiny"), count=20)
        self.data_config = os.path.join(self.steps.configs_dir, "data.yml")
        with open(self.data_config, "w") as f:
            yaml.safe_dump(
                {
                    "data": {
                        "train_corpora": train,
                        "source_vocabulary": vocab["src_vocab"],
                        "target_vocabulary": vocab["tgt_vocab"],
                    },
                    "params": {"beam_width": 4},
                },
                f,
            )
        for domain in DOMAINS:
            slug = "ft_%s" % domain
            with open(os.path.join(self.steps.configs_dir, slug + ".yml"), "w") as f:
                yaml.safe_dump({"model_dir": os.path.join(self.steps.runs_dir, slug)}, f)
        self.plan = types.SimpleNamespace(
            steps=self.steps,
            data=self.data,
            source="en",
            target="fr",
            domains=list(DOMAINS),
            data_config=self.data_config,
            trained=[],
            budget={"max_decoding_length": 8},
        )
        self.train = train

    def _teacher(self, domain, seed, step):
        """A tiny Mixed with random weights saved as FT_<domain>'s checkpoint of :obj:`step`."""
        model, _ = helpers.build_model(self, "mixed_transformer", seed=seed)
        model_dir = os.path.join(self.steps.runs_dir, "ft_%s" % domain)
        os.makedirs(model_dir, exist_ok=True)
        with open(os.path.join(model_dir, "model_description.py"), "w") as f:
            f.write(DEFINITION)
        opennmt.utils.checkpoint.Checkpoint(model, model_dir=model_dir).save(step=step)
        return model_dir

    def test_train_corpora_with_and_without_references(self):
        out = os.path.join(self.steps.out, "distill")
        plain = distillation.Distillation(self.plan, with_references=False)
        distilled = {d: os.path.join(out, "train.%s.fr" % d) for d in DOMAINS}
        self.assertEqual(
            plain.train_corpora(), {d: [self.train[d][0], distilled[d]] for d in DOMAINS}
        )
        self.assertEqual(plain.outputs(), [distilled[d] for d in DOMAINS])
        both = distillation.Distillation(self.plan)
        self.assertTrue(both.with_references)  # The paper's setting, the default.
        union = {
            d: [os.path.join(out, "union.%s.%s" % (d, lang)) for lang in LANGS] for d in DOMAINS
        }
        self.assertEqual(both.train_corpora(), union)
        self.assertEqual(list(both.train_corpora()), DOMAINS)  # The plan's domain order.
        self.assertEqual(both.outputs(), [path for d in DOMAINS for path in union[d]])
        self.assertEqual(both.stage_names(), ["distill_medical", "distill_software"])
        stages = both.stages()
        self.assertEqual([s.after for s in stages], [("ft_medical",), ("ft_software",)])
        self.assertEqual({s.kind for s in stages}, {engine.EVALUATE})
        self.assertIn(os.path.join(out, "ct2_medical"), stages[0].owns)
        self.assertIn(os.path.join(out, "medical.json"), stages[0].outputs)
        self.assertEqual(both.beam, 4)
        self.assertEqual(distillation.Distillation(self.plan, beam=2).beam, 2)
        # The teacher: FT_<domain>'s record once its training is declared, else its paths.
        configs, model_dir = both.teacher("medical")
        self.assertEqual(model_dir, os.path.join(self.steps.runs_dir, "ft_medical"))
        self.assertEqual(configs[0], self.data_config)
        trained = types.SimpleNamespace(slug="ft_medical", config_paths=["a.yml"], model_dir="m")
        self.plan.trained.append(trained)
        self.assertEqual(both.teacher("medical"), (["a.yml"], "m"))

    def test_translations_are_one_line_per_source_or_no_file(self):
        path = os.path.join(self.steps.out, "distill", "train.x.fr")
        os.makedirs(os.path.dirname(path))
        sources = ["a b", "", "c"] * 3
        reports = []
        seconds = distillation.translate_file(
            lambda lines: [s.upper() for s in lines],
            sources,
            path,
            report=lambda *counts: reports.append(counts[:2]),
            chunk=4,
        )
        self.assertGreaterEqual(seconds, 0)
        self.assertEqual(corpus.read_lines(path), [s.upper() for s in sources])
        self.assertEqual(reports, [(4, 9), (8, 9), (9, 9)])
        self.assertEqual(
            distillation.progress_line("medical", 4, 9, 2.0),
            "distill medical: 4/9 sentences, 2.0 sentences/s",
        )

        calls = []

        def fails_on_the_second_chunk(lines):
            calls.append(lines)
            if len(calls) == 2:
                raise RuntimeError("killed")
            return lines

        for translate, error in (
            (fails_on_the_second_chunk, "killed"),
            (lambda lines: lines[1:], "2 translations of 3 sentences"),
            (lambda lines: ["x\ny"] * len(lines), "a line break"),
        ):
            with self.assertRaisesRegex(RuntimeError, error):
                distillation.translate_file(translate, sources, path, chunk=3)
            # The earlier file is untouched, and no temporary file is left beside it.
            self.assertEqual(corpus.read_lines(path), [s.upper() for s in sources])
            self.assertEqual(os.listdir(os.path.dirname(path)), ["train.x.fr"])

    def test_a_stage_on_a_tiny_teacher(self):
        domain = "software"
        model_dir = self._teacher(domain, seed=3, step=3)
        distill = distillation.Distillation(self.plan)
        stage = {s.name: s for s in distill.stages()}["distill_" + domain]
        commands = []

        def run_command(name, command, cores=None):
            # The command line as the stage builds it, parsed and run by ldr-export itself.
            commands.append((name, command))
            self.assertEqual(command[0], "ldr-export")
            self.assertEqual(export_cli.main(command[1:]), 0)

        with mock.patch.object(
            self.steps, "run_command", side_effect=run_command
        ), mock.patch.object(common, "log") as log:
            self.steps.run_stage(stage, cores=[sorted(os.sched_getaffinity(0))[0]])
        self.assertEqual(commands[0][0], "distill_software")
        export = distill.export_dir(domain)
        with open(os.path.join(export, "manifest.json")) as f:
            self.assertEqual(list(json.load(f)["domains"]), [domain, "generic"])
        sources = self.sources[domain]
        distilled = corpus.read_lines(distill.distilled(domain))
        self.assertLen(distilled, len(sources))
        self.assertEqual(distilled[3], "")  # The empty source.
        self.assertTrue(all(distilled[i] for i in range(len(sources)) if i != 3))
        with open(distill.timing_path(domain)) as f:
            timing = json.load(f)
        self.assertEqual(timing["sentences"], len(sources))
        self.assertEqual((timing["beam"], timing["threads"]), (4, 1))
        self.assertGreater(timing["seconds"], 0)
        lines = "\n".join(call.args[0] for call in log.call_args_list)
        self.assertIn("distill software: %d/%d sentences" % ((len(sources),) * 2), lines)
        with open(os.path.join(self.steps.logs_dir, "distill_software.log")) as f:
            self.assertIn("sentences/s", f.read())  # The progress lines are in its log too.
        # The report's ldr-translate line makes the same translations.
        command = distill.translate_command(domain)
        self.assertIn(("Distil the software training sources", command), self.steps.commands)
        output = os.path.join(self.get_temp_dir(), "again.fr")
        command[command.index("--output") + 1] = output
        status, stderr = helpers.run_cli(translate_cli.main, command[1:])
        self.assertEqual(status, 0, stderr)
        self.assertEqual(corpus.read_lines(output), distilled)
        # With the references: each source twice, with its reference, then its translation.
        source_file, target_file = distill.train_corpora()[domain]
        references = corpus.read_lines(self.train[domain][1])
        self.assertEqual(corpus.read_lines(source_file), [s for s in sources for _ in "12"])
        self.assertEqual(
            corpus.read_lines(target_file),
            [line for pair in zip(references, distilled) for line in pair],
        )
        read = corpora_lib.read_corpora(
            {"train_corpora": {domain: distill.train_corpora()[domain]}}, "train_corpora"
        )
        self.assertEqual(read[0].size, 2 * len(sources))

        # The same inputs: skipped. Another checkpoint of the teacher: due again, saying why.
        with mock.patch.object(common, "log") as log:
            self.steps.run_stage(stage)
        self.assertIn("skipped, done from the same inputs", log.call_args_list[0].args[0])
        self.assertIsNone(self.steps.due(stage))
        before = distill.stamp(domain)
        self.assertNotEqual(distillation.Distillation(self.plan, beam=2).stamp(domain), before)
        plain = distillation.Distillation(self.plan, with_references=False)
        self.assertNotEqual(plain.stamp(domain), before)
        self._teacher(domain, seed=4, step=4)
        self.assertEqual(common.latest_step(model_dir), 4)
        self.assertEqual(self.steps.due(stage), "checkpoint differs")


if __name__ == "__main__":
    tf.test.main()
