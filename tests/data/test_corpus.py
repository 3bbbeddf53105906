import collections
import os

import tensorflow as tf

from ldr_opennmt.cli import data as cli
from ldr_opennmt.data import corpus
from ldr_opennmt.errors import UserError
from tests import corpus as tiny


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

    def test_cli_opus(self):
        import zipfile

        zips = []
        for domain, pairs in _domain_pairs(40).items():
            path = os.path.join(self.get_temp_dir(), "%s.zip" % domain)
            with zipfile.ZipFile(path, "w") as archive:
                archive.writestr("%s.en-fr.en" % domain, "\n".join(p[0] for p in pairs) + "\n")
                archive.writestr("%s.en-fr.fr" % domain, "\n".join(p[1] for p in pairs) + "\n")
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


if __name__ == "__main__":
    tf.test.main()
