"""``ldr-data build files``: a corpus from the user's own per-domain text files (issue 47
item 1), checked whole before anything is written, and relocatable once built."""

import contextlib
import errno
import fcntl
import io
import os
import re
import shutil
import tempfile
from unittest import mock

import opennmt
import tensorflow as tf
import yaml

from ldr_opennmt import config_loader
from ldr_opennmt.cli import data as cli
from ldr_opennmt.data import corpus, parallel_files
from ldr_opennmt.errors import UserError
from tests import corpus as tiny
from tests.helpers import assert_cli_error, run_cli

SIZES = ["--dev-size", "3", "--test-size", "3", "--bpe-merges", "20"]


def _write_files(directory, domains=("medical", "law"), count=40, langs=("en", "fr")):
    """Per domain, two aligned files ``DOMAIN.en`` and ``DOMAIN.fr``: ``{domain: (src, tgt)}``."""
    os.makedirs(directory, exist_ok=True)
    files = {}
    for domain, seed_domain in zip(domains, tiny.DOMAINS):
        pairs = tiny.make_pairs(seed_domain, count, seed=3)
        paths = tuple(os.path.join(directory, "%s.%s" % (domain, lang)) for lang in langs)
        for i, path in enumerate(paths):
            tiny.write_lines(path, [pair[i] for pair in pairs])
        files[domain] = paths
    return files


def _corpus_args(files):
    args = []
    for domain, (source, target) in files.items():
        args += ["--corpus", "%s=%s,%s" % (domain, source, target)]
    return args


class BuildFilesTest(tf.test.TestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.dir = os.path.join(os.environ.get("TMPDIR", "/tmp"), "ldr_files_%d" % os.getpid())
        shutil.rmtree(cls.dir, ignore_errors=True)
        cls.files = _write_files(os.path.join(cls.dir, "text"))
        cls.out = os.path.join(cls.dir, "corpus")
        # Built once, by the command, for the tests that read it.
        cls.status, cls.stderr = run_cli(
            cli.main, ["build", "files", "--out", cls.out] + SIZES + _corpus_args(cls.files)
        )

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)
        super().tearDownClass()

    def test_builds_the_same_layout_as_the_other_corpora(self):
        self.assertEqual(self.status, 0, self.stderr)
        info = corpus.load_info(self.out)
        self.assertEqual(info["domains"], ["medical", "law"])
        self.assertEqual((info["source_lang"], info["target_lang"]), ("en", "fr"))
        for split, size in (("dev", 3), ("test", 3)):
            for domain in ("medical", "law"):
                for suffix in ("en", "fr", "domain"):
                    lines = tiny.read_lines(
                        os.path.join(self.out, "%s.%s.%s" % (split, domain, suffix))
                    )
                    self.assertLen(lines, size)
                self.assertEqual(
                    tiny.read_lines(os.path.join(self.out, "%s.%s.domain" % (split, domain))),
                    [domain] * size,
                )
        for name in ("vocab.en", "vocab.fr", "bpe.en", "bpe.fr", "corpus.md", "DONE"):
            self.assertTrue(os.path.isfile(os.path.join(self.out, name)), name)
        # The audit table of the cleaning filters, as for the other corpora.
        with open(os.path.join(self.out, "corpus.md"), encoding="utf-8") as f:
            report = f.read()
        self.assertIn("| filter | medical | law |", report)
        self.assertIn("duplicate_source", report)
        # The stamp records the files' content, not their paths.
        with open(os.path.join(self.out, "DONE"), encoding="utf-8") as f:
            stamp = f.read()
        self.assertNotIn(self.files["medical"][0], stamp)

    def test_reused_when_the_same_text_moves_rebuilt_when_it_changes(self):
        moved = _write_files(os.path.join(self.dir, "moved"))
        status, stderr = run_cli(
            cli.main, ["build", "files", "--out", self.out] + SIZES + _corpus_args(moved)
        )
        self.assertEqual(status, 0, stderr)
        self.assertIn("is already built (from the same inputs)", stderr)
        edited = _write_files(os.path.join(self.dir, "edited"), count=41)
        other = os.path.join(self.dir, "rebuilt")
        shutil.copytree(self.out, other)
        status, stderr = run_cli(
            cli.main, ["build", "files", "--out", other] + SIZES + _corpus_args(edited)
        )
        self.assertEqual(status, 0, stderr)
        self.assertIn("was built from other inputs", stderr)

    def test_the_corpus_is_relocatable(self):
        with open(os.path.join(self.out, "tokenizer.en.yml"), encoding="utf-8") as f:
            config = yaml.safe_load(f)
        self.assertEqual(config["params"]["bpe_model_path"], "bpe.en")
        moved = os.path.join(self.dir, "elsewhere", "corpus")
        shutil.copytree(self.out, moved)
        expected = corpus.load_tokenizer(self.out, "en").tokenize("Take one tablet daily.")[0]
        cwd = os.getcwd()
        os.chdir(self.dir)  # Not the corpus directory: a path relative to it is not found here.
        try:
            # What the package's models give their inputters (MultiDomainModel.initialize).
            tokenizer = opennmt.tokenizers.make_tokenizer(
                config_loader.resolve_tokenizer_files(
                    os.path.join("elsewhere", "corpus", "tokenizer.en.yml")
                )
            )
            self.assertEqual(tokenizer.tokenize("Take one tablet daily."), expected)
            self.assertEqual(tokenizer.config["bpe_model_path"], os.path.join(moved, "bpe.en"))
        finally:
            os.chdir(cwd)

    def test_languages_from_the_options(self):
        files = _write_files(os.path.join(self.dir, "txt"), langs=("source.txt", "target.txt"))
        out = os.path.join(self.dir, "languages")
        argv = ["build", "files", "--out", out] + SIZES + _corpus_args(files)
        message = assert_cli_error(self, cli.main, argv, "--source-lang")
        self.assertEqual(
            message,
            "source and target languages are both 'txt': give --source-lang and --target-lang",
        )
        status, stderr = run_cli(cli.main, argv + ["--source-lang", "en", "--target-lang", "de"])
        self.assertEqual(status, 0, stderr)
        info = corpus.load_info(out)
        self.assertEqual((info["source_lang"], info["target_lang"]), ("en", "de"))
        self.assertTrue(os.path.isfile(os.path.join(out, "train.medical.de")))


