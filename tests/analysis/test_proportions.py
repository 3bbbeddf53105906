"""The domain-proportion analysis of a mixing model: hand-made proportions and a tiny model."""

import os

import numpy as np
import opennmt
import tensorflow as tf
import yaml

from ldr_opennmt import models
from ldr_opennmt.analysis import proportions
from ldr_opennmt.cli import analyze as cli
from ldr_opennmt.errors import UserError
from ldr_opennmt.layers.mixing import SOURCE, TARGET
from ldr_opennmt.utils import read_lines, write_lines
from tests import corpus, helpers

DEFINITION = "from ldr_opennmt import models\n\n\ndef model():\n    return models.%s(%s)\n"
TINY = ", ".join("%s=%r" % item for item in helpers.TINY.items())


def _hand_made():
    """Two domains, one layer; sentence 0 (domain 0, 3 words), sentence 1 (domain 1,
    1 word then padding that favours domain 0), sentence 2 (generic, 2 words)."""
    padded = np.array(
        [
            [[0.9, 0.1], [0.3, 0.7], [0.6, 0.4]],
            [[0.2, 0.8], [0.99, 0.01], [0.99, 0.01]],
            [[0.5, 0.5], [0.1, 0.9], [0.99, 0.01]],
        ],
        dtype=np.float32,
    )
    sentences = proportions.unpad(padded, [3, 1, 2])
    return proportions.Proportions(
        domains=["medical", "religious"],
        epsilon=0.05,
        layers=[proportions.Layer("encoder/layer_0", SOURCE, sentences)],
        tokens={SOURCE: [["a", "b", "c"], ["d"], ["e", "f"]]},
        domain_ids=np.array([0, 1, -1]),
        labelled=True,
    )


class ProportionFunctionsTest(tf.test.TestCase):
    def test_unpad_and_accuracy_leave_padding_and_generic_sentences_out(self):
        result = _hand_made()
        sentences = result.layers[0].sentences
        self.assertEqual([s.shape for s in sentences], [(3, 2), (1, 2), (2, 2)])
        # Sentence 0: argmax 0, 1, 0 against 0 -> 2 hits; sentence 1: argmax 1 against 1
        # (its padding would miss); sentence 2 is generic.
        self.assertEqual(proportions.argmax_accuracy(sentences, result.domain_ids), (3, 4))
        (layer,) = proportions.statistics(result)
        self.assertEqual((layer.words, layer.correct, layer.labelled), (6, 3, 4))
        self.assertAllClose(layer.mean, [2.6 / 6, 3.4 / 6])
        self.assertEqual(proportions.argmax_accuracy(sentences, [-1, -1, -1]), (0, 0))

    def test_layer_table(self):
        result = _hand_made()
        summary = proportions.statistics(result)
        summary.append(
            proportions.LayerStatistics("decoder/layer_0", TARGET, 0, np.full([2], np.nan), 0, 0)
        )
        self.assertEqual(
            proportions.layer_table(summary, result.domains, with_accuracy=True).splitlines(),
            [
                "| layer | side | positions | mean D(medical) | mean D(religious) "
                "| argmax = domain | labelled positions |",
                "|---|---|---:|---:|---:|---:|---:|",
                "| encoder/layer_0 | source | 6 | 0.433 | 0.567 | 0.750 | 4 |",
                "| decoder/layer_0 | target | 0 | n/a | n/a | n/a | 0 |",
            ],
        )
        self.assertEqual(
            proportions.layer_table(summary[:1], result.domains, with_accuracy=False),
            "| layer | side | positions | mean D(medical) | mean D(religious) |\n"
            "|---|---|---:|---:|---:|\n"
            "| encoder/layer_0 | source | 6 | 0.433 | 0.567 |",
        )

    def test_plots_and_report_are_written(self):
        out = os.path.join(self.get_temp_dir(), "hand")
        lines = proportions.write_report(_hand_made(), out, 1, "ckpt-1")
        for name in ("sentence_1.png", "histograms.png"):
            with open(os.path.join(out, name), "rb") as f:
                self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n", name)
            self.assertGreater(os.path.getsize(os.path.join(out, name)), 1000)
        self.assertEqual(read_lines(os.path.join(out, "proportions.md")), lines)
        self.assertEqual(lines[0], "# Domain proportions of ckpt-1")
        self.assertIn("| encoder/layer_0 | source | 6 | 0.433 | 0.567 | 0.750 | 4 |", lines)
        self.assertFalse([n for n in os.listdir(out) if n.endswith(".partial")])
        with self.assertRaisesRegex(UserError, "--sentence 3 is out of range"):
            proportions.plot_sentence(_hand_made(), 3, os.path.join(out, "x.png"))


