"""``ldr-translate`` on raw text against ``onmt-main infer``, and its bad input."""

import contextlib
import io
import os
import shutil
import subprocess
import sys

import pyonmttok
import pytest
import tensorflow as tf
import yaml
from parameterized import parameterized

from ldr_opennmt import models
from ldr_opennmt.cli import translate
from ldr_opennmt.data import corpus as corpus_lib
from tests import corpus, helpers

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
        """Runs ldr-translate in this process: (exit status, stdout, stderr)."""
        stdout, stderr = io.StringIO(), io.StringIO()
        fake_stdin = io.TextIOWrapper(io.BytesIO(stdin.encode("utf-8")), encoding="utf-8")
        fake_stdout = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
        status = 0
        with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(fake_stdout):
            sys.stdin, saved_stdin = fake_stdin, sys.stdin
            try:
                translate.main(list(args))
            except SystemExit as e:
                status = e.code
            finally:
                sys.stdin = saved_stdin
            fake_stdout.flush()
            stdout = fake_stdout.buffer.getvalue().decode("utf-8")
        return status, stdout, stderr.getvalue()

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
                "source_tokenizer_config.yml",
                "target_tokenizer_config.yml",
            ],
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
        self.assertEqual(
            stderr,
            "ldr-translate: error: %s:5: unknown domain label 'legal' (%s)\n" % (labels, DECLARED),
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


if __name__ == "__main__":
    tf.test.main()