class RefusalTest(tf.test.TestCase):
    """Every file is checked before anything is written: one line, exit 2, no --out."""

    def setUp(self):
        super().setUp()
        self.dir = self.get_temp_dir()
        self.files = _write_files(os.path.join(self.dir, "text"))
        self.out = os.path.join(self.dir, "out")

    def _refused(self, files, regex, *extra):
        argv = ["build", "files", "--out", self.out] + SIZES + _corpus_args(files) + list(extra)
        message = assert_cli_error(self, cli.main, argv, regex)
        self.assertFalse(os.path.exists(self.out))
        return message

    def test_files_of_different_lengths(self):
        source, target = self.files["law"]
        tiny.write_lines(target, tiny.read_lines(target)[:-1])
        self.assertEqual(
            self._refused(self.files, "lines"),
            "%s has 40 lines but %s has 39: the files must be aligned line by line"
            % (source, target),
        )

    def test_a_line_that_is_not_utf8(self):
        source = self.files["medical"][0]
        with open(source, "ab") as f:
            f.write(b"caf\xe9\n")
        tiny.write_lines(
            self.files["medical"][1], tiny.read_lines(self.files["medical"][1]) + ["x"]
        )
        self.assertEqual(
            self._refused(self.files, "UTF-8"),
            "%s:41: not UTF-8 (byte 0xe9 at byte 4 of the line)" % source,
        )

    def test_missing_file_and_bad_arguments(self):
        missing = os.path.join(self.dir, "missing.en")
        files = dict(self.files, law=(missing, self.files["law"][1]))
        self.assertEqual(
            self._refused(files, "no such file"), "%s: no such file (--corpus law)" % missing
        )
        self.assertEqual(
            self._refused({}, "expects", "--corpus", "law=only.en"),
            "--corpus expects DOMAIN=SOURCE_FILE,TARGET_FILE, got 'law=only.en'",
        )
        self.assertRegex(
            self._refused(self.files, "twice", "--corpus", "law=%s,%s" % self.files["law"]),
            "^--corpus: domain 'law' is given twice$",
        )

    def test_languages_the_extensions_do_not_tell(self):
        files = dict(self.files)
        renamed = self.files["law"][0] + ".txt"
        os.rename(self.files["law"][0], renamed)
        files["law"] = (renamed, self.files["law"][1])
        self.assertEqual(
            self._refused(files, "extension"),
            "the source files (%s, %s) do not share one extension to name their language:"
            " give --source-lang" % (self.files["medical"][0], renamed),
        )

    def test_a_byte_order_mark_is_removed_with_a_note(self):
        source, target = self.files["medical"]
        lines = tiny.read_lines(source)
        with open(source, "w", encoding="utf-8") as f:
            f.write("\ufeff" + "\n".join(lines) + "\n")
        status, stderr = run_cli(
            cli.main, ["build", "files", "--out", self.out] + SIZES + _corpus_args(self.files)
        )
        self.assertEqual(status, 0, stderr)
        self.assertIn("note: %s starts with a UTF-8 byte order mark" % source, stderr)
        pairs = parallel_files.read_pairs(source, target, progress=False)
        self.assertEqual(pairs[0][0], lines[0])
        with open(os.path.join(self.out, "corpus.json"), encoding="utf-8") as f:
            self.assertNotIn("\\ufeff", f.read())

    def test_library_refusals(self):
        with self.assertRaisesRegex(UserError, "needs at least one --corpus"):
            parallel_files.build_files({}, self.out)
        with self.assertRaisesRegex(UserError, "both 'en'"):
            parallel_files.languages({"a": ("a.en", "b.en")})
        self.assertEqual(
            parallel_files.languages({"a": ("a.txt", "b.txt")}, "de", "fr"), ("de", "fr")
        )
        self.assertFalse(os.path.exists(self.out))


