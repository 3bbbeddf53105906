"""Exports that translate text (issue 44 item 2): a model trained on the tokenized files of a
corpus built by ``ldr-data`` carries that corpus's tokenizers (CTranslate2 and SavedModel
assets), and a corpus without them is said in one line."""

import contextlib
import io
import json
import os
import shutil

import pyonmttok
import tensorflow as tf
import yaml

from ldr_opennmt import assets
from ldr_opennmt.export import ct2_export
from ldr_opennmt.serving import manifest as manifest_lib
from ldr_opennmt.serving.translator import Translator
from tests import corpus, helpers

OPTIONS = {"mode": "aggressive", "joiner_annotate": True, "segment_numbers": True}
SENTENCES = ["The cell is here.", "the lord's spirit, now!"]


def corpus_model(directory, with_tokenizers=True):
    """A tiny LDR model trained (randomly) on a corpus laid out as ``ldr-data`` writes it:
    ``vocab.LANG``, and with :obj:`with_tokenizers`, ``tokenizer.LANG.yml`` and ``bpe.LANG``
    (recorded with an absolute path, as ldr-data does)."""
    paths = corpus.write_corpus(os.path.join(directory, "raw"), count=20)
    data_dir = os.path.join(directory, "data")
    os.makedirs(data_dir)
    for key, lang in (("src_vocab", "en"), ("tgt_vocab", "fr")):
        vocab = os.path.join(data_dir, "vocab.%s" % lang)
        shutil.copyfile(paths[key], vocab)
        paths[key] = vocab
        if with_tokenizers:
            bpe = os.path.join(data_dir, "bpe.%s" % lang)
            with open(bpe, "w") as f:
                f.write("#version: 0.2\n")
            with open(os.path.join(data_dir, "tokenizer.%s.yml" % lang), "w") as f:
                yaml.safe_dump(
                    {"type": "OpenNMTTokenizer", "params": dict(OPTIONS, bpe_model_path=bpe)}, f
                )
    model = helpers.FAMILIES["ldr_transformer"]()
    model.initialize(corpus.data_config(paths), params={"beam_width": 1})
    model.create_variables()
    helpers.randomize_weights(model, 3)
    return model


