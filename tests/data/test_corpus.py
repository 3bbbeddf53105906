import collections
import hashlib
import os
import shutil
import zipfile

import tensorflow as tf

from ldr_opennmt.cli import data as cli
from ldr_opennmt.data import corpus, opus_corpus
from ldr_opennmt.errors import UserError
from tests import corpus as tiny
from tests.helpers import assert_cli_error, run_cli


def _domain_pairs(count=60):
    return collections.OrderedDict(
        (domain, tiny.make_pairs(domain, count, seed=1)) for domain in tiny.DOMAINS
    )


def _write_moses_zips(directory, count=40, seed=1):
    """One Moses zip per domain of the tiny corpus: {domain: path}."""
    zips = collections.OrderedDict()
    for domain in tiny.DOMAINS:
        pairs = tiny.make_pairs(domain, count, seed=seed)
        path = os.path.join(directory, "%s.zip" % domain)
        with zipfile.ZipFile(path, "w") as archive:
            archive.writestr("%s.en-fr.en" % domain, "\n".join(p[0] for p in pairs) + "\n")
            archive.writestr("%s.en-fr.fr" % domain, "\n".join(p[1] for p in pairs) + "\n")
        zips[domain] = path
    return zips


def _quiet(_):
    pass


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
        return _write_moses_zips(self.get_temp_dir(), count)

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
            opus_corpus.load_opus_sources(path),
            collections.OrderedDict(
                [
                    ("EMEA", opus_corpus.opus_source("EMEA.zip")),
                    (
                        "ECB",
                        opus_corpus.opus_source(
                            "https://example.org/v1/en-fr.txt.zip", sha.lower()
                        ),
                    ),
                    ("IT", opus_corpus.opus_source("IT.zip")),
                ]
            ),
        )
        # The paper's configurations hold a block of their own.
        for config in ("opus_en_fr.yml", "opus_en_de.yml"):
            root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
            self.assertLen(
                opus_corpus.load_opus_sources(os.path.join(root, "data_configs", config)),
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
                opus_corpus.load_opus_sources(path)
        path = self._sources_file(b"opus_sources:\n  EMEA: caf\xe9.zip\n")
        with self.assertRaises(UserError) as context:
            opus_corpus.load_opus_sources(path)
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

    def test_cli_opus_bounds_what_a_member_expands_to(self):
        # A zip bomb of a kind: kilobytes that expand to many lines (issue 43 item 12).
        zips = self._moses_zips()
        with zipfile.ZipFile(zips["software"], "w", compression=zipfile.ZIP_DEFLATED) as archive:
            archive.writestr("software.en-fr.en", "Open the file.\n" * 20000)
            archive.writestr("software.en-fr.fr", "Ouvrir le fichier.\n" * 20000)
        out = os.path.join(self.get_temp_dir(), "bounded")
        args = self._opus_args(out) + ["--max-member-lines", "500"]
        for domain, path in zips.items():
            args += ["--corpus", "%s=%s" % (domain, path)]
        message = assert_cli_error(self, cli.main, args, "expands to more than")
        self.assertEqual(
            message,
            "%s:software.en-fr.en: expands to more than 500 lines (read so far: 501): refused (a"
            " damaged or hostile zip?); raise --max-member-lines to read a larger corpus"
            % zips["software"],
        )
        self.assertFalse(os.path.exists(out))
        status, stderr = run_cli(cli.main, self._opus_args(out) + ["--max-member-mb", "0"])
        self.assertEqual(status, 2)
        self.assertIn("argument --max-member-mb: must be a positive integer, got '0'", stderr)
        message = assert_cli_error(
            self,
            cli.main,
            ["build", "default", "--out", out, "--max-member-lines", "5"],
            "opus",
        )
        self.assertEqual(
            message, "--max-member-mb and --max-member-lines are for ldr-data build opus"
        )
        self.assertFalse(os.path.exists(out))


class OutputTreeTest(tf.test.TestCase):
    """``ldr-data`` writes only under ``--out``, never through a link, and never over what
    it did not write."""

    def setUp(self):
        super().setUp()
        self.dir = self.get_temp_dir()
        self.out = os.path.join(self.dir, "corpus")
        self.victim = os.path.join(self.dir, "victim")
        tiny.write_lines(self.victim, ["precious"])

    def _link(self, target, path):
        os.symlink(target, path)
        if os.path.isdir(target):  # tf's temporary-directory cleanup trips on these.
            self.addCleanup(lambda: os.path.lexists(path) and os.remove(path))

    def _build(self, **kwargs):
        options = dict(dev_size=4, test_size=5, bpe_merges=20, log=_quiet)
        options.update(kwargs)
        return corpus.build(_domain_pairs(), self.out, **options)

    def _cli(self, *extra, zips=None, out=None):
        argv = ["build", "opus", "--out", out or self.out, "--dev-size", "3", "--test-size", "3"]
        argv += ["--bpe-merges", "10"] + list(extra)
        for domain, path in (zips or {}).items():
            argv += ["--corpus", "%s=%s" % (domain, path)]
        return argv

    def test_planted_file_links_are_replaced_not_followed(self):
        self._build()
        victims = {}
        for name in ("corpus.md", "vocab.fr", "bpe.en", "train.fr", "raw/dev.medical.en", "DONE"):
            victims[name] = tiny.write_lines(os.path.join(self.dir, "victim." + name[-6:]), ["x"])
            os.remove(os.path.join(self.out, name))
            self._link(victims[name], os.path.join(self.out, name))
        # The BPE learner's training text had a predictable name, written then removed.
        planted = os.path.join(self.out, "train.raw.en")
        self._link(self.victim, planted)
        self._build()
        for name, victim in victims.items():
            self.assertEqual(tiny.read_lines(victim), ["x"], name)
            self.assertFalse(os.path.islink(os.path.join(self.out, name)), name)
        self.assertTrue(corpus.is_built(self.out))
        # Not written through, and not removed: ldr-data did not make it.
        self.assertEqual(tiny.read_lines(self.victim), ["precious"])
        self.assertTrue(os.path.islink(planted))
        self.assertEqual([n for n in os.listdir(self.out) if n.startswith(".train")], [])

    def test_directory_link_in_the_output_is_refused(self):
        zips = _write_moses_zips(self.dir)
        self.assertEqual(cli.main(self._cli(zips=zips)), 0)
        outside = os.path.join(self.dir, "outside")
        os.makedirs(outside)
        shutil.rmtree(os.path.join(self.out, "raw"))
        raw = os.path.join(self.out, "raw")
        self._link(outside, raw)
        # Other options: a rebuild, which would write the raw files through the link.
        message = assert_cli_error(
            self, cli.main, self._cli("--test-size", "4", zips=zips), "symbolic link"
        )
        self.assertEqual(
            message,
            "%s: a symbolic link inside the output directory %s: refused (nothing is written"
            " through a link; remove it, or choose another output directory)" % (raw, self.out),
        )
        self.assertEqual(os.listdir(outside), [])
        self.assertTrue(corpus.is_built(self.out))  # Refused before anything was touched.

    def test_output_link_is_resolved_once(self):
        real = os.path.join(self.dir, "real")
        os.makedirs(real)
        link = os.path.join(self.dir, "link")
        self._link(real, link)
        status, stderr = run_cli(cli.main, self._cli(zips=_write_moses_zips(self.dir), out=link))
        self.assertEqual(status, 0, stderr)
        self.assertIn(
            "[data] %s (--out) is a symbolic link: writing into %s" % (link, real), stderr
        )
        self.assertTrue(corpus.is_built(real))
        self.assertTrue(os.path.islink(link))
        with open(os.path.join(real, "tokenizer.en.yml")) as f:
            # Relative to the corpus (issue 47 item 1: a corpus can move).
            self.assertIn("bpe_model_path: bpe.en\n", f.read())
        # A link to a file is refused in one line.
        to_file = os.path.join(self.dir, "to_file")
        os.symlink(self.victim, to_file)
        assert_cli_error(
            self,
            cli.main,
            self._cli(zips=_write_moses_zips(self.dir), out=to_file),
            "^%s: --out is a symbolic link to %s, which is not a directory$"
            % (to_file, self.victim),
        )
        self.assertEqual(tiny.read_lines(self.victim), ["precious"])

    def test_a_directory_ldr_data_did_not_make_is_refused(self):
        os.makedirs(self.out)
        mine = tiny.write_lines(os.path.join(self.out, "train.en"), ["my own work"])
        message = assert_cli_error(
            self, cli.main, self._cli(zips=_write_moses_zips(self.dir)), "not made by ldr-data"
        )
        self.assertEqual(
            message,
            "%s: not empty and not made by ldr-data (no .ldr-data or DONE in it): refused, so"
            " that nothing in it is overwritten; give a new or empty directory as --out" % self.out,
        )
        self.assertEqual(tiny.read_lines(mine), ["my own work"])
        self.assertEqual(os.listdir(self.out), ["train.en"])
        # An empty directory is fine, and marked as ldr-data's.
        os.remove(mine)
        self._build()
        self.assertTrue(os.path.isfile(os.path.join(self.out, corpus.OWNER_FILE)))

    def test_sizes_must_be_positive(self):
        zips = _write_moses_zips(self.dir)
        for option, value in (("--dev-size", "-5"), ("--test-size", "0"), ("--bpe-merges", "-1")):
            status, stderr = run_cli(cli.main, self._cli(option, value, zips=zips))
            self.assertEqual(status, 2)
            # argparse's one line, its prog naming the subcommand.
            self.assertEqual(
                stderr.strip().splitlines()[-1],
                "ldr-data build: error: argument %s: must be a positive integer, got '%s'"
                % (option, value),
            )
        self.assertFalse(os.path.exists(self.out))
        with self.assertRaises(UserError) as context:
            self._build(dev_size=-5)
        self.assertEqual(str(context.exception), "dev_size must be a positive integer, got -5")
        with self.assertRaisesRegex(UserError, "^test_size must be a positive integer, got 0$"):
            corpus.split_pairs([("a", "b")] * 3, 1, 0)
        self.assertFalse(os.path.exists(self.out))

    def test_tokens_of_single_characters_give_a_bpe_model_without_merges(self):
        # Letters and digits are split apart ("s12 p3" -> s 1 2 p 3): no pair to merge.
        pairs = collections.OrderedDict(
            (
                domain,
                [("s%d p%d" % (i, k), "t%d q%d" % (i, k)) for i in range(12) for k in range(2)],
            )
            for domain in ("a", "b")
        )
        messages = []
        corpus.build(pairs, self.out, dev_size=2, test_size=2, bpe_merges=50, log=messages.append)
        self.assertTrue(corpus.is_built(self.out))
        for lang in ("en", "fr"):
            self.assertEqual(
                tiny.read_lines(os.path.join(self.out, "bpe.%s" % lang)), ["#version: 0.2"]
            )
            self.assertIn(
                "[data] %s: no token of two characters or more in the %s training text: BPE"
                " model with no merge" % (os.path.join(self.out, "bpe.%s" % lang), lang),
                messages,
            )
        tokenizer = corpus.load_tokenizer(self.out, "en")
        tokenized = tiny.read_lines(os.path.join(self.out, "test.a.en"))
        raw = tiny.read_lines(os.path.join(self.out, "raw", "test.a.en"))
        self.assertEqual([tokenizer.detokenize(t.split()) for t in tokenized], raw)

    def test_domain_names_are_checked(self):
        zip_path = _write_moses_zips(self.dir)["medical"]
        message = assert_cli_error(
            self, cli.main, self._cli("--corpus", "../x=%s" % zip_path), "invalid domain name"
        )
        self.assertRegex(message, r"^--corpus \.\./x=.*: invalid domain name '\.\./x' \(it")
        config = os.path.join(self.dir, "sources.yml")
        tiny.write_lines(config, ["opus_sources:", "  yes: %s" % zip_path])
        message = assert_cli_error(
            self, cli.main, self._cli("--config", config), "domain name True is a bool"
        )
        self.assertIn("%s: opus_sources: domain name True is a bool" % config, message)
        tiny.write_lines(config, ["opus_sources:", "  .hidden: %s" % zip_path])
        assert_cli_error(self, cli.main, self._cli("--config", config), "invalid domain name")
        pairs = _domain_pairs()
        pairs["a/b"] = pairs.pop("software")
        with self.assertRaisesRegex(UserError, "invalid domain name 'a/b'"):
            corpus.build(pairs, self.out, 2, 2, 10, log=_quiet)
        self.assertFalse(os.path.exists(self.out))

    def test_rebuilt_when_the_inputs_change(self):
        zips = _write_moses_zips(self.dir)
        self.assertEqual(cli.main(self._cli(zips=zips)), 0)
        stale = [os.path.join(self.out, "train.software.en")]
        stale.append(os.path.join(self.out, "raw", "test.software.fr"))
        for path in stale:
            self.assertTrue(os.path.isfile(path))
        # Another list of corpora: rebuilt, the dropped domain's files removed.
        two = collections.OrderedDict(list(zips.items())[:2])
        status, stderr = run_cli(cli.main, self._cli(zips=two))
        self.assertEqual(status, 0, stderr)
        self.assertIn("was built from other inputs (domains differ): rebuilding", stderr)
        self.assertEqual(corpus.load_info(self.out)["domains"], ["medical", "religious"])
        for path in stale:
            self.assertFalse(os.path.exists(path), path)
        self.assertNotIn("software", tiny.read_lines(os.path.join(self.out, "train.domain")))
        # The same inputs: reused.
        status, stderr = run_cli(cli.main, self._cli(zips=two))
        self.assertEqual(status, 0, stderr)
        self.assertIn("is already built (from the same inputs)", stderr)
        # A zip of other content at the same path: rebuilt.
        before = tiny.read_lines(os.path.join(self.out, "raw", "train.religious.en"))
        _write_moses_zips(self.dir, seed=2)
        status, stderr = run_cli(cli.main, self._cli(zips=two))
        self.assertIn("was built from other inputs (domains differ): rebuilding", stderr)
        after = tiny.read_lines(os.path.join(self.out, "raw", "train.religious.en"))
        self.assertNotEqual(before, after)
        # Other options: rebuilt, saying which.
        status, stderr = run_cli(cli.main, self._cli("--test-size", "4", zips=two))
        self.assertIn("was built from other inputs (options.test_size: 3 -> 4): rebuilding", stderr)
        self.assertEqual(corpus.load_info(self.out)["stats"]["medical"]["test"]["pairs"], 4)
        stamp = corpus.read_stamp(self.out)
        self.assertEqual(stamp["inputs"]["options"]["test_size"], 4)
        self.assertIn("raw/train.medical.en", stamp["files"])
        # The same inputs, a result missing: rebuilt, saying so.
        os.remove(os.path.join(self.out, "corpus.json"))
        status, stderr = run_cli(cli.main, self._cli("--test-size", "4", zips=two))
        self.assertEqual(status, 0, stderr)
        missing = os.path.join(self.out, "corpus.json")
        self.assertIn("is incomplete (missing: %s): rebuilding" % missing, stderr)
        self.assertTrue(corpus.is_built(self.out))

    def test_corpus_of_an_older_ldr_data_is_rebuilt(self):
        zips = _write_moses_zips(self.dir)
        self.assertEqual(cli.main(self._cli(zips=zips)), 0)
        tiny.write_lines(os.path.join(self.out, "DONE"), ["complete"])  # The former marker.
        os.remove(os.path.join(self.out, corpus.OWNER_FILE))
        status, stderr = run_cli(cli.main, self._cli(zips=zips))
        self.assertEqual(status, 0, stderr)
        self.assertIn(
            "was built by an older ldr-data (no record of its inputs): rebuilding", stderr
        )
        self.assertIn("inputs", corpus.read_stamp(self.out))


if __name__ == "__main__":
    tf.test.main()
