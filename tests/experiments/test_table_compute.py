"""Dev BLEU against training compute (issue 59 item 4): the checkpoints a curve reads, its
compute, the flat criterion and a real curve of a tiny model."""

import math
import os
import types

import opennmt
import tensorflow as tf
import yaml

from ldr_experiments import table_compute
from tests import corpus as tiny
from tests import helpers

DEFINITION = """from ldr_opennmt import models, upstream

upstream.install()


def model():
    return models.mixed_transformer(%s)
"""


def _checkpoint_file(model_dir, steps, absolute=False):
    os.makedirs(model_dir, exist_ok=True)

    def name(step):
        return os.path.join(model_dir, "ckpt-%d" % step) if absolute else "ckpt-%d" % step

    lines = ['model_checkpoint_path: "%s"' % name(steps[-1])]
    lines += ['all_model_checkpoint_paths: "%s"' % name(step) for step in steps]
    with open(os.path.join(model_dir, "checkpoint"), "w") as f:
        f.write("\n".join(lines) + "\n")


class CurvePointsTest(tf.test.TestCase):
    def test_the_kept_checkpoints_by_step(self):
        model_dir = os.path.join(self.get_temp_dir(), "mixed")
        _checkpoint_file(model_dir, [3375, 1125, 4500, 2250])
        self.assertEqual(
            table_compute.kept_checkpoints(model_dir),
            [
                (step, os.path.join(model_dir, "ckpt-%d" % step))
                for step in (1125, 2250, 3375, 4500)
            ],
        )
        self.assertEqual(table_compute.kept_checkpoints(os.path.join(model_dir, "none")), [])

    def test_a_continuation_extends_its_base_and_passes_count_compute(self):
        base = types.SimpleNamespace(name="Mixed", model_dir=os.path.join(self.get_temp_dir(), "b"))
        more = types.SimpleNamespace(
            name="Mixed (equal passes)", model_dir=os.path.join(self.get_temp_dir(), "c")
        )
        _checkpoint_file(base.model_dir, [2250, 4500])
        _checkpoint_file(more.model_dir, [4500, 6750, 9000], absolute=True)
        points = table_compute.curve_points([base, more], 1)
        self.assertEqual([(p[0], p[1]) for p in points], [(s, s) for s in (2250, 4500, 6750, 9000)])
        # The step both hold is the base's checkpoint.
        self.assertIs(points[1][3], base)
        self.assertIs(points[2][3], more)
        summed = table_compute.curve_points([base], 2)
        self.assertEqual([p[1] for p in summed], [4500, 9000])

    def test_the_plan_s_curves_start_at_their_first_row(self):
        trained = [
            types.SimpleNamespace(name=name, model_dir="x")
            for name in ("Mixed", "Mixed (equal passes)", "LDR (summed)", "Mixed (seed 2)")
        ]
        plan = types.SimpleNamespace(trained=trained)
        curves = table_compute.plan_curves(plan)
        self.assertEqual(
            [(name, passes) for name, passes, _ in curves], [("Mixed", 1), ("LDR (summed)", 2)]
        )
        self.assertEqual([t.name for t in curves[0][2]], ["Mixed", "Mixed (equal passes)"])


