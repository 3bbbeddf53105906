import json
import os
import shutil
import tempfile

import tensorflow as tf
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ldr_opennmt import stamps
from ldr_opennmt.errors import UserError

#: JSON-able configuration values (no NaN: a stamp refuses it).
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**6), 10**6),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
)
CONFIGS = st.recursive(
    SCALARS,
    lambda children: st.one_of(
        st.lists(children, max_size=3),
        st.dictionaries(st.text(min_size=1, max_size=6), children, max_size=3),
    ),
    max_leaves=12,
)
CONFIG_DICTS = st.dictionaries(st.text(min_size=1, max_size=6), CONFIGS, min_size=1, max_size=4)
SETTINGS = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def _write(path, data):
    with open(path, "wb") as f:
        f.write(data)
    return path


def _checkpoint(directory, shards, name="ckpt-10"):
    """A fake checkpoint: ``name.index`` and one data file per shard."""
    prefix = os.path.join(directory, name)
    _write(prefix + ".index", b"index:" + b"".join(shards))
    for i, data in enumerate(shards):
        _write("%s.data-%05d-of-%05d" % (prefix, i, len(shards)), data)
    return prefix


class DigestTest(tf.test.TestCase):
    def setUp(self):
        super().setUp()
        self.dir = tempfile.mkdtemp(dir=self.get_temp_dir())

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)
        super().tearDown()

    @SETTINGS
    @given(
        shards=st.lists(st.binary(min_size=1, max_size=64), min_size=1, max_size=3), data=st.data()
    )
    def test_any_byte_of_any_checkpoint_file_changes_its_digest(self, shards, data):
        directory = tempfile.mkdtemp(dir=self.dir)
        prefix = _checkpoint(directory, shards)
        digest = stamps.checkpoint_digest(prefix)
        self.assertEqual(stamps.checkpoint_digest(prefix), digest)  # Same files, same digest.
        files = stamps.checkpoint_files(prefix)
        self.assertLen(files, len(shards) + 1)
        path = data.draw(st.sampled_from(files))
        with open(path, "rb") as f:
            content = bytearray(f.read())
        position = data.draw(st.integers(0, len(content) - 1))
        content[position] ^= data.draw(st.integers(1, 255))
        _write(path, bytes(content))
        self.assertNotEqual(stamps.checkpoint_digest(prefix), digest)

    def test_the_checkpoint_path_alone_is_not_the_stamp(self):
        # Two models trained to the same step in the same directory: same path, other digest.
        prefix = _checkpoint(self.dir, [b"first run"])
        first = stamps.checkpoint_digest(prefix)
        prefix = _checkpoint(self.dir, [b"second run"])
        self.assertNotEqual(stamps.checkpoint_digest(prefix), first)
        # The same files elsewhere: the same digest.
        other = tempfile.mkdtemp(dir=self.dir)
        self.assertEqual(
            stamps.checkpoint_digest(_checkpoint(other, [b"first run"])),
            first,
        )

    def test_an_incomplete_checkpoint_is_refused(self):
        prefix = _checkpoint(self.dir, [b"a", b"b"])
        os.remove(prefix + ".data-00001-of-00002")
        with self.assertRaisesRegex(UserError, "not a complete checkpoint"):
            stamps.checkpoint_digest(prefix)
        with self.assertRaisesRegex(UserError, r"ckpt-3: not a complete checkpoint \(.*none\)"):
            stamps.checkpoint_digest(os.path.join(self.dir, "ckpt-3"))
        prefix = _checkpoint(self.dir, [b"a"], name="ckpt-4")
        os.remove(prefix + ".index")
        with self.assertRaisesRegex(UserError, r"ckpt-4.index: not found"):
            stamps.checkpoint_digest(prefix)

    def test_shards_of_a_longer_prefix_are_not_the_checkpoint_s(self):
        prefix = _checkpoint(self.dir, [b"a"], name="ckpt-1")
        digest = stamps.checkpoint_digest(prefix)
        _checkpoint(self.dir, [b"b"], name="ckpt-10")
        self.assertEqual(
            stamps.checkpoint_files(prefix), [prefix + ".index", prefix + ".data-00000-of-00001"]
        )
        self.assertEqual(stamps.checkpoint_digest(prefix), digest)

    @SETTINGS
    @given(contents=st.lists(st.binary(max_size=32), min_size=1, max_size=4), data=st.data())
    def test_files_digest(self, contents, data):
        directory = tempfile.mkdtemp(dir=self.dir)
        paths = [_write(os.path.join(directory, "f%d" % i), c) for i, c in enumerate(contents)]
        digest = stamps.files_digest(paths)
        self.assertEqual(stamps.files_digest(paths), digest)
        index = data.draw(st.integers(0, len(paths) - 1))
        changed = data.draw(st.binary(max_size=32).filter(lambda b: b != contents[index]))
        _write(paths[index], changed)
        self.assertNotEqual(stamps.files_digest(paths), digest)

    def test_bytes_moved_between_files_or_files_reordered_change_the_digest(self):
        a = _write(os.path.join(self.dir, "a"), b"ab")
        b = _write(os.path.join(self.dir, "b"), b"c")
        digest = stamps.files_digest([a, b])
        self.assertNotEqual(stamps.files_digest([b, a]), digest)
        _write(a, b"a")
        _write(b, b"bc")
        self.assertNotEqual(stamps.files_digest([a, b]), digest)
        with self.assertRaisesRegex(UserError, "missing: not found"):
            stamps.files_digest([a, os.path.join(self.dir, "missing")])

    def test_lines_digest_is_the_file_s(self):
        path = _write(os.path.join(self.dir, "lines"), "é\nb\n".encode("utf-8"))
        self.assertEqual(stamps.lines_digest(["é", "b"]), stamps.file_digest(path))

    @SETTINGS
    @given(config=CONFIG_DICTS)
    def test_a_configuration_digests_the_same_in_any_key_order(self, config):
        reordered = dict(reversed(list(config.items())))
        self.assertEqual(stamps.config_digest(reordered), stamps.config_digest(config))
        self.assertEqual(stamps.make_stamp(config=config), stamps.make_stamp(config=reordered))

    @SETTINGS
    @given(config=CONFIG_DICTS, data=st.data())
    def test_any_configuration_value_changes_the_stamp(self, config, data):
        key = data.draw(st.sampled_from(sorted(config)))
        value = data.draw(SCALARS.filter(lambda v: stamps.canonical(v) != config[key]))
        changed = dict(config, **{key: value})
        self.assertNotEqual(stamps.config_digest(changed), stamps.config_digest(config))
        old, new = stamps.make_stamp(config=config), stamps.make_stamp(config=changed)
        self.assertNotEqual(old, new)
        # The message names the key.
        self.assertIn("config.%s" % key, stamps.describe(old, new))

    def test_a_stamp_is_what_reads_back_from_json(self):
        stamp = stamps.make_stamp(options={"modes": ("oracle", "wrong"), 1: "x"})
        self.assertEqual(stamp, {"options": {"modes": ["oracle", "wrong"], "1": "x"}})
        with self.assertRaises(TypeError):
            stamps.make_stamp(config={"a": object()})
        with self.assertRaises(ValueError):
            stamps.make_stamp(value=float("nan"))


