"""Tiny models and data shared by the tests."""

import contextlib
import io
import os
import re
import shutil
import tempfile
import unittest

import numpy as np
import opennmt
import tensorflow as tf

from ldr_opennmt import models, registry
from ldr_opennmt.models import ttm
from tests import corpus

TINY = registry.TINY_TRANSFORMER
TINY_RNN = registry.TINY_RNN

#: Every registered family at the tiny size (the registry is the one list of families),
#: plus LDR with target-side regions, a configuration the tests cover as well.
FAMILIES = {family.name: family.build_tiny for family in registry.families()}
FAMILIES["ldr_transformer_target"] = lambda: registry.get("ldr_transformer").build_tiny(
    target_ldr=True
)
#: The Transformer families (the others are RNNs).
TRANSFORMERS = [
    name
    for name in FAMILIES
    if registry.get(name.replace("_target", "")).architecture == "transformer"
]

#: ``LDR_TEST_FULL=1``: the tests that take minutes run too: the sweeps whole (every family
#: under mixed precision and XLA, the GPU check's path on the CPU) and the longest end-to-end
#: runs (:func:`skip_unless_full`); by default a representative family of each mechanism runs
#: (:func:`sweep`). On a GPU, ``bash run/gpu_check.sh`` trains every family under XLA and
#: mixed precision.
FULL = os.environ.get("LDR_TEST_FULL") == "1"


def sweep(families, representative):
    """Every name of :obj:`families` (families, or other cases) with whether it runs by
    default: ``[(name, runs)]``.

    Those of :obj:`representative` (one family per mechanism) run by default, every one with
    ``LDR_TEST_FULL=1``; a test skips the others with :func:`skip_unless_swept`, so that they
    show as skips (``-ra`` lists them) instead of vanishing from the run.

    Raises:
      ValueError: a name of :obj:`representative` is not in :obj:`families` (a misspelled
        family would otherwise drop its case silently).
    """
    unknown = sorted(set(representative) - set(families))
    if unknown:
        raise ValueError("sweep: not among the families: %s" % ", ".join(unknown))
    return [(name, FULL or name in representative) for name in families]


def skip_unless_swept(test, runs):
    """Skips :obj:`test` when its case of :func:`sweep` does not run by default."""
    if not runs:
        test.skipTest("one case per mechanism by default: set LDR_TEST_FULL=1 to run it")


def skip_unless_full(reason):
    """Skips a test of minutes unless ``LDR_TEST_FULL=1`` (:obj:`reason`: what takes them)."""
    return unittest.skipUnless(FULL, "%s: set LDR_TEST_FULL=1 to run it" % reason)


def _runs_layer_norm(policy):
    try:
        layer = opennmt.layers.LayerNorm(dtype=policy)
        layer(tf.zeros([1, 2, 4], dtype=layer.compute_dtype))
        return True
    except (tf.errors.InvalidArgumentError, tf.errors.NotFoundError):
        return False


_MIXED_PRECISION = []


def mixed_precision_policy():
    """The mixed-precision policy this machine's CPU kernels can train with, or ``None``.

    ``onmt-main --mixed_precision`` sets ``mixed_float16`` on GPUs. On a CPU, which
    half-precision LayerNorm (FusedBatchNormV3) kernel exists depends on the machine:
    measured, an AVX512 machine (oneDNN kernels) had bfloat16 and no float16, an
    AVX2-only one float16 and no bfloat16. The tests take the first that runs, so the
    same code path (compute dtype != variable dtype, loss-scale optimizer) is exercised;
    where none runs they are skipped, saying why.
    """
    if not _MIXED_PRECISION:
        found = [p for p in ("mixed_bfloat16", "mixed_float16") if _runs_layer_norm(p)]
        _MIXED_PRECISION.append(found[0] if found else None)
    return _MIXED_PRECISION[0]


def skip_without_mixed_precision(test):
    """Skips :obj:`test` (a TestCase) when :func:`mixed_precision_policy` is ``None``."""
    if mixed_precision_policy() is None:
        test.skipTest(
            "this CPU has no bfloat16 or float16 LayerNorm kernel (FusedBatchNormV3): mixed"
            " precision runs on GPUs and bfloat16-capable CPUs only"
        )
    return mixed_precision_policy()


def build_model(test, family="ldr_transformer", params=None, count=20, seed=7):
    """Builds, initializes and creates the variables of a tiny model.

    Returns:
      (model, corpus paths).
    """
    paths = corpus.write_corpus(os.path.join(test.get_temp_dir(), "corpus"), count=count)
    # A family registered after this module was imported (a user module) is built from
    # the registry at the same tiny size.
    model = (FAMILIES.get(family) or registry.get(family).build_tiny)()
    if isinstance(model, models.TTMTransformer):  # Its domain tokens in the vocabulary.
        with open(paths["tgt_vocab"], "a") as f:
            f.write("".join(t + "\n" for t in ttm.domain_tokens(corpus.DOMAINS)))
    model_params = {"beam_width": 1, "maximum_decoding_length": 6}
    model_params.update(params or {})
    model.initialize(corpus.data_config(paths), params=model_params)
    model.create_variables()
    randomize_weights(model, seed)
    return model, paths


