"""``ldr-translate`` on raw text against ``onmt-main infer``, and its bad input."""

import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from unittest import mock

import pyonmttok
import pytest
import tensorflow as tf
import yaml
from parameterized import parameterized

from ldr_opennmt import models
from ldr_opennmt.data import corpus as corpus_lib
from ldr_opennmt.errors import UserError
from ldr_opennmt.serving import savedmodel_translate
from ldr_opennmt.serving.translator import Translator
from tests import corpus, helpers
from tests.serving.fixtures import run_client

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.dirname(sys.executable)
ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONWARNINGS="ignore")

# family -> (catalog function, arguments): written as a model definition for onmt-main.
# One family: tests/models/test_export.py checks the signature of every family, and an
# onmt-main export + infer of a tiny RNN adds about 45 s on 2 CPU cores.
FAMILIES = {
    "ldr_transformer_target": (
        "ldr_transformer",
        dict(domain_region_size=2, target_ldr=True, **helpers.TINY),
    ),
}
# Mixes the domains and generic.
FAMILY = "ldr_transformer_target"
LABELS = ["medical", "generic", "religious", "software", "generic", "medical", "software"]
DECLARED = "declared: medical, religious, software, or generic"


def _raw(sentence, i):
    """Raw text from a corpus sentence: capitals and punctuation for the tokenizer."""
    return sentence[0].upper() + sentence[1:] + (".", "!", ", now.", "?")[i % 4]


def _onmt_main(model_def, config, *args):
    return _run("onmt-main", "--model", model_def, "--config", config, *args)


def _run(command, *args):
    return subprocess.run(
        [os.path.join(BIN, command), *args],
        capture_output=True,
        text=True,
        env=ENV,
        cwd=ROOT,
        timeout=600,
    )


_write = corpus.write_lines
_read = corpus.read_lines


def _long_lines_warnings(stderr):
    return [line for line in stderr.splitlines() if " input lines have more than " in line]


