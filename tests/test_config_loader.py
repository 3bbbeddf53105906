"""The one YAML loader: bounded size and alias expansion, one-line errors."""

import os
import re

import tensorflow as tf
import yaml

from ldr_opennmt import config_loader
from ldr_opennmt.cli import main as ldr_main
from ldr_opennmt.errors import UserError
from tests import helpers

# Nine levels of nine aliases: 9^7 strings once expanded (the "billion laughs" shape).
BOMB = "".join(
    ["a: &a [%s]\n" % ", ".join(['"lol"'] * 9)]
    + [
        "%s: &%s [%s]\n" % (name, name, ", ".join(["*" + previous] * 9))
        for previous, name in zip("abcdefgh", "bcdefghi")
    ]
)


class ConfigLoaderTest(tf.test.TestCase):
    def _write(self, name, text):
        path = os.path.join(self.get_temp_dir(), name)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        return path

    def test_alias_bomb_is_refused_before_expansion(self):
        path = self._write("bomb.yml", BOMB)
        with self.assertRaisesRegex(
            UserError, r"^%s: the configuration expands to more than 100000 YAML nodes" % path
        ):
            config_loader.load_config_file(path)

    def test_a_few_aliases_are_fine(self):
        path = self._write(
            "anchors.yml", "defaults: &d {a: 1}\ntrain: *d\neval: *d\ndata: {domains: [x]}\n"
        )
        config = config_loader.load_config_file(path)
        self.assertEqual(config["train"], {"a": 1})
        self.assertEqual(config["data"]["domains"], ["x"])

    def test_bad_files_are_one_line(self):
        cases = [
            ("empty.yml", "", ": empty configuration"),
            ("blank.yml", "\n  \n# only a comment\n", ": empty configuration"),
            ("list.yml", "- a\n- b\n", ": a configuration is a mapping of sections .*got a list"),
            ("scalar.yml", "hello\n", ": a configuration is a mapping .*got a str"),
            ("invalid.yml", "data: [a\n", ":2: invalid YAML: while parsing a flow sequence "),
            ("self.yml", "a: &a [*a]\n", ": a YAML alias contains itself"),
            (
                "two.yml",
                "a: 1\n---\nb: 2\n",
                ":2: invalid YAML: expected a single document in the stream \\(line 1\\), but "
                "found another document$",
            ),
            ("control.yml", "a: 1\nb: \x01\n", ":2: invalid YAML: unacceptable character #x0001"),
            ("date.yml", "a: 2001-13-01\n", ":1: invalid YAML: cannot make !!timestamp from "),
            ("tag.yml", "a:\n  b: !!bool maybe\n", ":2: invalid YAML: cannot make !!bool from "),
        ]
        for name, text, regex in cases:
            path = self._write(name, text)
            with self.assertRaisesRegex(UserError, "^%s%s" % (re.escape(path), regex)):
                config_loader.load_config_file(path)
        with self.assertRaisesRegex(UserError, "a directory, not a configuration file"):
            config_loader.load_config_file(self.get_temp_dir())
        with self.assertRaisesRegex(UserError, "no such configuration file"):
            config_loader.load_config_file(os.path.join(self.get_temp_dir(), "missing.yml"))
        big = self._write("big.yml", "a: '%s'\n" % ("x" * (config_loader.MAX_BYTES + 1)))
        with self.assertRaisesRegex(UserError, "too large for a configuration"):
            config_loader.load_config_file(big)
        path = os.path.join(self.get_temp_dir(), "latin1.yml")
        with open(path, "wb") as f:
            f.write(b"model_dir: caf\xe9\n")
        with self.assertRaisesRegex(UserError, r"latin1.yml:1: not UTF-8 \(byte 0xe9"):
            config_loader.load_config_file(path)

    def test_files_are_merged_rightmost_first(self):
        first = self._write("1.yml", "model_dir: a\ntrain: {max_step: 1, batch_size: 2}\n")
        second = self._write("2.yml", "train: {max_step: 5}\n")
        self.assertEqual(
            config_loader.load_run_config([first, second]),
            {"model_dir": "a", "train": {"max_step": 5, "batch_size": 2}},
        )

    def test_a_repeated_key_is_refused_naming_both_lines(self):
        # Round six: PyYAML kept the second value without a word.
        cases = {
            "section.yml": (
                "params:\n  domain_training: summed\ntrain:\n  max_step: 4\nparams:\n"
                "  learning_rate: 0.1\n",
                5,
                "key 'params' repeats the one of line 1",
            ),
            "corpora.yml": (
                "data:\n  train_corpora:\n    medical: [a.src, a.tgt]\n"
                "    religious: [b.src, b.tgt]\n    medical: [c.src, c.tgt]\n",
                5,
                "key 'medical' repeats the one of line 3",
            ),
            "flow.yml": (
                "train: {max_step: 1, max_step: 2}\n",
                1,
                "key 'max_step' repeats the one of line 1",
            ),
        }
        for name, (text, line, message) in cases.items():
            path = self._write(name, text)
            with self.assertRaises(UserError) as context:
                config_loader.load_config_file(path)
            self.assertEqual(
                str(context.exception).split(" (a repeated")[0],
                "%s:%d: invalid YAML: %s" % (path, line, message),
            )
        # The same key in different mappings, and keys a merge (<<:) brings in, are fine.
        path = self._write(
            "fine.yml", "base: &b {max_step: 1, batch_size: 2}\ntrain:\n  <<: *b\n  max_step: 3\n"
        )
        self.assertEqual(
            config_loader.load_config_file(path)["train"], {"max_step": 3, "batch_size": 2}
        )

    def test_stock_onmt_main_reads_its_configuration_again(self):
        # OpenNMT-tf's own yaml.safe_load reads onmt-main's --config first; the package's
        # model definitions read it again through the loader when they install the patches.
        from ldr_opennmt.upstream import patches

        repeated = self._write("repeated.yml", "model_dir: a\nmodel_dir: b\n")
        fine = self._write("fine.yml", "model_dir: a\n")
        argv = ["--config", fine, repeated, "--auto_config", "infer", "--features_file", "x"]
        with self.assertRaisesRegex(UserError, r"repeated\.yml:2: .*key 'model_dir' repeats"):
            patches.check_stock_onmt_main_config(argv, prog="onmt-main")
        self.assertIsNone(patches.check_stock_onmt_main_config(argv, prog="ldr-main"))
        self.assertEqual(
            patches.check_stock_onmt_main_config(["--config", fine, "export"], "onmt-main"),
            {"model_dir": "a"},
        )


class LdrMainLoaderTest(helpers.SharedDirTestCase):
    def test_ldr_main_refuses_a_bomb_and_a_directory_in_one_line(self):
        model_dir = os.path.join(self.dir, "model")
        config = helpers.corpora_config(self.dir, model_dir)
        base = os.path.join(self.dir, "base.yml")
        with open(base, "w") as f:
            yaml.safe_dump(config, f)
        bomb = os.path.join(self.dir, "bomb.yml")
        with open(bomb, "w") as f:
            f.write(BOMB)
        model = ["--model", "model_defs/small/ldr_transformer.py"]
        helpers.assert_cli_error(
            self, ldr_main.main, model + ["--config", base, bomb, "train"], "expands to more than"
        )
        helpers.assert_cli_error(
            self,
            ldr_main.main,
            model + ["--config", base, self.dir, "train"],
            "a directory, not a configuration file",
        )
        self.assertFalse(os.path.exists(model_dir))


if __name__ == "__main__":
    tf.test.main()