class SizesFromTheCorpusTest(tf.test.TestCase):
    """Issue 55 item 3: a few hundred pairs per domain build with the defaults; the sizes, CRLF
    line ends and the pairs a training would drop for length are said."""

    def test_a_few_hundred_pairs_build_with_the_defaults(self):
        directory = self.get_temp_dir()
        files = _write_files(os.path.join(directory, "text"), count=300)
        source, target = files["law"]
        # CRLF line ends on one file, and one pair far longer than --auto_config keeps.
        lines = tiny.read_lines(source)
        with open(source, "wb") as f:
            f.write("".join(line + "\r\n" for line in lines[:-1]).encode("utf-8"))
            f.write((" ".join(["word%d" % i for i in range(150)]) + "\r\n").encode("utf-8"))
        targets = tiny.read_lines(target)
        tiny.write_lines(target, targets[:-1] + [" ".join(["mot%d" % i for i in range(150)])])
        out = os.path.join(directory, "corpus")
        status, stderr = run_cli(cli.main, ["build", "files", "--out", out] + _corpus_args(files))
        self.assertEqual(status, 0, stderr)
        info = corpus.load_info(out)
        counts = {
            domain: sum(info["stats"][domain][split]["pairs"] for split in ("train", "dev", "test"))
            for domain in info["domains"]
        }
        smallest = min(counts.values())
        for domain in info["domains"]:
            self.assertEqual(info["stats"][domain]["dev"]["pairs"], smallest // 10, counts)
            self.assertEqual(info["stats"][domain]["test"]["pairs"], smallest // 10)
        self.assertRegex(
            stderr,
            r"\[data\] dev and test sets: %d pairs per domain \(10%% of the smallest domain, \w+'s"
            r" \d+ unique pairs, at most 1000; --dev-size and --test-size choose\)"
            % (smallest // 10),
        )
        self.assertIn("[data] BPE: 1000 merges per language (one per 4 of the", stderr)
        self.assertIn(
            "[data] %s: 300 of 300 lines end with CRLF (Windows line ends): the \\r is dropped"
            % source,
            stderr,
        )
        self.assertNotIn("%s: 300 of 300 lines end with CRLF" % target, stderr)
        long_pairs = info["long_train_pairs"]
        self.assertEqual(long_pairs["max_tokens"], 100)
        self.assertEqual(long_pairs["pairs"]["medical"], 0)
        # The long pair is in train, dev or test (split by a hash): said when in train.
        if long_pairs["pairs"]["law"]:
            self.assertIn("which a training with --auto_config drops", stderr)
        with open(os.path.join(out, "raw", "train.law.en"), "rb") as f:
            self.assertNotIn(b"\r", f.read())

    def test_a_domain_too_small_names_the_options_and_a_size_that_fits(self):
        directory = self.get_temp_dir()
        files = _write_files(os.path.join(directory, "text"), count=40)
        out = os.path.join(directory, "corpus")
        message = assert_cli_error(
            self, cli.main,
            ["build", "files", "--out", out, "--dev-size", "40"] + _corpus_args(files), "unique",
        )  # fmt: skip
        self.assertRegex(
            message,
            r"^domain 'medical': only (\d+) unique pairs \(after cleaning\): cannot hold dev 40 \+"
            r" test 3 \+ training data; give smaller --dev-size and --test-size \(e\.g\."
            r" --dev-size 3 --test-size 3\), or leave both out",
        )
        self.assertFalse(os.path.exists(out))

    def test_help_shows_the_defaults(self):
        stdout = io.StringIO()
        with contextlib.redirect_stdout(stdout), self.assertRaises(SystemExit):
            cli.main(["build", "--help"])
        text = " ".join(stdout.getvalue().split())
        self.assertIn("files 10% of the smallest domain's pairs after cleaning, at most 1000", text)
        self.assertIn("files one per 4 training pairs, between 1000 and 30000", text)


class RoundFiveTest(tf.test.TestCase):
    """Issue 56: inputs a build would overwrite, names every training refuses, inputs that
    are not files, lines without a bound, and a rebuild that fails."""

    def setUp(self):
        super().setUp()
        self.dir = self.get_temp_dir()
        self.files = _write_files(os.path.join(self.dir, "text"))
        self.out = os.path.join(self.dir, "out")

    def _build(self, files, *extra):
        return run_cli(
            cli.main,
            ["build", "files", "--out", self.out] + SIZES + _corpus_args(files) + list(extra),
        )

    def _tree(self, root):
        """``{relative path: bytes}`` of every file under :obj:`root`."""
        found = {}
        for directory, _, names in os.walk(root):
            for name in names:
                path = os.path.join(directory, name)
                with open(path, "rb") as f:
                    found[os.path.relpath(path, root)] = f.read()
        return found

    def test_a_build_from_its_own_raw_files_is_refused_and_destroys_nothing(self):
        status, stderr = self._build(self.files)
        self.assertEqual(status, 0, stderr)
        raw = {
            "medical": tuple(
                os.path.join(self.out, "raw", "train.medical.%s" % lang) for lang in ("en", "fr")
            )
        }
        before = self._tree(self.out)
        message = assert_cli_error(
            self,
            cli.main,
            ["build", "files", "--out", self.out] + SIZES + _corpus_args(raw),
            "inside the output directory",
        )
        self.assertEqual(
            message,
            "%s (--corpus medical): inside the output directory %s: the build would overwrite"
            " it; copy the input out of %s, or give another --out"
            % (raw["medical"][0], self.out, self.out),
        )
        self.assertEqual(self._tree(self.out), before)  # Nothing rewritten or shrunk.
        # The same file reached through a link from outside, and a hard link to it.
        link = os.path.join(self.dir, "link.en")
        os.symlink(raw["medical"][0], link)
        hard = os.path.join(self.dir, "hard.fr")
        os.link(raw["medical"][1], hard)
        assert_cli_error(
            self,
            cli.main,
            ["build", "files", "--out", self.out] + SIZES + _corpus_args({"medical": (link, hard)}),
            r"^%s \(--corpus medical\): inside the output" % link,
        )
        assert_cli_error(
            self,
            cli.main,
            ["build", "files", "--out", self.out]
            + SIZES
            + _corpus_args({"medical": (self.files["medical"][0], hard)}),
            r"^%s \(--corpus medical\): a hard link to %s in the output directory"
            % (hard, raw["medical"][1]),
        )
        self.assertEqual(self._tree(self.out), before)

    def test_generic_is_refused_at_the_build(self):
        files = {"generic": self.files["medical"], "law": self.files["law"]}
        message = assert_cli_error(
            self, cli.main, ["build", "files", "--out", self.out] + SIZES + _corpus_args(files),
            "reserved",
        )  # fmt: skip
        self.assertIn("'generic' is reserved (it selects no domain)", message)
        self.assertFalse(os.path.exists(self.out))
        with self.assertRaisesRegex(UserError, "'generic' is reserved"):
            corpus.build({"generic": [("a", "b")]}, self.out)
        self.assertFalse(os.path.exists(self.out))

    def test_a_directory_or_a_fifo_is_named_for_what_it_is(self):
        directory = os.path.join(self.dir, "adir.en")
        os.mkdir(directory)
        files = dict(self.files, law=(directory, self.files["law"][1]))
        self.assertEqual(assert_cli_error(
            self,
            cli.main,
            ["build", "files", "--out", self.out] + SIZES + _corpus_args(files),
            "directory",
            ),  # fmt: skip
            "%s: a directory, not a text file (--corpus law)" % directory,
        )
        fifo = os.path.join(self.dir, "fifo.en")
        os.mkfifo(fifo)
        files = dict(self.files, law=(fifo, self.files["law"][1]))
        self.assertRegex(assert_cli_error(
            self,
            cli.main,
            ["build", "files", "--out", self.out] + SIZES + _corpus_args(files),
            "FIFO",
            ),  # fmt: skip
            r"^%s: a FIFO, not a regular file \(--corpus law\): ldr-data reads each file twice"
            % fifo,
        )
        self.assertFalse(os.path.exists(self.out))

    def test_a_line_over_a_megabyte_is_refused_as_in_opus_members(self):
        source, target = self.files["law"]
        with open(source, "a", encoding="utf-8") as f:
            f.write("a" * ((1 << 20) + 10) + "\n")
        with open(target, "a", encoding="utf-8") as f:
            f.write("b\n")
        self.assertEqual(assert_cli_error(
            self,
            cli.main,
            ["build", "files", "--out", self.out] + SIZES + _corpus_args(self.files),
            "line",
            ),  # fmt: skip
            "%s:41: a line of more than 1048576 bytes: refused (not a sentence-aligned text"
            " file?)" % source,
        )
        self.assertFalse(os.path.exists(self.out))

    def test_a_rebuild_that_fails_leaves_the_former_corpus_whole(self):
        status, stderr = self._build(self.files)
        self.assertEqual(status, 0, stderr)
        before = self._tree(self.out)
        # The disk fills while the rebuild writes its vocabularies (late, after most files).
        real_build_vocab = corpus._build_vocab

        def full_disk(tokenized_file, path, size, root):
            with corpus.atomic_output(path, root=root) as tmp:
                with open(tmp, "w") as f:
                    f.write("x")
                    raise OSError(errno.ENOSPC, "No space left on device")

        tiny.write_lines(self.files["law"][0], tiny.read_lines(self.files["law"][0])[:-1] + ["x"])
        with mock.patch.object(corpus, "_build_vocab", full_disk):
            status, stderr = self._build(self.files)
        self.assertEqual(status, 1, stderr)
        self.assertRegex(
            stderr.strip().splitlines()[-1],
            r"^ldr-data: error: No space left on device \(writing %s/\.build\.\w+/vocab\.en\):"
            r" free some space" % re.escape(self.out),
        )
        self.assertEqual(self._tree(self.out), before)  # DONE and every file as they were.
        self.assertTrue(corpus.is_built(self.out))
        # Killed (not failed): its staging directory stays; the next build removes it.
        stage = os.path.join(self.out, corpus.STAGING_PREFIX + "killed")
        os.makedirs(os.path.join(stage, "raw"))
        open(os.path.join(stage, corpus._STAGING_LOCK), "w").close()
        del real_build_vocab
        status, stderr = self._build(self.files)
        self.assertEqual(status, 0, stderr)
        self.assertIn("removing %s (left by a build that was stopped)" % stage, stderr)
        self.assertFalse(os.path.exists(stage))
        self.assertEqual([name for name in os.listdir(self.out) if name.startswith(".build")], [])
        self.assertNotEqual(self._tree(self.out), before)  # Rebuilt from the edited file.
        # A staging directory still locked by a running build: refused, nothing touched.
        stage = tempfile.mkdtemp(prefix=corpus.STAGING_PREFIX, dir=self.out)
        lock = os.path.join(stage, corpus._STAGING_LOCK)
        with open(lock, "w") as held:
            fcntl.flock(held, fcntl.LOCK_EX)
            tiny.write_lines(
                self.files["law"][1], tiny.read_lines(self.files["law"][1])[:-1] + ["y"]
            )
            message = assert_cli_error(
                self, cli.main,
                ["build", "files", "--out", self.out] + SIZES + _corpus_args(self.files),
                "another ldr-data build",
            )  # fmt: skip
        self.assertEqual(
            message,
            "%s: another ldr-data build is writing into this directory (%s): wait for it to end"
            % (self.out, stage),
        )
        self.assertTrue(os.path.exists(lock))


if __name__ == "__main__":
    tf.test.main()