@pytest.mark.e2e
class ClientTest(helpers.SharedDirTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.exports = {}
        data_dir = os.path.join(cls.dir, "data")
        os.makedirs(data_dir)
        tokenizer = pyonmttok.Tokenizer(**corpus_lib.TOKENIZER_OPTIONS)
        data = {"domains": list(corpus.DOMAINS)}
        for side, lang in ((0, "en"), (1, "fr")):
            lines = [
                _raw(pair[side], i)
                for domain in corpus.DOMAINS
                for i, pair in enumerate(corpus.make_pairs(domain, 20, seed=0))
            ]
            raw = _write(os.path.join(data_dir, "train.raw.%s" % lang), lines)
            bpe = os.path.join(data_dir, "bpe.%s" % lang)
            learner = pyonmttok.BPELearner(tokenizer=tokenizer, symbols=40)
            learner.ingest_file(raw)
            bpe_tokenizer = learner.learn(bpe)
            vocab = os.path.join(data_dir, "vocab.%s" % lang)
            corpus.write_vocab(vocab, [" ".join(bpe_tokenizer.tokenize(line)[0]) for line in lines])
            name = ("source", "target")[side]
            data["%s_vocabulary" % name] = vocab
            data["%s_tokenization" % name] = corpus_lib.tokenizer_config(bpe)
        cls.data = data
        sources = [pair[0] for d in corpus.DOMAINS for pair in corpus.make_pairs(d, 3, seed=5)]
        cls.input = _write(
            os.path.join(cls.dir, "test.en"),
            [_raw(s, i) for i, s in enumerate(sources[: len(LABELS)])],
        )
        cls.labels = _write(os.path.join(cls.dir, "test.domain"), LABELS)

    def _export(self, family):
        """Config, model directory and onmt-main export of a random-weight tiny model."""
        if family in self.exports:
            return self.exports[family]
        directory = os.path.join(self.dir, family)
        function, kwargs = FAMILIES[family]
        model_def = _write(
            os.path.join(self.dir, "%s_def.py" % family),
            [
                "from ldr_opennmt import models",
                "",
                "",
                "def model():",
                "    return models.%s(**%r)" % (function, kwargs),
            ],
        )
        params = {"beam_width": 2, "maximum_decoding_length": 8}
        config = os.path.join(self.dir, "%s.yml" % family)
        with open(config, "w") as f:
            yaml.safe_dump(
                {"model_dir": directory, "data": self.data, "params": params, "infer": {}}, f
            )
        model = getattr(models, function)(**kwargs)
        model.initialize(self.data, params=params)
        model.create_variables()
        helpers.randomize_weights(model, 11)
        tf.train.CheckpointManager(tf.train.Checkpoint(model=model), directory, 1).save(1)
        export_dir = os.path.join(self.dir, "%s_export" % family)
        result = _onmt_main(model_def, config, "export", "--output_dir", export_dir)
        self.assertEqual(result.returncode, 0, msg=result.stderr[-3000:])
        self.exports[family] = (model_def, config, export_dir)
        return self.exports[family]

    def _client(self, *args, stdin=""):
        return run_client(*args, stdin=stdin)

    def _copy_export(self, name):
        copy = os.path.join(self.dir, name)
        shutil.copytree(self._export(FAMILY)[2], copy)
        return copy

    @parameterized.expand([(family,) for family in FAMILIES])
    def test_client_matches_onmt_main_infer(self, family):
        model_def, config, export_dir = self._export(family)
        extra = sorted(os.listdir(os.path.join(export_dir, "assets.extra")))
        self.assertEqual(
            extra,
            [
                "bpe.en",
                "bpe.fr",
                "domains.txt",
                "inference.json",
                "source_tokenizer_config.yml",
                "target_tokenizer_config.yml",
            ],
        )
        with open(os.path.join(export_dir, "assets.extra", "inference.json")) as f:
            self.assertEqual(
                json.load(f),
                {
                    "maximum_source_length": 1024,
                    "ignored_domain_labels": None,
                    "ensemble_refusal": None,
                },
            )
        self.assertEqual(
            _read(os.path.join(export_dir, "assets.extra", "domains.txt")), corpus.DOMAINS
        )
        expected = os.path.join(self.dir, "%s.infer" % family)
        result = _onmt_main(
            model_def,
            config,
            "infer",
            "--features_file",
            self.input,
            self.labels,
            "--predictions_file",
            expected,
        )
        self.assertEqual(result.returncode, 0, msg=result.stderr[-3000:])
        output = os.path.join(self.dir, "%s.out" % family)
        result = _run(
            "ldr-translate",
            "--export",
            export_dir,
            "--domain_file",
            self.labels,
            "--input",
            self.input,
            "--output",
            output,
            "--batch_size",
            "3",
        )
        self.assertEqual(result.returncode, 0, msg=result.stderr[-3000:])
        translations = _read(output)
        self.assertEqual(translations, _read(expected))
        self.assertLen(translations, len(LABELS))
        # Detokenized: joiners are gone (the model is random, its output is not).
        self.assertFalse(any("￭" in line for line in translations), translations)
        self.assertEqual([f for f in os.listdir(self.dir) if ".partial" in f], [])

    def test_unknown_label_in_a_fresh_process(self):
        export_dir = self._export(FAMILY)[2]
        labels = _write(os.path.join(self.dir, "bad.domain"), LABELS[:2] + ["legal"] + LABELS[3:])
        output = os.path.join(self.dir, "bad.out")
        result = _run(
            "ldr-translate", "--export", export_dir, "--domain_file", labels, "--input", self.input,
            "--output", output,
        )  # fmt: skip
        self.assertEqual(result.returncode, 2, msg=result.stderr[-3000:])
        self.assertEqual(
            result.stderr.strip().splitlines()[-1],
            "ldr-translate: error: %s:3: unknown domain label 'legal' (%s)" % (labels, DECLARED),
        )
        self.assertFalse(os.path.exists(output))

    def _bad_input_cases(self):
        inputs = _read(self.input)
        n = len(inputs)
        return {
            "unknown --domain": (
                ["--domain", "legal"],
                "--domain: unknown domain label 'legal' (%s)" % DECLARED,
            ),
            "short label file": (
                ["--domain_file", _write(os.path.join(self.dir, "short.domain"), LABELS[:-2])],
                "%s:%d: missing domain label (%d labels, but %s has %d lines)"
                % (os.path.join(self.dir, "short.domain"), n - 1, n - 2, self.input, n),
            ),
            "long label file": (
                [
                    "--domain_file",
                    _write(os.path.join(self.dir, "long.domain"), LABELS + ["medical"]),
                ],
                "%s:%d: extra domain label (%d labels, but %s has %d lines)"
                % (os.path.join(self.dir, "long.domain"), n + 1, n + 1, self.input, n),
            ),
            "empty label": (
                [
                    "--domain_file",
                    _write(os.path.join(self.dir, "empty.domain"), LABELS[:3] + [""] + LABELS[4:]),
                ],
                "%s:4: empty domain label" % os.path.join(self.dir, "empty.domain"),
            ),
            "empty input line": (
                [
                    "--domain",
                    "medical",
                    "--input",
                    _write(os.path.join(self.dir, "empty.en"), inputs[:1] + ["  "] + inputs[1:]),
                ],
                "%s:2: empty input line (pass --keep_empty to write an empty translation)"
                % os.path.join(self.dir, "empty.en"),
            ),
            "bad ensemble label": (
                [
                    "--domain_file",
                    _write(
                        os.path.join(self.dir, "ens.domain"),
                        LABELS[:1] + ["medical:0.5 generic:0.6"] + LABELS[2:],
                    ),
                ],
                "%s:2: 'medical:0.5 generic:0.6': ensemble weights sum to 1.1, not 1"
                % os.path.join(self.dir, "ens.domain"),
            ),
            "missing label file": (
                ["--domain_file", os.path.join(self.dir, "none.domain")],
                "%s: domain label file not found" % os.path.join(self.dir, "none.domain"),
            ),
            "missing input": (
                ["--domain", "medical", "--input", os.path.join(self.dir, "none.en")],
                "%s: input file not found" % os.path.join(self.dir, "none.en"),
            ),
        }

    @parameterized.expand(
        [
            ("unknown --domain",),
            ("short label file",),
            ("long label file",),
            ("empty label",),
            ("bad ensemble label",),
            ("empty input line",),
            ("missing label file",),
            ("missing input",),
        ]
    )
    def test_bad_input(self, case):
        export_dir = self._export(FAMILY)[2]
        args, message = self._bad_input_cases()[case]
        if "--input" not in args:
            args = args + ["--input", self.input]
        if "--domain" not in args and "--domain_file" not in args:
            args = args + ["--domain_file", self.labels]
        output = os.path.join(self.dir, "bad.out")
        status, stdout, stderr = self._client("--export", export_dir, "--output", output, *args)
        self.assertEqual((status, stdout), (2, ""))
        self.assertEqual(stderr, "ldr-translate: error: %s\n" % message)
        self.assertFalse(os.path.exists(output))

    def test_ensemble_labels(self):
        export_dir = self._export(FAMILY)[2]
        with open(self.input) as f:
            count = len(f.read().splitlines())
        for label in ("ens-uniform", "medical:0.5 generic:0.5"):
            output = os.path.join(self.dir, "ens.out")
            status, _, stderr = self._client(
                "--export", export_dir, "--output", output, "--input", self.input, "--domain", label
            )
            self.assertEqual(status, 0, stderr)
            self.assertNotIn("ignored", stderr)  # The model reads labels.
            with open(output) as f:
                self.assertLen(f.read().splitlines(), count)

    def test_bad_export(self):
        missing = os.path.join(self.dir, "nowhere")
        status, _, stderr = self._client("--export", missing, "--domain", "medical")
        self.assertEqual(status, 2)
        self.assertEqual(stderr, "ldr-translate: error: %s: export directory not found\n" % missing)
        status, _, stderr = self._client("--export", self.dir, "--domain", "medical")
        self.assertEqual(status, 2)
        self.assertRegex(stderr, r"^ldr-translate: error: .*: not a SavedModel directory")

    def test_keep_empty_and_stdin(self):
        export_dir = self._export(FAMILY)[2]
        inputs = _read(self.input)
        status, expected, stderr = self._client(
            "--export", export_dir, "--domain", "religious", stdin="\n".join(inputs) + "\n"
        )
        self.assertEqual(status, 0, msg=stderr)
        expected = expected.splitlines()
        self.assertLen(expected, len(inputs))
        status, output, stderr = self._client(
            "--export",
            export_dir,
            "--domain",
            "religious",
            "--keep_empty",
            "--batch_size",
            "2",
            stdin="\n".join(inputs[:2] + [""] + inputs[2:]) + "\n",
        )
        self.assertEqual(status, 0, msg=stderr)
        self.assertEqual(output.splitlines(), expected[:2] + [""] + expected[2:])

    def test_python_translator_gives_the_client_output(self):
        # Issue 44 item 5: the Translator of an export directory, on a SavedModel.
        export_dir = self._export(FAMILY)[2]
        status, expected, stderr = self._client(
            "--export", export_dir, "--domain_file", self.labels, "--input", self.input
        )
        self.assertEqual(status, 0, msg=stderr)
        translator = Translator(export_dir)
        self.assertEqual(
            translator.translate(_read(self.input), domains=_read(self.labels), batch_size=3),
            expected.splitlines(),
        )
        self.assertEqual(translator.translate([""], domain="medical"), [""])
        with self.assertRaisesRegex(UserError, r"^domain: unknown domain label 'legal'"):
            translator.translate(["a"], domain="legal")

    def test_incomplete_export(self):
        # An export interrupted before assets.extra/ (or made before domains.txt was
        # recorded): refused up front, not blamed on the tokenizer.
        export_dir = self._copy_export("incomplete")
        shutil.rmtree(os.path.join(export_dir, "assets.extra"))
        output = os.path.join(self.dir, "incomplete.out")
        args = ("--export", export_dir, "--input", self.input, "--output", output)
        status, _, stderr = self._client(*args, "--domain_file", self.labels)
        self.assertEqual(status, 2)
        self.assertEqual(
            stderr,
            "ldr-translate: error: %s: incomplete export (no assets.extra/domains.txt: "
            "interrupted, or made by an older version): export the model again\n" % export_dir,
        )
        self.assertFalse(os.path.exists(output))

    def test_missing_tokenizer_assets(self):
        export_dir = self._copy_export("no_assets")
        for side in ("source", "target"):
            os.remove(os.path.join(export_dir, "assets.extra", "%s_tokenizer_config.yml" % side))
        output = os.path.join(self.dir, "no_assets.out")
        args = ("--export", export_dir, "--input", self.input, "--output", output)
        status, _, stderr = self._client(*args, "--domain_file", self.labels)
        self.assertEqual(status, 2)
        self.assertRegex(
            stderr,
            r"^ldr-translate: error: .*source_tokenizer_config\.yml: missing tokenizer asset: .*"
            r"pass --tokenized with tokenized input\)\n$",
        )
        self.assertFalse(os.path.exists(output))

        # Tokenized input and output need no asset, and detokenize to the raw-text run.
        _, _, full_export = self._export(FAMILY)
        status, raw_output, stderr = self._client(
            "--export", full_export, "--domain_file", self.labels, "--input", self.input
        )
        self.assertEqual(status, 0, msg=stderr)
        source = pyonmttok.Tokenizer(**self.data["source_tokenization"]["params"])
        target = pyonmttok.Tokenizer(**self.data["target_tokenization"]["params"])
        tokenized = _write(
            os.path.join(self.dir, "test.tok.en"),
            [" ".join(source.tokenize(line)[0]) for line in _read(self.input)],
        )
        args = ("--export", export_dir, "--input", tokenized, "--output", output)
        status, _, stderr = self._client(*args, "--domain_file", self.labels, "--tokenized")
        self.assertEqual(status, 0, msg=stderr)
        self.assertEqual(
            [target.detokenize(line.split()) for line in _read(output)], raw_output.splitlines()
        )

        # With an empty domain list (a hand-edited domains.txt), the model itself refuses
        # an unknown label, reported the same way.
        with open(os.path.join(export_dir, "assets.extra", "domains.txt"), "w"):
            pass
        os.remove(output)
        labels = _write(os.path.join(self.dir, "legal.domain"), LABELS[:4] + ["legal"] + LABELS[5:])
        status, _, stderr = self._client(*args, "--domain_file", labels, "--tokenized")
        self.assertEqual(status, 2)
        # (An empty domains.txt reads as a model that declares none: a warning line first.)
        self.assertEqual(
            stderr.splitlines()[-1],
            "ldr-translate: error: %s:5: unknown domain label 'legal' (%s)" % (labels, DECLARED),
        )
        self.assertFalse(os.path.exists(output))

    def test_missing_bpe_model(self):
        export_dir = self._copy_export("no_bpe")
        os.remove(os.path.join(export_dir, "assets.extra", "bpe.en"))
        status, _, stderr = self._client(
            "--export", export_dir, "--domain", "medical", "--input", self.input
        )
        self.assertEqual(status, 2)
        self.assertEqual(
            stderr,
            "ldr-translate: error: %s: missing tokenizer asset (bpe_model_path: bpe.en in "
            "source_tokenizer_config.yml)\n" % os.path.join(export_dir, "assets.extra", "bpe.en"),
        )

    def test_tokenizer_files_with_the_same_name(self):
        # OpenNMT-tf flattens asset names: en/bpe.model and fr/bpe.model would collide.
        data = dict(self.data)
        for name, lang in (("source", "en"), ("target", "fr")):
            path = os.path.join(self.dir, lang, "bpe.model")
            os.makedirs(os.path.dirname(path), exist_ok=True)
            shutil.copy(os.path.join(self.dir, "data", "bpe.%s" % lang), path)
            data["%s_tokenization" % name] = corpus_lib.tokenizer_config(path)
        function, kwargs = FAMILIES[FAMILY]
        model = getattr(models, function)(**kwargs)
        model.initialize(data)
        asset_dir = os.path.join(self.dir, "same_name_assets")
        os.makedirs(asset_dir)
        assets = model.export_assets(asset_dir)
        self.assertEqual(
            sorted(assets),
            [
                "bpe.model",
                "domains.txt",
                "inference.json",
                "source_tokenizer_config.yml",
                "target_bpe.model",
                "target_tokenizer_config.yml",
            ],
        )
        export_dir = os.path.join(self.dir, "same_name_export")
        os.makedirs(os.path.join(export_dir, "assets.extra"))
        for name, path in assets.items():
            shutil.copy(path, os.path.join(export_dir, "assets.extra", name))
        for name, lang in (("source", "en"), ("target", "fr")):
            with open(
                os.path.join(export_dir, "assets.extra", "%s_tokenizer_config.yml" % name)
            ) as f:
                bpe = yaml.safe_load(f)["bpe_model_path"]
            with open(os.path.join(export_dir, "assets.extra", bpe), "rb") as f:
                with open(os.path.join(self.dir, "data", "bpe.%s" % lang), "rb") as original:
                    self.assertEqual(f.read(), original.read(), name)

    def test_unwritable_output_refused_before_any_work(self):
        export_dir = self._export(FAMILY)[2]
        directory = helpers.unwritable_directory(self, self.dir)
        output = os.path.join(directory, "out.txt")
        args = ["--export", export_dir, "--domain_file", self.labels, "--output", output]
        loaded = AssertionError("loaded")
        with mock.patch.object(savedmodel_translate, "SignatureRunner", side_effect=loaded):
            status, stdout, stderr = self._client(*args, "--input", self.input)
        self.assertEqual((status, stdout), (2, ""), stderr)
        self.assertRegex(
            stderr,
            r"^ldr-translate: error: --output: cannot write to directory %s \([^\n]+\)\n$"
            % re.escape(directory),
        )
        self.assertFalse(os.path.exists(output))
        # Before the input is read, too.
        status, _, stderr = self._client(*args, "--input", os.path.join(self.dir, "none.en"))
        self.assertEqual(status, 2)
        self.assertIn(": cannot write to directory %s (" % directory, stderr)
        # An output that is a directory (the rename would fail at the end), or in a
        # missing one.
        status, _, stderr = self._client(*args[:-1], self.dir, "--input", self.input)
        self.assertEqual(
            (status, stderr), (2, "ldr-translate: error: --output: %s is a directory\n" % self.dir)
        )
        missing = os.path.join(self.dir, "nowhere", "out.txt")
        status, _, stderr = self._client(*args[:-1], missing, "--input", self.input)
        self.assertEqual(
            (status, stderr),
            (
                2,
                "ldr-translate: error: --output: directory %s not found\n"
                % os.path.dirname(missing),
            ),
        )

    def test_threads_calling_one_translator_right_after_loading(self):
        export_dir = self._export(FAMILY)[2]
        source = pyonmttok.Tokenizer(**self.data["source_tokenization"]["params"])
        sentences = [source.tokenize(line)[0] for line in _read(self.input)]
        batches = [
            (sentences[i : i + size], LABELS[i : i + size])
            for i, size in ((0, 3), (3, 4), (1, 2), (5, 2), (0, 7), (2, 1))
        ]
        translator = savedmodel_translate.SignatureRunner(export_dir)
        # Counts the calls inside the loaded signature at the same time; the pause makes
        # calls that are not serialised overlap for sure.
        signature = translator._signature
        inside, peak, count_lock = [0], [0], threading.Lock()

        def _watched(**inputs):
            with count_lock:
                inside[0] += 1
                peak[0] = max(peak[0], inside[0])
            try:
                time.sleep(0.2)
                return signature(**inputs)
            finally:
                with count_lock:
                    inside[0] -= 1

        translator._signature = _watched
        start = threading.Barrier(len(batches))
        results, errors = [None] * len(batches), []

        def _run(i):
            try:
                start.wait()
                results[i] = translator(*batches[i])
            except Exception as e:  # pylint: disable=broad-except
                errors.append(e)

        threads = [threading.Thread(target=_run, args=(i,)) for i in range(len(batches))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        self.assertEqual(errors, [])
        self.assertEqual(peak[0], 1)
        serial = [translator(*batch) for batch in batches]
        self.assertEqual(results, serial)
        self.assertEqual(translator.translated, 2 * sum(len(batch[0]) for batch in batches))

    def test_long_input_lines(self):
        export_dir = self._export(FAMILY)[2]
        source = pyonmttok.Tokenizer(**self.data["source_tokenization"]["params"])
        target = pyonmttok.Tokenizer(**self.data["target_tokenization"]["params"])
        inputs = _read(self.input)
        tokens = [source.tokenize(line)[0] for line in inputs]
        # The limit: the first line's length, so that the first long line is a later one.
        limit = len(tokens[0])
        long = [i for i, t in enumerate(tokens) if len(t) > limit]
        self.assertTrue(long and long[0] > 0, [len(t) for t in tokens])
        warning = (
            "ldr-translate: warning: %d of %d input lines have more than %d tokens (%%s), the "
            "first at %s:%d (%d tokens): only their first %d tokens are translated"
            % (len(long), len(inputs), limit, self.input, long[0] + 1, len(tokens[long[0]]), limit)
        )
        # What the export translates from the first `limit` tokens of each line.
        truncated = _write(
            os.path.join(self.dir, "truncated.tok.en"), [" ".join(t[:limit]) for t in tokens]
        )

        def _run(export, *args):
            return self._client(
                "--export", export, "--domain_file", self.labels, "--batch_size", "3", *args
            )

        status, expected, stderr = _run(export_dir, "--input", truncated, "--tokenized")
        self.assertEqual(status, 0, stderr)
        expected = [target.detokenize(line.split()) for line in expected.splitlines()]

        # The export's limit (assets.extra/inference.json).
        limited = self._copy_export("limited")
        info = os.path.join(limited, "assets.extra", "inference.json")
        with open(info, "w") as f:
            json.dump({"maximum_source_length": limit}, f)
        status, output, stderr = _run(limited, "--input", self.input)
        self.assertEqual(status, 0, stderr)
        self.assertEqual(output.splitlines(), expected)
        self.assertEqual(
            _long_lines_warnings(stderr), [warning % "the export's maximum_source_length"]
        )
        # The Python API truncates too.
        translator = savedmodel_translate.SignatureRunner(limited)
        self.assertEqual(translator.maximum_source_length, limit)
        first = long[0]
        self.assertEqual(
            target.detokenize(translator([tokens[first]], [LABELS[first]])[0]), expected[first]
        )

        # --max_source_length: with an export without the file (made before it), and
        # below the export's limit.
        unlimited = self._copy_export("unlimited")
        os.remove(os.path.join(unlimited, "assets.extra", "inference.json"))
        status, output, stderr = _run(unlimited, "--input", self.input)
        self.assertEqual((status, _long_lines_warnings(stderr)), (0, []))
        option = ("--input", self.input, "--max_source_length", str(limit))
        status, output, stderr = _run(unlimited, *option)
        self.assertEqual(status, 0, stderr)
        self.assertEqual(output.splitlines(), expected)
        self.assertEqual(_long_lines_warnings(stderr), [warning % "--max_source_length"])
        status, output, stderr = _run(limited, *option[:-1], str(limit - 1))
        self.assertEqual(status, 0, stderr)
        self.assertRegex(
            "".join(_long_lines_warnings(stderr)),
            r"^ldr-translate: warning: \d+ of %d input lines have more than %d tokens "
            r"\(--max_source_length\), " % (len(inputs), limit - 1),
        )

        # Above the export's limit (its graph truncates there anyway), or a bad file.
        status, _, stderr = _run(limited, *option[:-1], str(limit + 1))
        self.assertEqual(status, 2)
        self.assertEqual(
            stderr,
            "ldr-translate: error: --max_source_length: %d is above the export's "
            "maximum_source_length (%d, in %s), where its SavedModel truncates every source: "
            "export the model again with a larger params: maximum_source_length\n"
            % (limit + 1, limit, info),
        )
        with open(info, "w") as f:
            json.dump({"maximum_source_length": "1024"}, f)
        status, _, stderr = _run(limited, "--input", self.input)
        self.assertEqual(
            (status, stderr),
            (
                2,
                "ldr-translate: error: %s: maximum_source_length must be an integer >= 1, "
                'got "1024"\n' % info,
            ),
        )


def _export_in_process(directory, family, domains=True):
    """Exports a tiny random model of :obj:`family` (without tokenizer: tokenized input);
    :obj:`domains`: whether its data configuration declares them."""
    paths = corpus.write_corpus(os.path.join(directory, "corpus"), count=20)
    data = corpus.data_config(paths)
    if not domains:
        del data["domains"]
    model = helpers.FAMILIES[family]()
    model.initialize(data, params={"beam_width": 1, "maximum_decoding_length": 6})
    model.create_variables()
    helpers.randomize_weights(model, 5)
    export_dir = os.path.join(directory, "export")
    model.export(export_dir)
    return model, export_dir, paths["test_src"]


@pytest.mark.slow
class IgnoredLabelsTest(helpers.SharedDirTestCase):
    """Exports whose model translates without reading the domain label: a plain label is
    translated as generic with one warning line, an ensemble label refused."""

    # name -> (family, domains declared, the reason the client gives).
    EXPORTS = {
        "mixing": (
            "mixing_transformer",
            True,
            "the model reads no domain label to translate (its serving_default signature has "
            "no domain input)",
        ),
        "mixed_no_domains": (
            "mixed_transformer",
            False,
            "the model declares no domains (empty assets.extra/domains.txt): every label reads "
            "as generic",
        ),
        "mixed": ("mixed_transformer", True, None),  # From inference.json.
    }

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.exports = {}

    def _export(self, name):
        if name not in self.exports:
            family, domains, reason = self.EXPORTS[name]
            model, export_dir, source = _export_in_process(
                os.path.join(self.dir, name), family, domains
            )
            path = os.path.join(export_dir, "assets.extra", savedmodel_translate.INFERENCE_INFO)
            with open(path) as f:
                info = json.load(f)
            if name == "mixed":
                # The export records that a model with no domain-specific parameters
                # ignores its labels and refuses ensembles.
                self.assertEqual(
                    info[savedmodel_translate.IGNORED_DOMAIN_LABELS],
                    "MultiDomainTransformer has no domain-specific parameters: every domain "
                    "label gives the same translation",
                )
                self.assertEqual(
                    info[savedmodel_translate.ENSEMBLE_REFUSAL], model.ensemble_refusal_reason()
                )
            if name != "mixing":  # Its signature decides first.
                reason = info.get(savedmodel_translate.IGNORED_DOMAIN_LABELS, reason)
            self.exports[name] = (export_dir, source, reason)
        return self.exports[name]

    @parameterized.expand([(name,) for name in EXPORTS])
    def test_labels(self, name):
        export_dir, source, reason = self._export(name)
        lines = _read(source)[:4]
        source = _write(os.path.join(self.dir, name, "test.src"), lines)
        args = ["--export", export_dir, "--input", source, "--tokenized"]
        status, generic, stderr = run_client(*args, "--domain", "generic")
        self.assertEqual(status, 0, stderr)
        self.assertNotIn("ignored", stderr)
        self.assertLen(generic.splitlines(), len(lines))

        labels = _write(
            os.path.join(self.dir, name, "test.domain"),
            ["generic", "medical", "software", "medical"],
        )
        status, output, stderr = run_client(*args, "--domain_file", labels)
        self.assertEqual(status, 0, stderr)
        warnings = [line for line in stderr.splitlines() if "ignored" in line]
        self.assertIsNotNone(reason, "the export says that the model reads domain labels")
        self.assertEqual(
            warnings,
            [
                "ldr-translate: warning: %s:2: domain label 'medical' (and 1 other) ignored, "
                "translated as generic: %s: %s" % (labels, export_dir, reason)
            ],
        )
        self.assertEqual(output, generic)
        status, _, stderr = run_client(*args, "--domain", "software")
        self.assertEqual(status, 0, stderr)
        self.assertIn(
            "ldr-translate: warning: --domain: domain label 'software' ignored, translated as "
            "generic: %s: %s\n" % (export_dir, reason),
            stderr,
        )

        # Ensemble labels: refused, nothing written.
        output = os.path.join(self.dir, name, "ens.out")
        status, _, stderr = run_client(*args, "--output", output, "--domain", "ens-uniform")
        self.assertEqual(
            (status, stderr),
            (
                2,
                "ldr-translate: error: --domain: ensemble label 'ens-uniform': %s: %s\n"
                % (export_dir, reason),
            ),
        )
        ensemble = _write(
            os.path.join(self.dir, name, "ens.domain"),
            ["generic", "medical:0.5 generic:0.5", "generic", "generic"],
        )
        status, _, stderr = run_client(*args, "--output", output, "--domain_file", ensemble)
        self.assertEqual(
            (status, stderr),
            (
                2,
                "ldr-translate: error: %s:2: ensemble label 'medical:0.5 generic:0.5': %s: %s\n"
                % (ensemble, export_dir, reason),
            ),
        )
        self.assertFalse(os.path.exists(output))


if __name__ == "__main__":
    tf.test.main()
