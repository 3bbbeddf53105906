"""Folding multi-domain Transformers into plain ones, and their CTranslate2 export.

Exactness: for every declared domain and generic, the folded plain TF model and
the CTranslate2 model converted from it give the multi-domain model's greedy
translations token for token, and its per-token log-probabilities on given
targets (teacher forcing: a continuous check that greedy ties cannot hide).
"""

import os
from unittest import mock

import ctranslate2
import opennmt
import pytest
import tensorflow as tf
from parameterized import parameterized

from ldr_opennmt.errors import UserError
from ldr_opennmt.export import ct2_export, folding
from ldr_opennmt.inputters import MultiDomainInputter
from ldr_opennmt.layers.context import DomainSpecificLayer
from tests import helpers

SOURCES = ["the big cell", "a host is here", "spirit", "cell host spirit now", "small red host"]
TARGETS = ["le grand case", "un hostie est ici", "esprit", "cachot hote alcool maintenant", "rouge"]
MAX_LENGTH = 10
# Seeds of the helper's random weights for which the tiny random models do not
# translate everything alike, so that each domain's output differs, and give no empty
# translation (seen with SF and DF at seed 7: TensorFlow ends at step 0 where
# CTranslate2 3.24 goes on, which says nothing about the fold).
SEEDS = {
    "ldr_transformer": 5,
    "ldr_transformer_target": 3,
    "dc_transformer": 2,
    "mixed_transformer": 7,
    "factorized_pa": 7,
    "factorized_sf": 4,
    "factorized_df": 1,
}
FAMILIES = [(family,) for family in SEEDS]
CONVERTER_HINT = "ldr-export ctranslate2"


def _build(test, family):
    model, _ = helpers.build_model(
        test, family, params={"maximum_decoding_length": MAX_LENGTH}, seed=SEEDS[family]
    )
    return model


def _tokens(sentences):
    return helpers.padded_tokens([s.split() for s in sentences])


def _source_features(model, domain):
    if isinstance(model.features_inputter, MultiDomainInputter):
        return helpers.source_features(model, SOURCES, [domain] * len(SOURCES))
    return model.features_inputter.make_features(features=_tokens(SOURCES))


def _greedy(model, domain=None):
    """(token lists, log probs) of the greedy translations of SOURCES."""
    outputs = model.infer(_source_features(model, domain))
    tokens = [
        [t.decode() for t in hypotheses[0][: lengths[0]]]
        for hypotheses, lengths in zip(outputs["tokens"].numpy(), outputs["length"].numpy())
    ]
    return tokens, outputs["log_probs"].numpy()[:, 0]


def _target_log_probs(model, domain=None):
    """The log-probability of each token of TARGETS (and </s>) given SOURCES."""
    labels = model.labels_inputter.make_features(features=_tokens(TARGETS))
    outputs, _ = model(_source_features(model, domain), labels=labels, training=False)
    log_probs = tf.nn.log_softmax(outputs["logits"])
    picked = tf.gather(log_probs, labels["ids_out"], batch_dims=2).numpy()
    return [picked[i, :n] for i, n in enumerate(labels["length"].numpy())]


def _translator(model_dir):
    return ctranslate2.Translator(model_dir, device="cpu", inter_threads=1, intra_threads=1)


