import collections
import hashlib
import os
import zipfile

import tensorflow as tf

from ldr_opennmt.cli import data as cli
from ldr_opennmt.data import corpus
from ldr_opennmt.errors import UserError
from tests import corpus as tiny
from tests.helpers import assert_cli_error, run_cli


def _domain_pairs(count=60):
    return collections.OrderedDict(
        (domain, tiny.make_pairs(domain, count, seed=1)) for domain in tiny.DOMAINS
    )


class CorpusTest(tf.test.TestCase):
    def test_split_is_deterministic_and_disjoint(self):
        pairs = [("s%d" % i, "t%d" % i) for i in range(100)] + [("s1", "dup")]
        a = corpus.split_pairs(pairs, dev_size=10, test_size=15)
        b = corpus.split_pairs(list(reversed(pairs)), dev_size=10, test_size=15)
        self.assertEqual([len(a[s]) for s in ("train", "dev", "test")], [75, 10, 15])
        sources = [set(s for s, _ in a[split]) for split in ("train", "dev", "test")]
        self.assertFalse(
            sources[0] & sources[1] or sources[0] & sources[2] or sources[1] & sources[2]
        )
        # The split depends on the source sentences, not on their order.
        for split in ("train", "dev", "test"):
            self.assertEqual(sorted(s for s, _ in a[split]), sorted(s for s, _ in b[split]))

    def test_split_too_small(self):
        with self.assertRaisesRegex(UserError, "cannot hold dev 5 \\+ test 5"):
            corpus.split_pairs([("a", "b")] * 3, 5, 5)

    def test_build(self):
        out = os.path.join(self.get_temp_dir(), "corpus")
        info = corpus.build(
            _domain_pairs(), out, dev_size=4, test_size=5, bpe_merges=20, log=lambda _: None
        )
        self.assertTrue(corpus.is_built(out))
        self.assertEqual(info["domains"], tiny.DOMAINS)
        for split, size in (("dev", 4), ("test", 5)):
            for domain in tiny.DOMAINS:
                for suffix in ("en", "fr", "domain"):
                    with open(os.path.join(out, "%s.%s.%s" % (split, domain, suffix))) as f:
                        self.assertLen(f.read().splitlines(), size)
            with open(os.path.join(out, "%s.domain" % split)) as f:
                self.assertEqual(f.read().split(), [d for d in tiny.DOMAINS for _ in range(size)])
        with open(os.path.join(out, "vocab.fr")) as f:
            vocab = f.read().splitlines()
        self.assertEqual(vocab[:3], ["<blank>", "<s>", "</s>"])
        # Tokenized with the saved BPE model, detokenizes back to the raw text.
        tokenizer = corpus.load_tokenizer(out, "fr")
        with open(os.path.join(out, "test.medical.fr")) as f:
            tokenized = f.read().splitlines()
        with open(os.path.join(out, "raw", "test.medical.fr")) as f:
            raw = f.read().splitlines()
        self.assertEqual([tokenizer.detokenize(t.split()) for t in tokenized], raw)
        table = corpus.corpus_table(info)
        self.assertIn("| medical | test | 5 |", table)
        self.assertEqual(corpus.load_info(out)["stats"], info["stats"])

    def test_build_empty_domain(self):
        pairs = _domain_pairs()
        pairs["software"] = []
        with self.assertRaisesRegex(UserError, "domain 'software' has an empty corpus"):
            corpus.build(
                pairs, os.path.join(self.get_temp_dir(), "x"), 2, 2, 10, log=lambda _: None
            )

    def test_incomplete_build_is_not_loaded(self):
        with self.assertRaisesRegex(UserError, "no complete corpus"):
            corpus.load_info(self.get_temp_dir())

    def test_cli_unknown_corpus(self):
        self.assertEqual(cli.main(["build", "wikipedia", "--out", self.get_temp_dir()]), 2)

    def _moses_zips(self, count=40):
        """One Moses zip per domain of the tiny corpus: {domain: path}."""
        zips = collections.OrderedDict()
        for domain, pairs in _domain_pairs(count).items():
            path = os.path.join(self.get_temp_dir(), "%s.zip" % domain)
            with zipfile.ZipFile(path, "w") as archive:
                archive.writestr("%s.en-fr.en" % domain, "\n".join(p[0] for p in pairs) + "\n")
                archive.writestr("%s.en-fr.fr" % domain, "\n".join(p[1] for p in pairs) + "\n")
            zips[domain] = path
        return zips

    def _sources_file(self, text, name="sources.yml"):
        path = os.path.join(self.get_temp_dir(), name)
        with open(path, "wb") as f:
            f.write(text.encode("utf-8") if isinstance(text, str) else text)
        return path

    def test_cli_opus(self):
        zips = []
        for domain, path in self._moses_zips().items():
            zips += ["--corpus", "%s=%s" % (domain, path)]
        out = os.path.join(self.get_temp_dir(), "opus")
        args = [
            "build",
            "opus",
            "--out",
            out,
            "--dev-size",
            "3",
            "--test-size",
            "3",
            "--bpe-merges",
            "10",
        ]
        self.assertEqual(cli.main(args + zips), 0)
        self.assertEqual(corpus.load_info(out)["domains"], tiny.DOMAINS)
        self.assertEqual(cli.main(["build", "opus", "--out", out + "2", "--corpus", "bad"]), 2)

    def test_build_writes_nothing_when_it_refuses(self):
        out = os.path.join(self.get_temp_dir(), "refused")
        pairs = _domain_pairs()
        pairs["software"] = pairs["software"][:3]  # Too few for dev + test.
        with self.assertRaisesRegex(UserError, "cannot hold dev 4 \\+ test 5"):
            corpus.build(pairs, out, dev_size=4, test_size=5, bpe_merges=20, log=lambda _: None)
        self.assertFalse(os.path.exists(out))

    def test_load_opus_sources(self):
        sha = "AB" * 32
        path = self._sources_file(
            "model_dir: x\nopus_sources:\n  EMEA: EMEA.zip\n"
            "  ECB: {url: https://example.org/v1/en-fr.txt.zip, sha256: %s}\n"
            "  IT: {path: IT.zip}\n" % sha
        )
        self.assertEqual(
            corpus.load_opus_sources(path),
            collections.OrderedDict(
                [
                    ("EMEA", corpus.opus_source("EMEA.zip")),
                    (
                        "ECB",
                        corpus.opus_source("https://example.org/v1/en-fr.txt.zip", sha.lower()),
                    ),
                    ("IT", corpus.opus_source("IT.zip")),
                ]
            ),
        )
        # The paper's configurations hold a block of their own.
        for config in ("opus_en_fr.yml", "opus_en_de.yml"):
            root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
            self.assertLen(
                corpus.load_opus_sources(os.path.join(root, "data_configs", config)),
                4 if config == "opus_en_fr.yml" else 3,
            )

    def test_load_opus_sources_errors(self):
        for text, regex in (
            ("data: {}\n", "no opus_sources: mapping"),
            ("opus_sources:\n  EMEA: {url: a.zip, sha256: abc}\n", "EMEA: sha256 must be 64"),
            ("opus_sources:\n  EMEA: {url: a.zip, sha: abc}\n", "EMEA: unknown key sha "),
            ("opus_sources:\n  EMEA: {url: a.zip, path: b.zip}\n", "EMEA: give exactly one of"),
            ("opus_sources:\n  EMEA: [a.zip]\n", "EMEA: expected a zip path"),
            ("opus_sources: [\n", "not a valid YAML file"),
        ):
            path = self._sources_file(text)
            with self.assertRaisesRegex(UserError, "^%s: .*%s" % (path, regex)):
                corpus.load_opus_sources(path)
        path = self._sources_file(b"opus_sources:\n  EMEA: caf\xe9.zip\n")
        with self.assertRaises(UserError) as context:
            corpus.load_opus_sources(path)
        self.assertEqual(
            str(context.exception), "%s:2: not UTF-8 (byte 0xe9 at byte 12 of the line)" % path
        )

    def _opus_args(self, out):
        return ["build", "opus", "--out", out, "--dev-size", "3", "--test-size", "3"]

    def test_cli_opus_config_checks_sha256(self):
        zips = self._moses_zips()
        lines = ["opus_sources:"]
        for domain, path in zips.items():
            with open(path, "rb") as f:
                sha256 = hashlib.sha256(f.read()).hexdigest()
            lines.append("  %s: {path: %s, sha256: %s}" % (domain, path, sha256))
        config = self._sources_file("\n".join(lines) + "\n")
        out = os.path.join(self.get_temp_dir(), "checked")
        status, stderr = run_cli(
            cli.main, self._opus_args(out) + ["--bpe-merges", "10", "--config", config]
        )
        self.assertEqual(status, 0, stderr)
        self.assertEqual(corpus.load_info(out)["domains"], tiny.DOMAINS)
        # One zip changed since its sha256 was written: refused, nothing written.
        with zipfile.ZipFile(zips["software"], "a") as archive:
            archive.writestr("README", "changed")
        out = os.path.join(self.get_temp_dir(), "changed")
        message = assert_cli_error(
            self, cli.main, self._opus_args(out) + ["--config", config], "sha256"
        )
        self.assertRegex(
            message,
            r"^%s: sha256 [0-9a-f]{64}, expected [0-9a-f]{64} \(refused\)$" % zips["software"],
        )
        self.assertFalse(os.path.exists(out))

    def test_cli_opus_refuses_invalid_utf8(self):
        zips = self._moses_zips()
        with zipfile.ZipFile(zips["religious"], "w") as archive:
            archive.writestr("religious.en-fr.en", b"In the beginning.\nLight\x80.\n")
            archive.writestr("religious.en-fr.fr", "Au commencement.\nLumière.\n")
        out = os.path.join(self.get_temp_dir(), "utf8")
        args = self._opus_args(out)
        for domain, path in zips.items():
            args += ["--corpus", "%s=%s" % (domain, path)]
        message = assert_cli_error(self, cli.main, args, "not UTF-8")
        self.assertEqual(
            message,
            "%s:religious.en-fr.en:2: not UTF-8 (byte 0x80 at byte 6 of the line)"
            % zips["religious"],
        )
        self.assertFalse(os.path.exists(out))


if __name__ == "__main__":
    tf.test.main()