class DescribeTest(tf.test.TestCase):
    def test_what_differs_in_one_line(self):
        old = stamps.make_stamp(
            checkpoint="a" * 64,
            config={"train": {"max_step": 60, "batch_size": 1024}},
            options={"beam_width": 4},
            domains=["medical", "software"],
        )
        new = stamps.make_stamp(
            checkpoint="b" * 64,
            config={"train": {"max_step": 100, "batch_size": 1024}},
            options={"beam_width": 4, "sentences": 20},
            domains=["medical"],
        )
        self.assertEqual(
            stamps.describe(old, new),
            "checkpoint differs; config.train.max_step: 60 -> 100; domains: "
            '["medical", "software"] -> ["medical"]; options.sentences added',
        )
        self.assertIsNone(stamps.describe(old, old))
        many = stamps.make_stamp(**{"k%d" % i: i for i in range(6)})
        self.assertEqual(
            stamps.describe(many, {}),
            "k0 removed; k1 removed; k2 removed; k3 removed; 2 more",
        )
        self.assertEqual(
            stamps.describe({"items": list(range(30))}, {"items": list(range(31))}),
            "items differ",
        )


class StampFileTest(tf.test.TestCase):
    def setUp(self):
        super().setUp()
        self.dir = tempfile.mkdtemp(dir=self.get_temp_dir())
        self.path = os.path.join(self.dir, "result.stamp")
        self.result = _write(os.path.join(self.dir, "result.txt"), b"result")
        self.stamp = stamps.make_stamp(checkpoint="0" * 64, options={"beam_width": 4})

    def test_no_stamp(self):
        decision = stamps.reusable([self.result], self.path, self.stamp)
        self.assertFalse(decision)
        self.assertEqual(decision.reason, "no stamp (%s)" % self.path)
        self.assertFalse(decision.stale)  # Nothing there is known to be ours.

    def test_the_same_stamp_reuses(self):
        stamps.write(self.path, self.stamp, seconds=1.5)
        decision = stamps.reusable([self.result], self.path, dict(self.stamp))
        self.assertTrue(decision)
        self.assertEqual(decision.reason, "same stamp")
        self.assertEqual(decision.record["seconds"], 1.5)
        self.assertEqual(stamps.read(self.path)["inputs"], self.stamp)
        self.assertEqual(stamps.read(self.path)["format"], stamps.FORMAT)

    def test_other_inputs_redo_and_say_what_differs(self):
        stamps.write(self.path, self.stamp)
        other = stamps.make_stamp(checkpoint="1" * 64, options={"beam_width": 5})
        decision = stamps.reusable([self.result], self.path, other)
        self.assertFalse(decision)
        self.assertTrue(decision.stale)
        self.assertEqual(decision.reason, "checkpoint differs; options.beam_width: 4 -> 5")

    def test_an_unfinished_run_or_a_missing_result_redoes_but_is_not_stale(self):
        stamps.write(self.path, self.stamp, complete=False)
        decision = stamps.reusable([self.result], self.path, self.stamp)
        self.assertEqual(
            (bool(decision), decision.reason, decision.stale),
            (False, "the run that wrote them did not finish", False),
        )
        self.assertTrue(stamps.matches(self.path, self.stamp))
        stamps.write(self.path, self.stamp, complete=True)
        missing = os.path.join(self.dir, "missing.txt")
        decision = stamps.reusable([self.result, missing], self.path, self.stamp)
        self.assertEqual((decision.reason, decision.stale), ("missing: %s" % missing, False))

    def test_a_file_that_is_not_a_stamp_is_stale(self):
        for content in (b"complete\n", b"\xff", b"[1]", json.dumps({"format": 99}).encode()):
            _write(self.path, content)
            decision = stamps.matches(self.path, self.stamp)
            self.assertFalse(decision)
            self.assertEqual(decision.reason, "%s: not a stamp file" % self.path)
            self.assertTrue(decision.stale)
        _write(self.path, json.dumps({"modes": {}}).encode())
        decision = stamps.matches(self.path, self.stamp)
        self.assertEqual(decision.reason, "%s records no inputs (an older format)" % self.path)

    def test_the_evaluation_s_first_stamps_read_as_format_1(self):
        _write(self.path, json.dumps({"inputs": self.stamp, "modes": {"oracle": "x"}}).encode())
        self.assertTrue(stamps.matches(self.path, self.stamp))

    def test_written_atomically_replacing_a_link(self):
        victim = _write(os.path.join(self.dir, "victim"), b"keep")
        os.symlink(victim, self.path)
        stamps.write(self.path, self.stamp)
        self.assertFalse(os.path.islink(self.path))
        with open(victim, "rb") as f:
            self.assertEqual(f.read(), b"keep")
        self.assertEqual(sorted(os.listdir(self.dir)), ["result.stamp", "result.txt", "victim"])
        umask = os.umask(0)
        os.umask(umask)
        self.assertEqual(os.stat(self.path).st_mode & 0o777, 0o666 & ~umask)
        with self.assertRaisesRegex(ValueError, "reserved"):
            stamps.write(self.path, self.stamp, inputs={})


if __name__ == "__main__":
    tf.test.main()