class CorpusTokenizersTest(helpers.SharedDirTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.model = corpus_model(os.path.join(cls.dir, "with"))
        cls.bare = corpus_model(os.path.join(cls.dir, "without"), with_tokenizers=False)

    def test_ctranslate2_export_carries_the_corpus_tokenizers(self):
        output_dir = os.path.join(self.dir, "ct2")
        stderr = io.StringIO()
        with contextlib.redirect_stderr(stderr):
            manifest = ct2_export.export(self.model, output_dir, domains=["medical", "generic"])
        self.assertEqual(stderr.getvalue(), "")
        self.assertEqual(manifest["tokenizers"], {"source": "corpus", "target": "corpus"})
        extra = os.path.join(output_dir, "medical", "assets.extra")
        self.assertEqual(
            sorted(os.listdir(extra)),
            ["bpe.en", "bpe.fr", "source_tokenizer_config.yml", "target_tokenizer_config.yml"],
        )
        with open(os.path.join(extra, "source_tokenizer_config.yml")) as f:
            self.assertEqual(yaml.safe_load(f), dict(OPTIONS, bpe_model_path="bpe.en"))
        # The corpus can move: nothing in the export names it.
        shutil.move(os.path.join(self.dir, "with", "data"), os.path.join(self.dir, "moved"))
        self.addCleanup(
            shutil.move, os.path.join(self.dir, "moved"), os.path.join(self.dir, "with", "data")
        )
        translations = Translator(output_dir).translate(SENTENCES, domain="medical")
        # Raw text in, detokenized text out: no joiner left, the same as tokenizing by hand.
        tokenizer = pyonmttok.Tokenizer(bpe_model_path=os.path.join(extra, "bpe.en"), **OPTIONS)
        plain = Translator(output_dir, tokenized=True).translate(
            [" ".join(tokenizer.tokenize(s)[0]) for s in SENTENCES], domain="medical"
        )
        self.assertEqual(translations, [tokenizer.detokenize(p.split()) for p in plain])
        for text in translations:
            self.assertNotIn("￭", text)
        self.assertEqual(
            manifest_lib.read_manifest(output_dir)[manifest_lib.SHA256]["medical"][
                "assets.extra/bpe.en"
            ],
            manifest_lib.file_sha256(os.path.join(extra, "bpe.en")),
        )

    def test_export_without_tokenizers_is_said_in_one_line(self):
        output_dir = os.path.join(self.dir, "bare")
        stderr = io.StringIO()
        with contextlib.redirect_stderr(stderr):
            manifest = ct2_export.export(self.bare, output_dir, domains=["generic"])
        self.assertEqual(manifest["tokenizers"], {"source": None, "target": None})
        lines = stderr.getvalue().splitlines()
        self.assertEqual(len(lines), 1, lines)
        self.assertRegex(
            lines[0],
            r"^ldr-export: note: no source and target tokenizer \(no source_tokenization in the "
            r"configuration, no tokenizer\.LANG\.yml beside .*vocab\.en, .*vocab\.fr\): the "
            r"export translates tokenized text only",
        )
        self.assertFalse(os.path.exists(os.path.join(output_dir, "generic", "assets.extra")))

    def test_the_manifest_records_the_corpus_languages(self):
        # Issue 55 item 4: GET /languages was empty for an export of ldr-data's corpus.
        manifest = ct2_export.make_manifest(self.model, ["generic"], None)
        self.assertEqual((manifest["source_language"], manifest["target_language"]), ("en", "fr"))

        def languages(source, target, corpus_json=None):
            directory = os.path.join(self.dir, "languages", source + "-" + target)
            os.makedirs(directory, exist_ok=True)
            info = os.path.join(directory, ct2_export.CORPUS_INFO)
            if corpus_json is not None:
                with open(info, "w") as f:
                    json.dump(corpus_json, f)
            elif os.path.exists(info):
                os.remove(info)
            return ct2_export.corpus_languages(
                {
                    "source": os.path.join(directory, source),
                    "target": os.path.join(directory, target),
                }
            )

        corpus_json = {"source_lang": "en", "target_lang": "fr"}
        # ldr-data's corpus, in its direction or the other (the vocabularies say which).
        self.assertEqual(languages("vocab.en", "vocab.fr", corpus_json), ("en", "fr"))
        self.assertEqual(languages("vocab.fr", "vocab.en", corpus_json), ("fr", "en"))
        # A corpus.json of other languages, or unreadable: the names are not trusted / are.
        self.assertEqual(languages("vocab.de", "vocab.fr", corpus_json), (None, None))
        self.assertEqual(languages("vocab.de", "vocab.fr", ["not", "a", "corpus"]), ("de", "fr"))
        # Without a corpus.json: two-letter codes only.
        self.assertEqual(languages("vocab.pt-BR", "vocab.en"), ("pt-BR", "en"))
        self.assertEqual(languages("vocab.src", "vocab.tgt"), (None, None))
        self.assertEqual(languages("src.vocab", "tgt.vocab"), (None, None))
        self.assertEqual(languages("vocab.en", "vocab.en"), (None, None))
        corpus_json = {"source_lang": "haw", "target_lang": "en"}
        self.assertEqual(languages("vocab.haw", "vocab.en", corpus_json), ("haw", "en"))

    def test_saved_model_assets_carry_the_corpus_tokenizers(self):
        asset_dir = os.path.join(self.dir, "assets")
        os.makedirs(asset_dir)
        written = assets.export_assets(self.model, asset_dir)
        for name in ("source_tokenizer_config.yml", "target_tokenizer_config.yml"):
            self.assertIn(name, written)
        self.assertEqual(os.path.basename(written["bpe.en"]), "bpe.en")
        with open(written["target_tokenizer_config.yml"]) as f:
            self.assertEqual(yaml.safe_load(f), dict(OPTIONS, bpe_model_path="bpe.fr"))

    def test_saved_model_assets_without_tokenizers_are_said(self):
        asset_dir = os.path.join(self.dir, "bare_assets")
        os.makedirs(asset_dir)
        stderr = io.StringIO()
        with contextlib.redirect_stderr(stderr):
            written = assets.export_assets(self.bare, asset_dir)
        self.assertNotIn("source_tokenizer_config.yml", written)
        self.assertRegex(stderr.getvalue(), r"^ldr-opennmt: note: no source and target tokenizer")

    def test_a_tokenizer_naming_a_missing_file_is_refused(self):
        data_dir = os.path.join(self.dir, "broken")
        os.makedirs(data_dir)
        open(os.path.join(data_dir, "vocab.en"), "w").close()
        with open(os.path.join(data_dir, "tokenizer.en.yml"), "w") as f:
            yaml.safe_dump({"params": {"bpe_model_path": "/nowhere/bpe.en"}}, f)
        with self.assertRaisesRegex(
            ValueError, r"tokenizer\.en\.yml: bpe_model_path: /nowhere/bpe\.en not found"
        ):
            assets.corpus_tokenizer(os.path.join(data_dir, "vocab.en"))


if __name__ == "__main__":
    tf.test.main()