class FlatTest(tf.test.TestCase):
    def test_the_gain_of_a_quarter_more_compute_on_a_log_axis(self):
        # Doubling compute gains 2 BLEU: 25% more gains 2 * log(1.25) / log(2).
        rate = table_compute.gain_per_quarter([(1000, 20.0), (4500, 27.0), (9000, 29.0)])
        self.assertAlmostEqual(rate, 2 * math.log(1.25) / math.log(2))
        self.assertIsNone(table_compute.gain_per_quarter([(9000, 29.0)]))
        line = table_compute.flat_verdict("Mixed", [(4500, 27.0), (9000, 29.0)])
        self.assertIn("**not flat** at 9000 passes", line)
        self.assertIn("+0.64 BLEU per 25% more compute from 4500 to 9000", line)
        self.assertIn("(2x the criterion)", line)
        flat = table_compute.flat_verdict("Mixed", [(4500, 29.0), (9000, 29.4)])
        self.assertIn("**flat**", flat)
        self.assertIn("fewer than two", table_compute.flat_verdict("LDR", [(9000, 29.0)]))

    def test_the_section_has_a_row_per_point_and_the_plot(self):
        out = self.get_temp_dir()
        figures = {
            "curves": [
                {
                    "name": "Mixed",
                    "passes_per_step": 1,
                    "points": [
                        dict(step=s, passes=s, avg=b, bleu={"a": b, "b": b}, chrf={})
                        for s, b in ((2250, 20.0), (4500, 24.0))
                    ],
                },
                {"name": "DC (summed)", "passes_per_step": 2, "points": []},
            ]
        }
        lines = table_compute.curve_section(figures, out)
        text = "\n".join(lines)
        self.assertIn("| Mixed | 4500 | 4500 | 24.0 | 24.0 | 24.0 |", text)
        self.assertNotIn("DC (summed)", text)
        self.assertIn("- Mixed: **not flat** at 4500 passes", text)
        self.assertTrue(os.path.exists(os.path.join(out, table_compute.CURVE_PLOT)))
        self.assertEqual(table_compute.curve_section(None, out), [])


class MeasureTest(tf.test.TestCase):
    """A curve measured on the kept checkpoints of a tiny model (saved at steps 3 and 6, with
    other weights), on a corpus directory laid out as ``ldr-data`` lays it out."""

    def test_every_kept_checkpoint_is_scored_on_every_dev_set(self):
        directory = self.get_temp_dir()
        test = types.SimpleNamespace(get_temp_dir=lambda: directory)
        model, paths = helpers.build_model(test, "mixed_transformer", seed=3)
        model_dir = os.path.join(directory, "mixed")
        os.makedirs(model_dir)
        with open(os.path.join(model_dir, "model_description.py"), "w") as f:
            f.write(DEFINITION % ", ".join("%s=%r" % item for item in helpers.TINY.items()))
        checkpoint = opennmt.utils.checkpoint.Checkpoint(model, model_dir=model_dir)
        checkpoint.save(step=3)
        helpers.randomize_weights(model, 4)
        checkpoint.save(step=6)
        config = {
            "model_dir": model_dir,
            "data": dict(tiny.data_config(paths)),
            "params": {"beam_width": 1, "maximum_decoding_length": 6},
        }
        config_path = os.path.join(directory, "mixed.yml")
        with open(config_path, "w") as f:
            yaml.safe_dump(config, f)
        # The dev sets: two pairs per domain, tokenized sources and raw references.
        corpus_dir = os.path.join(directory, "corpus_dir")
        os.makedirs(os.path.join(corpus_dir, "raw"))
        for domain in tiny.DOMAINS:
            pairs = tiny.make_pairs(domain, 2, seed=5)
            tiny.write_lines(os.path.join(corpus_dir, "dev.%s.en" % domain), [s for s, _ in pairs])
            tiny.write_lines(os.path.join(corpus_dir, "dev.%s.domain" % domain), [domain] * 2)
            tiny.write_lines(
                os.path.join(corpus_dir, "raw", "dev.%s.fr" % domain), [t for _, t in pairs]
            )
        trained = types.SimpleNamespace(
            name="Mixed", model_dir=model_dir, config_paths=[config_path]
        )
        logged = []
        figures = table_compute.measure(
            types.SimpleNamespace(trained=[trained]),
            corpus_dir,
            "en",
            "fr",
            tiny.DOMAINS,
            " ".join,
            log=logged.append,
        )
        (curve,) = figures["curves"]
        self.assertEqual(curve["name"], "Mixed")
        self.assertEqual([(p["step"], p["passes"]) for p in curve["points"]], [(3, 3), (6, 6)])
        for point in curve["points"]:
            self.assertEqual(sorted(point["bleu"]), sorted(tiny.DOMAINS))
            self.assertAllClose(point["avg"], sum(point["bleu"].values()) / 3)
            self.assertTrue(all(0 <= value <= 100 for value in point["chrf"].values()))
        # Each checkpoint translated with its own weights.
        self.assertNotEqual(curve["points"][0]["chrf"], curve["points"][1]["chrf"])
        self.assertEqual(len(logged), 2)
