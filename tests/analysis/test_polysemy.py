"""The polysemy analysis: hand-set embeddings whose neighbours are known."""

import collections
import csv
import os

import numpy as np
import tensorflow as tf
import yaml

from ldr_opennmt import models
from ldr_opennmt.analysis import polysemy
from ldr_opennmt.cli import analyze as cli
from ldr_opennmt.errors import UserError
from tests import corpus, helpers

VOCAB = ["<blank>", "bank", "money", "river", "big", "small"]
TABLES = {
    # "bank" is near "money" in finance and near "river" in geography; "big" is
    # near "small" in both.
    "finance": np.array(
        [[0, 0, 0, 0], [1, 0, 0, 0], [1, 0.1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1], [0, 0, 0.1, 1]],
        dtype=np.float32,
    ),
    "geography": np.array(
        [[0, 0, 0, 0], [0, 0, 1, 0.1], [1, 0.1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1], [0, 0, 0.1, 1]],
        dtype=np.float32,
    ),
}
COUNTS = {
    "finance": collections.Counter({t: 40 for t in VOCAB[1:]}),
    "geography": collections.Counter({t: 40 for t in VOCAB[1:]}),
}

MODEL_DEF = (
    "from ldr_opennmt import models\n\n\ndef model():\n"
    "    return models.ldr_transformer(num_layers=1, num_units=16, num_heads=2,"
    " ffn_inner_dim=32, dropout=0.0, domain_region_size=2)\n"
)


class PolysemyTest(tf.test.TestCase):
    def test_neighbours_and_intersections(self):
        units = {u.token: u for u in polysemy.analyze(TABLES, VOCAB, COUNTS, min_count=30, k=1)}
        self.assertNotIn("<blank>", units)  # never counted
        self.assertEqual(units["bank"].neighbours, {"finance": ["money"], "geography": ["river"]})
        self.assertEqual(units["bank"].intersection, 0)
        self.assertEqual(units["big"].neighbours, {"finance": ["small"], "geography": ["small"]})
        self.assertEqual(units["big"].intersection, 1)
        polysemous, monosemous = polysemy.extremes(list(units.values()), top=1)
        self.assertEqual(polysemous[0].intersection, 0)
        self.assertEqual(monosemous[0].intersection, 1)
        self.assertIn(
            "| bank | 0 | money | river |", polysemy.neighbour_table(polysemous + [units["bank"]])
        )

    def test_threshold_leaving_no_unit(self):
        with self.assertRaisesRegex(UserError, "0 unit\\(s\\) occur at least 41 times"):
            polysemy.analyze(TABLES, VOCAB, COUNTS, min_count=41)

    def _model_dir(self):
        directory = self.get_temp_dir()
        paths = corpus.write_corpus(os.path.join(directory, "data"), count=10)
        train = corpus.write_domain_corpora(
            os.path.join(directory, "data"), {d: 40 for d in corpus.DOMAINS}
        )
        model_dir = os.path.join(directory, "run")
        os.makedirs(model_dir, exist_ok=True)
        config = {
            "model_dir": model_dir,
            "data": {
                "source_vocabulary": paths["src_vocab"],
                "target_vocabulary": paths["tgt_vocab"],
                "train_corpora": train,
            },
        }
        config_path = os.path.join(directory, "config.yml")
        with open(config_path, "w") as f:
            yaml.safe_dump(config, f)
        return config, config_path, paths

    def test_command_on_a_hand_set_ldr_model(self):
        config, config_path, paths = self._model_dir()
        with open(os.path.join(config["model_dir"], "model_description.py"), "w") as f:
            f.write(MODEL_DEF)
        model = models.ldr_transformer(
            num_layers=1,
            num_units=16,
            num_heads=2,
            ffn_inner_dim=32,
            dropout=0.0,
            domain_region_size=2,
        )
        data = dict(config["data"], domains=corpus.DOMAINS)
        data["train_features_file"] = [paths["train_src"], paths["train_domain"]]
        model.initialize(data)
        model.create_variables()
        embedder = model.features_inputter.word_inputter
        with open(paths["src_vocab"]) as f:
            vocab = f.read().splitlines()
        index = {token: i for i, token in enumerate(vocab)}
        rng = np.random.RandomState(0)
        # Fused embedding = [generic (10 cells), region of domain k at cells 10+2k..11+2k].
        generic = rng.normal(scale=0.01, size=embedder.embedding.shape).astype(np.float32)
        generic[index["big"]] = generic[index["small"]] = 1.0  # same direction everywhere
        embedder.embedding.assign(generic)
        embedder.fusion_kernel.assign(np.eye(10, 16, dtype=np.float32))
        embedder.fusion_bias.assign(np.zeros(16, np.float32))
        regions = {
            # cell shares its region with host in medical, with spirit in religious.
            0: {"cell": [5, 0], "host": [5, 0]},
            1: {"cell": [0, 5], "spirit": [0, 5]},
            2: {"cell": [5, 5]},
        }
        for k in range(3):
            table = np.zeros(embedder.domain_embeddings[k].shape, np.float32)
            for token, vector in regions[k].items():
                table[index[token]] = vector
            embedder.domain_embeddings[k].assign(table)
            embedder.domain_kernels[k].assign(np.eye(2, 16, 10 + 2 * k, dtype=np.float32))
        tf.train.Checkpoint(model=model).save(os.path.join(config["model_dir"], "ckpt"))

        out = os.path.join(self.get_temp_dir(), "analysis")
        argv = ["polysemy", "--config", config_path, "--min-count", "1", "--k", "1"]
        self.assertEqual(cli.main(argv + ["--out", out, "--top", "3"]), 0)
        with open(os.path.join(out, "polysemy.csv")) as f:
            rows = {row["unit"]: row for row in csv.DictReader(f)}
        self.assertEqual(rows["cell"]["neighbours_medical"], "host")
        self.assertEqual(rows["cell"]["neighbours_religious"], "spirit")
        self.assertEqual(rows["cell"]["intersection"], "0")
        for domain in corpus.DOMAINS:
            self.assertEqual(rows["big"]["neighbours_%s" % domain], "small")
        self.assertEqual(rows["big"]["intersection"], "1")
        self.assertGreater(int(rows["big"]["count_medical"]), 0)
        self.assertTrue(os.path.exists(os.path.join(out, "polysemy.png")))
        with open(os.path.join(out, "polysemy.md")) as f:
            self.assertIn("Most polysemous", f.read())

    def test_refuses_a_model_without_ldr_regions(self):
        config, config_path, _ = self._model_dir()
        with open(os.path.join(config["model_dir"], "model_description.py"), "w") as f:
            f.write(
                MODEL_DEF.replace("ldr_transformer", "mixed_transformer").replace(
                    ", domain_region_size=2", ""
                )
            )
        helpers.assert_cli_error(
            self,
            cli.main,
            ["polysemy", "--config", config_path, "--out", self.get_temp_dir()],
            "has no LDR regions",
        )


if __name__ == "__main__":
    tf.test.main()