@pytest.mark.slow
class FoldingTest(tf.test.TestCase):
    @parameterized.expand(FAMILIES)
    def test_folded_and_ctranslate2_models_translate_as_the_multi_domain_model(self, family):
        model = _build(self, family)
        expected = {
            domain: (_greedy(model, domain), _target_log_probs(model, domain))
            for domain in model.domains + ["generic"]
        }
        translations = {domain: greedy[0] for domain, (greedy, _) in expected.items()}
        # The domain changes the translations (Mixed: it must not), so the test has power.
        distinct = {str(tokens) for tokens in translations.values()}
        self.assertEqual(len(distinct) == 1, family == "mixed_transformer", translations)

        # (a) The folded plain TensorFlow model.
        plain = folding.plain_transformer(model)
        self.assertIs(type(plain), opennmt.models.Transformer)
        self.assertIs(type(plain.features_inputter), opennmt.inputters.WordEmbedder)
        self.assertIs(type(plain.labels_inputter), opennmt.inputters.WordEmbedder)
        for domain, ((tokens, log_probs), scores) in expected.items():
            folding.assign_domain(plain, model, domain)
            plain_tokens, plain_log_probs = _greedy(plain)
            self.assertEqual(plain_tokens, tokens, domain)
            self.assertAllClose(plain_log_probs, log_probs, atol=1e-4)
            for plain_scores, expected_scores in zip(_target_log_probs(plain), scores):
                self.assertAllClose(plain_scores, expected_scores, atol=1e-4)

        # (b) The CTranslate2 models exported from the folds.
        output_dir = os.path.join(self.get_temp_dir(), "ct2")
        manifest = ct2_export.export(model, output_dir)
        self.assertEqual(ct2_export.read_manifest(output_dir), manifest)
        self.assertEqual(manifest["domains"], {d: d for d in expected})
        self.assertEqual(
            sorted(os.listdir(output_dir)), sorted(list(expected) + [ct2_export.MANIFEST])
        )
        self.assertEqual(manifest["domain_specific"], family != "mixed_transformer")
        sources = [s.split() for s in SOURCES]
        targets = [t.split() for t in TARGETS]
        for domain, ((tokens, _), scores) in expected.items():
            translator = _translator(os.path.join(output_dir, manifest["domains"][domain]))
            results = translator.translate_batch(
                sources, beam_size=1, max_decoding_length=MAX_LENGTH
            )
            self.assertEqual([r.hypotheses[0] for r in results], tokens, domain)
            for result, expected_scores in zip(translator.score_batch(sources, targets), scores):
                # Other kernels: about 1e-5 relative on log-probs of magnitude 10 here.
                self.assertAllClose(result.log_probs, expected_scores, rtol=1e-4, atol=1e-3)

    def test_fold_one_domain(self):
        model = _build(self, "ldr_transformer_target")
        plain = folding.fold(model, "religious")
        self.assertEqual(_greedy(plain)[0], _greedy(model, "religious")[0])
        self.assertNotEqual(_greedy(plain)[0], _greedy(model, "medical")[0])

    @parameterized.expand([("ldr_rnn",), ("dc_rnn",), ("mixed_rnn",)])
    def test_rnn_is_refused(self, family):
        model, _ = helpers.build_model(self, family)
        with self.assertRaisesRegex(UserError, "CTranslate2 3.x converts only .*Transformer"):
            folding.fold(model, "generic")
        output_dir = os.path.join(self.get_temp_dir(), "rnn")
        with self.assertRaisesRegex(UserError, "Transformer"):
            ct2_export.export(model, output_dir)
        self.assertFalse(os.path.exists(output_dir))

    @parameterized.expand(
        [
            ("residual_adapters", "residual adapters are not linear"),
            ("ttm_transformer", "TTM forces the domain token"),
            ("ml_transformer", "the ML/AdvL exports are SavedModels only"),
            ("advl_transformer", "the ML/AdvL exports are SavedModels only"),
            ("ldr_transformer_released", r"the LDR transform after every layer \(ldr_transform="),
        ]
    )
    def test_families_without_a_fold_are_refused(self, family, reason):
        model, _ = helpers.build_model(self, family)
        output_dir = os.path.join(self.get_temp_dir(), "ct2_" + family)
        message = "^%s cannot be exported to CTranslate2: %s" % (type(model).__name__, reason)
        with self.assertRaisesRegex(UserError, message):
            ct2_export.export(model, output_dir)
        exporter = opennmt.utils.exporters.make_exporter("ctranslate2")
        with self.assertRaisesRegex(UserError, "^CTranslate2Exporter cannot export .*" + reason):
            model.export(output_dir, exporter=exporter)
        self.assertFalse(os.path.exists(output_dir))

    def test_unknown_domain_is_refused(self):
        model = _build(self, "ldr_transformer")
        message = r"unknown domain 'legal' \(declared: medical, religious, software, generic\)"
        with self.assertRaisesRegex(UserError, message):
            folding.fold(model, "legal")
        output_dir = os.path.join(self.get_temp_dir(), "unknown")
        with self.assertRaisesRegex(UserError, message):
            ct2_export.export(model, output_dir, domains=["medical", "legal"])
        self.assertFalse(os.path.exists(output_dir))
        self.assertFalse(any(".partial-" in name for name in os.listdir(self.get_temp_dir())))

    @parameterized.expand(FAMILIES)
    def test_ctranslate2_converter_is_blocked(self, family):
        model = _build(self, family)
        output_dir = os.path.join(self.get_temp_dir(), "ct2_" + family)
        converter = ctranslate2.converters.OpenNMTTFConverter(model)
        with self.assertRaisesRegex(UserError, "cannot convert a multi-domain.*" + CONVERTER_HINT):
            converter.convert(output_dir)
        self.assertFalse(os.path.exists(output_dir))
        # OpenNMT-tf's own CTranslate2 exporter (onmt-main export --format ctranslate2).
        exporter = opennmt.utils.exporters.make_exporter("ctranslate2")
        with self.assertRaisesRegex(UserError, CONVERTER_HINT):
            model.export(output_dir, exporter=exporter)
        self.assertFalse(os.path.exists(output_dir))

    @parameterized.expand(FAMILIES)
    def test_source_embedding_is_not_a_table_of_domain_aware_embedders(self, family):
        model = _build(self, family)
        if not isinstance(folding.source_embedder(model), DomainSpecificLayer):
            # Mixed, Factorized PA and SF: a plain source table, the same for every domain.
            self.assertIs(
                model.features_inputter.embedding, folding.source_embedder(model).embedding
            )
        else:
            with self.assertRaisesRegex(UserError, "not a single table.*" + CONVERTER_HINT):
                _ = model.features_inputter.embedding