def randomize_weights(model, seed):
    """Sets random weights, large for domain weights so that the domain visibly
    changes the output."""
    rng = np.random.RandomState(seed)
    for variable in model.weights:
        scale = 1.0 if "domain_" in variable.name else 0.3
        variable.assign(rng.normal(scale=scale, size=variable.shape).astype(np.float32))


def padded_tokens(token_lists):
    """``{"tokens", "length"}`` of a batch of token lists, padded with empty strings."""
    length = max(len(t) for t in token_lists)
    return {
        "tokens": tf.constant([t + [""] * (length - len(t)) for t in token_lists]),
        "length": tf.constant([len(t) for t in token_lists], tf.int32),
    }


def source_features(model, sentences, labels):
    """Features for a batch of raw source sentences and domain labels."""
    features = padded_tokens([s.split() for s in sentences])
    features["domain"] = tf.constant(labels)
    return model.features_inputter.make_features(features=features)


def training_batch(model, paths, size=6):
    """The first training batch of the corpus (features, labels)."""
    dataset = model.examples_inputter.make_training_dataset(
        [paths["train_src"], paths["train_domain"]],
        paths["train_tgt"],
        batch_size=size,
        shuffle_buffer_size=1,
        single_pass=True,
    )
    return next(iter(dataset))


def domain_dataset(model, test, domain_names, count=12, batch_size=6, name="sub"):
    """A repeated training dataset whose sentences all come from ``domain_names``."""
    directory = os.path.join(test.get_temp_dir(), name)
    os.makedirs(directory, exist_ok=True)
    sources, targets, labels = [], [], []
    for domain in domain_names:
        for source, target in corpus.make_pairs(domain, count, seed=3):
            sources.append(source)
            targets.append(target)
            labels.append(domain)
    files = {}
    for key, lines in (("src", sources), ("tgt", targets), ("domain", labels)):
        files[key] = os.path.join(directory, "train." + key)
        corpus.write_lines(files[key], lines)
    return model.examples_inputter.make_training_dataset(
        [files["src"], files["domain"]],
        files["tgt"],
        batch_size=batch_size,
        shuffle_buffer_size=1000,
    )


def snapshot(variables):
    return [v.numpy().copy() for v in variables]


def make_trainer(model, optimizer):
    return opennmt.training.Trainer(model, optimizer)


class SharedDirTestCase(tf.test.TestCase):
    """A test case whose tests share ``cls.dir``, a new empty folder, removed after."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        # A new folder of its own (mkdtemp): nothing of another run is removed or reused.
        cls.dir = tempfile.mkdtemp(prefix="ldr_%s_" % cls.__name__)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)
        super().tearDownClass()


def unwritable_directory(test, parent):
    """A directory this process cannot create a file in: a read-only one, or where root
    ignores permissions, a read-only system directory (skips the test if none)."""
    directory = os.path.join(parent, "read_only")
    os.makedirs(directory, exist_ok=True)
    os.chmod(directory, 0o555)
    test.addCleanup(os.chmod, directory, 0o755)
    for candidate in (directory, "/sys", "/proc"):
        try:
            fd, probe = tempfile.mkstemp(dir=candidate)
        except OSError:
            return candidate
        os.close(fd)
        os.remove(probe)
    test.skipTest("no directory here is read-only for this user")


def run_cli(main, argv):
    """Runs a command's ``main`` in process: (exit status, standard error text)."""
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr):
        try:
            status = main(list(argv))
        except SystemExit as e:
            status = e.code
    return status, stderr.getvalue()


def assert_cli_error(test, main, argv, regex):
    """Asserts that a command stops with one ``prog: error: MESSAGE`` line and exit 2,
    MESSAGE matching :obj:`regex`; returns MESSAGE."""
    status, stderr = run_cli(main, argv)
    lines = stderr.strip().splitlines()
    test.assertEqual(status, 2, stderr)
    test.assertTrue(lines, "nothing on standard error")
    match = re.match(r"^[\w.-]+: error: (.*)$", lines[-1])
    test.assertIsNotNone(match, lines[-1])
    test.assertRegex(match.group(1), regex)
    return match.group(1)


CORPUS_SIZES = {"medical": 24, "religious": 24, "software": 24}


def corpora_config(directory, model_dir, **params):
    """A tiny ldr-main configuration with per-domain corpora (``CORPUS_SIZES``)."""
    paths = corpus.write_corpus(os.path.join(directory, "data"), count=20)
    return {
        "model_dir": model_dir,
        "data": {
            "source_vocabulary": paths["src_vocab"],
            "target_vocabulary": paths["tgt_vocab"],
            "train_corpora": corpus.write_domain_corpora(
                os.path.join(directory, "data"), CORPUS_SIZES
            ),
        },
        "params": dict({"optimizer": "Adam", "learning_rate": 0.01, "beam_width": 1}, **params),
        "train": {"batch_size": 8, "max_step": 4, "save_checkpoints_steps": 2},
    }


def checkpoint_values(model_dir, step=None):
    """{variable name: value} of the model variables of a checkpoint (latest by default)."""
    path = tf.train.latest_checkpoint(model_dir)
    if step is not None:
        path = os.path.join(model_dir, "ckpt-%d" % step)
    reader = tf.train.load_checkpoint(path)
    return {
        name: reader.get_tensor(name)
        for name in reader.get_variable_to_shape_map()
        if name.startswith("model/")
        and name.endswith("VARIABLE_VALUE")
        and "OPTIMIZER_SLOT" not in name
    }