class TinyModelTest(tf.test.TestCase):
    def setUp(self):
        super().setUp()
        self.model, self.paths = helpers.build_model(self, "mixing_transformer")

    def test_proportions_of_every_layer_and_position(self):
        model, paths = self.model, self.paths
        result = proportions.compute(
            model,
            paths["test_src"],
            labels_file=paths["test_domain"],
            target_file=paths["test_tgt"],
            batch_size=4,
            max_sentences=5,
            progress=False,
        )
        self.assertEqual(
            [(layer.label, layer.side) for layer in result.layers],
            [
                ("encoder/layer_0", SOURCE),
                ("decoder/layer_0", TARGET),
                ("decoder/layer_0/memory", SOURCE),
            ],
        )
        sources = read_lines(paths["test_src"])[:5]
        targets = read_lines(paths["test_tgt"])[:5]
        labels = read_lines(paths["test_domain"])[:5]
        self.assertEqual(result.tokens[SOURCE], [s.split() for s in sources])
        self.assertEqual(result.tokens[TARGET], [["<s>"] + t.split() for t in targets])
        self.assertAllEqual(result.domain_ids, [corpus.DOMAINS.index(d) for d in labels])
        self.assertTrue(result.labelled)
        self.assertEqual(result.domains, corpus.DOMAINS)
        for layer in result.layers:
            self.assertLen(layer.sentences, 5)
            for i, values in enumerate(layer.sentences):
                self.assertEqual(values.shape, (len(result.tokens[layer.side][i]), 3))
                self.assertAllClose(values.sum(axis=-1), np.ones(len(values)), atol=1e-5)
                self.assertAllGreaterEqual(values, 0.05 / 3 - 1e-6)
        # The same proportions as one batch through the model.
        dataset = model.examples_inputter.make_evaluation_dataset(
            [paths["test_src"], paths["test_domain"]], paths["test_tgt"], 5
        )
        features, labels = next(iter(dataset))
        for layer, record in zip(result.layers, model.compute_proportions(features, labels)):
            for i, values in enumerate(layer.sentences):
                self.assertAllClose(values, record.proportions[i, : len(values)], atol=1e-5)

    def test_source_alone_and_report(self):
        result = proportions.compute(self.model, self.paths["test_src"], progress=False)
        self.assertEqual([layer.label for layer in result.layers], ["encoder/layer_0"])
        self.assertLen(result.domain_ids, 6)
        self.assertAllEqual(result.domain_ids, [-1] * 6)
        self.assertFalse(result.labelled)
        out = os.path.join(self.get_temp_dir(), "out")
        lines = proportions.write_report(result, out, 2, "ckpt")
        self.assertTrue(os.path.getsize(os.path.join(out, "sentence_2.png")))
        self.assertTrue(os.path.getsize(os.path.join(out, "histograms.png")))
        table = [line for line in lines if line.startswith("| encoder/layer_0 |")]
        self.assertLen(table, 1)
        self.assertLen(table[0].split("|"), 2 + 3 + 3)  # No accuracy column.

    def test_refusals(self):
        model, paths = self.model, self.paths
        directory = self.get_temp_dir()
        short = os.path.join(directory, "short.domain")
        write_lines(short, read_lines(paths["test_domain"])[:-1])
        cases = [
            (dict(features_file=os.path.join(directory, "nope.en")), "nope.en: no such source"),
            (dict(target_file=os.path.join(directory, "nope.fr")), "nope.fr: no such target"),
            (dict(labels_file=short), "short.domain:6: missing domain label"),
            (dict(target_file=paths["train_tgt"]), "train.tgt has 60 lines, but .* has 6"),
            (
                dict(sentence=6),
                "--sentence 6 is out of range: .* 6 sentence\\(s\\) .* \\(0 to 5\\)",
            ),
            (dict(sentence=2, max_sentences=2), "--sentence 2 is out of range"),
            (dict(sentence=-1), "--sentence -1 is out of range"),
        ]
        for arguments, regex in cases:
            arguments = dict(dict(features_file=paths["test_src"]), **arguments)
            with self.assertRaisesRegex(UserError, regex):
                proportions.check_inputs(model, **arguments)
        self.assertEqual(proportions.check_inputs(model, paths["test_src"], max_sentences=4), 4)
        with self.assertRaisesRegex(
            UserError, "needs a domain-mixing model .*, got a MultiDomainTransformer$"
        ):
            proportions.check_inputs(models.mixed_transformer(**helpers.TINY), paths["test_src"])