@pytest.mark.slow
class CTranslate2ExportTest(tf.test.TestCase):
    def test_manifest(self):
        model = _build(self, "ldr_transformer_target")
        output_dir = os.path.join(self.get_temp_dir(), "ct2")
        checkpoint = {"name": "ckpt-3", "step": 3, "sha256": "0" * 64}
        manifest = ct2_export.export(model, output_dir, checkpoint=checkpoint)
        self.assertEqual(ct2_export.read_manifest(output_dir), manifest)
        self.assertEqual(manifest["format"], "ldr-opennmt-ctranslate2")
        self.assertEqual(manifest["model"], "MultiDomainTransformer")
        self.assertEqual(manifest["source_embedder"], "LDREmbedder")
        self.assertEqual(manifest["target_embedder"], "LDREmbedder")
        self.assertEqual(manifest["checkpoint"], checkpoint)
        self.assertEqual(manifest["declared_domains"], ["medical", "religious", "software"])
        self.assertTrue(manifest["domain_specific"])
        self.assertIsNone(manifest["quantization"])
        # Basenames (issue 44 item 1): each model directory holds its own vocabularies.
        self.assertEqual(
            manifest["source_vocabulary"],
            os.path.basename(model.features_inputter.vocabulary_file),
        )
        self.assertEqual(
            manifest["target_vocabulary"], os.path.basename(model.labels_inputter.vocabulary_file)
        )
        for domain, directory in manifest["domains"].items():
            names = os.listdir(os.path.join(output_dir, directory))
            self.assertIn("model.bin", names)
            self.assertIn("model.bin", manifest["sha256"][domain])

    def test_quantization_and_selected_domains(self):
        model = _build(self, "dc_transformer")
        output_dir = os.path.join(self.get_temp_dir(), "int8")
        manifest = ct2_export.export(
            model, output_dir, domains=["software", "generic"], quantization="int8"
        )
        self.assertEqual(manifest["quantization"], "int8")
        self.assertEqual(sorted(os.listdir(output_dir)), ["generic", "manifest.json", "software"])
        results = _translator(os.path.join(output_dir, "software")).translate_batch(
            [s.split() for s in SOURCES], beam_size=1, max_decoding_length=MAX_LENGTH
        )
        self.assertLen(results, len(SOURCES))
        with self.assertRaisesRegex(ValueError, "invalid quantization 'int4'"):
            ct2_export.export(model, os.path.join(self.get_temp_dir(), "int4"), quantization="int4")

    def test_existing_output_is_replaced_only_with_force(self):
        model = _build(self, "mixed_transformer")
        parent = os.path.join(self.get_temp_dir(), "replace")
        output_dir = os.path.join(parent, "ct2")
        os.makedirs(output_dir)
        with open(os.path.join(output_dir, "stale"), "w") as f:
            f.write("old\n")
        with self.assertRaisesRegex(UserError, "already exists .*--force"):
            ct2_export.export(model, output_dir, domains=["generic"])
        # --force replaces an earlier export only: this directory is not one (a model
        # directory with its checkpoints would be lost).
        with self.assertRaisesRegex(UserError, "replaces only an earlier export .*not one"):
            ct2_export.export(model, output_dir, domains=["generic"], force=True)
        self.assertEqual(os.listdir(output_dir), ["stale"])
        os.remove(os.path.join(output_dir, "stale"))
        os.rmdir(output_dir)
        ct2_export.export(model, output_dir, domains=["generic"])
        with open(os.path.join(output_dir, "stale"), "w") as f:
            f.write("old\n")
        ct2_export.export(model, output_dir, domains=["generic"], force=True)
        self.assertEqual(sorted(os.listdir(output_dir)), ["generic", "manifest.json"])
        self.assertEqual(os.listdir(parent), ["ct2"])  # no partial or old directory left
        # A manifest of another format, or a link to an export, is not replaced either.
        other = os.path.join(parent, "other")
        os.makedirs(other)
        with open(os.path.join(other, "manifest.json"), "w") as f:
            f.write('{"format": "something-else"}\n')
        with self.assertRaisesRegex(UserError, "replaces only an earlier export"):
            ct2_export.export(model, other, domains=["generic"], force=True)
        link = os.path.join(parent, "link")
        os.symlink(output_dir, link)
        with self.assertRaisesRegex(UserError, "a symbolic link"):
            ct2_export.export(model, link, domains=["generic"], force=True)
        self.assertTrue(os.path.isfile(os.path.join(output_dir, "manifest.json")))
        self.assertEqual(os.listdir(os.path.join(parent, "other")), ["manifest.json"])
        os.remove(link)

    def test_failed_export_leaves_nothing(self):
        model = _build(self, "ldr_transformer")
        parent = os.path.join(self.get_temp_dir(), "failed")
        convert = ct2_export.convert

        def _convert(plain, model_dir, quantization=None, **kwargs):
            if os.path.basename(model_dir) == "software":
                raise RuntimeError("disk full")
            return convert(plain, model_dir, quantization=quantization, **kwargs)

        with mock.patch.object(ct2_export, "convert", _convert):
            with self.assertRaisesRegex(RuntimeError, "disk full"):
                ct2_export.export(model, os.path.join(parent, "ct2"))
        self.assertEqual(os.listdir(parent), [])


if __name__ == "__main__":
    tf.test.main()