class ProportionsCommandTest(tf.test.TestCase):
    def _model_dir(self, family, model=None, paths=None):
        """A model directory (definition, checkpoint of :obj:`model`) and its config."""
        directory = self.get_temp_dir()
        if paths is None:
            paths = corpus.write_corpus(os.path.join(directory, "data"), count=10)
        model_dir = os.path.join(directory, family)
        os.makedirs(model_dir)
        with open(os.path.join(model_dir, "model_description.py"), "w") as f:
            f.write(DEFINITION % (family, TINY))
        if model is not None:
            opennmt.utils.checkpoint.Checkpoint(model, model_dir=model_dir).save(step=2)
        config = {
            "model_dir": model_dir,
            "data": {
                "domains": corpus.DOMAINS,
                "source_vocabulary": paths["src_vocab"],
                "target_vocabulary": paths["tgt_vocab"],
            },
        }
        config_path = os.path.join(directory, family + ".yml")
        with open(config_path, "w") as f:
            yaml.safe_dump(config, f)
        return config_path, paths

    def test_refuses_a_model_that_does_not_mix_domains(self):
        config_path, paths = self._model_dir("mixed_transformer")
        argv = ["proportions", "--config", config_path, "--features_file", paths["test_src"]]
        helpers.assert_cli_error(
            self,
            cli.main,
            argv + ["--out", self.get_temp_dir()],
            "^ldr-analyze proportions needs a domain-mixing model .*, got a "
            "MultiDomainTransformer in .*mixed_transformer$",
        )

    def test_command(self):
        model, paths = helpers.build_model(self, "mixing_transformer")
        config_path, _ = self._model_dir("mixing_transformer", model=model, paths=paths)
        out = os.path.join(self.get_temp_dir(), "analysis")
        argv = ["proportions", "--config", config_path, "--features_file", paths["test_src"]]
        argv += ["--labels_file", paths["test_domain"], "--target_file", paths["test_tgt"]]
        self.assertEqual(cli.main(argv + ["--sentence", "3", "--out", out]), 0)
        self.assertEqual(
            sorted(os.listdir(out)), ["histograms.png", "proportions.md", "sentence_3.png"]
        )
        report = read_lines(os.path.join(out, "proportions.md"))
        self.assertTrue(report[0].endswith("ckpt-2"), report[0])
        words = sum(len(line.split()) for line in read_lines(paths["test_src"]))
        self.assertIn("| decoder/layer_0/memory | source | %d |" % words, "\n".join(report))
        helpers.assert_cli_error(
            self, cli.main, argv + ["--sentence", "6", "--out", out], "--sentence 6 is out of range"
        )


if __name__ == "__main__":
    tf.test.main()
