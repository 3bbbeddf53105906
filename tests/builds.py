"""Tiny models and exports that several test files use, built once per test session
(:mod:`tests.session_cache`): the first file that asks builds, the others (in any worker) read.

Each builder's key names its recipe; what it returns is read-only (a test that changes it
copies it first).
"""

import os
import random

from tests import corpus, session_cache

#: The classifier's source words typical of each domain (the synthetic translation corpus
#: shares its source vocabulary across domains, so the classifier gets its own sentences).
CLASSIFIER_CUES = {
    "medical": ["patient", "dose", "tumour"],
    "religious": ["lord", "prophet", "temple"],
    "software": ["click", "file", "server"],
}
#: The trained classifier's size and training (80 steps: it separates the cue words).
CLASSIFIER_DEFINITION = (
    "from ldr_opennmt import models\n\n\ndef model():\n"
    "    return models.domain_classifier(16, 16, dropout=0.0)\n"
)


def write_classifier_data(directory, split, count, seed):
    """Per-domain classifier corpora of :obj:`count` sentences, each with one cue word.

    Returns:
      ``({domain: [source, target]}, source vocabulary path)``.
    """
    rng = random.Random(seed)
    shared = ["the", "a", "big", "small", "is", "here", "cell", "host"]
    files = {}
    for domain, cues in CLASSIFIER_CUES.items():
        lines = []
        for _ in range(count):
            words = [rng.choice(shared) for _ in range(rng.randint(1, 4))]
            words.insert(rng.randint(0, len(words)), rng.choice(cues))
            lines.append(" ".join(words))
        source = os.path.join(directory, "%s.%s.src" % (split, domain))
        corpus.write_lines(source, lines)
        corpus.write_lines(
            os.path.join(directory, "%s.%s.domain" % (split, domain)), [domain] * count
        )
        # The target side is not read by the classifier; the Runner checks it is aligned.
        corpus.write_lines(os.path.join(directory, "%s.%s.tgt" % (split, domain)), lines)
        files[domain] = [source, os.path.join(directory, "%s.%s.tgt" % (split, domain))]
    vocab = os.path.join(directory, "src.vocab")
    words = sorted(set(shared) | {w for cues in CLASSIFIER_CUES.values() for w in cues})
    corpus.write_lines(vocab, ["<blank>", "<s>", "</s>"] + words)
    return files, vocab


def classifier_config(directory):
    """The tiny classifier's ``ldr-main`` configuration: its data under
    :obj:`directory`/data (:func:`write_classifier_data`, ``train`` split of 60 sentences a
    domain, seed 0), its model directory :obj:`directory`/model."""
    data_dir = os.path.join(directory, "data")
    return {
        "model_dir": os.path.join(directory, "model"),
        "data": {
            "source_vocabulary": os.path.join(data_dir, "src.vocab"),
            "train_corpora": {
                domain: [
                    os.path.join(data_dir, "train.%s.src" % domain),
                    os.path.join(data_dir, "train.%s.tgt" % domain),
                ]
                for domain in CLASSIFIER_CUES
            },
        },
        "params": {"optimizer": "Adam", "learning_rate": 0.02},
        "train": {
            "batch_size": 32,
            "max_step": 80,
            "save_checkpoints_steps": 80,
            "sample_buffer_size": 1000,
        },
        "infer": {"batch_size": 16},
    }


def _build_classifier(directory):
    from ldr_opennmt import models
    from ldr_opennmt.training.runner import Runner
    from tests.serving.fixtures import TOKENIZATION

    def _model():
        return models.domain_classifier(16, 16, dropout=0.0)

    data_dir = os.path.join(directory, "data")
    os.makedirs(data_dir)
    write_classifier_data(data_dir, "train", 60, seed=0)
    config = classifier_config(directory)
    Runner(_model, config, seed=1).train()
    with open(os.path.join(config["model_dir"], "model_description.py"), "w") as f:
        f.write(CLASSIFIER_DEFINITION)
    # Trained on tokenized text; exported with the tokenizer that makes such tokens.
    config["data"]["source_tokenization"] = TOKENIZATION
    Runner(_model, config, seed=1).export(os.path.join(directory, "export"))


def trained_classifier():
    """The tiny domain classifier trained for 80 steps (seed 1) and exported with a
    tokenizer.

    Returns:
      ``(configuration, export directory)``: the configuration of its training (its
      ``model_dir`` holds the checkpoint and ``model_description.py``).
    """
    directory = session_cache.directory("classifier-80-steps", _build_classifier)
    return classifier_config(directory), os.path.join(directory, "export")


def tiny_ldr_ct2(languages=None):
    """The CTranslate2 export (``ldr-export ctranslate2``) of the serving tests' tiny LDR
    (:func:`tests.serving.fixtures.tiny_model`, seed 5, raw-text tokenizers).

    Args:
      languages: ``(source, target)``: its corpus is one of ``ldr-data build files`` of that
        language pair, which the export records.
    """
    from tests.serving import fixtures

    key = "ct2-tiny-ldr" + ("-%s-%s" % tuple(languages) if languages else "")

    def _build(directory):
        model, _ = fixtures.tiny_model(directory, languages=languages)
        fixtures.ct2_directory(model, directory)

    return os.path.join(session_cache.directory(key, _build), "ct2")


def write_quality_corpus(directory, train=60, dev=40, test=20, seed=0):
    """A corpus directory as ``ldr-data`` leaves it for ``ldr-export --domain_guard
    --confidence``: ``corpus.json`` (en to fr, :data:`tests.corpus.DOMAINS`) and
    ``raw/{train,dev,test}.DOMAIN.{en,fr}``, each source sentence of :func:`tests.corpus.make_pairs`
    with one cue word of its domain (:data:`CLASSIFIER_CUES`: what the guard can learn).

    Returns:
      ``(directory, its corpus.json as a dict)``.
    """
    import json  # pylint: disable=import-outside-toplevel

    raw = os.path.join(directory, "raw")
    os.makedirs(raw, exist_ok=True)
    rng = random.Random(seed)
    for split, count in (("train", train), ("dev", dev), ("test", test)):
        for domain in corpus.DOMAINS:
            sources, targets = [], []
            for source, target in corpus.make_pairs(domain, count, seed + len(split)):
                words = source.split()
                words.insert(rng.randint(0, len(words)), rng.choice(CLASSIFIER_CUES[domain]))
                sources.append(" ".join(words) + ".")
                targets.append(target + ".")
            corpus.write_lines(os.path.join(raw, "%s.%s.en" % (split, domain)), sources)
            corpus.write_lines(os.path.join(raw, "%s.%s.fr" % (split, domain)), targets)
    info = {"domains": list(corpus.DOMAINS), "source_lang": "en", "target_lang": "fr"}
    with open(os.path.join(directory, "corpus.json"), "w") as f:
        json.dump(info, f)
    return directory, info


def tiny_ldr_ct2_quality():
    """:func:`tiny_ldr_ct2`'s model exported with its domain guard and calibrated confidence
    (``ldr-export ctranslate2 --domain_guard --confidence --corpus``: the CLI's own writer) on
    :func:`write_quality_corpus`.

    Returns:
      ``(export directory, corpus directory)``.
    """
    import types  # pylint: disable=import-outside-toplevel

    import opennmt  # pylint: disable=import-outside-toplevel

    from ldr_opennmt.cli import export as export_cli  # pylint: disable=import-outside-toplevel
    from ldr_opennmt.export import ct2_export  # pylint: disable=import-outside-toplevel
    from tests.serving import fixtures  # pylint: disable=import-outside-toplevel

    def _build(directory):
        model, _ = fixtures.tiny_model(directory)
        corpus_dir, info = write_quality_corpus(os.path.join(directory, "quality-corpus"))
        checkpoint = opennmt.utils.checkpoint.Checkpoint(
            model, model_dir=os.path.join(directory, "model")
        )
        args = types.SimpleNamespace(corpus=corpus_dir, domain_guard=True, confidence=True)
        ct2_export.export(
            model,
            os.path.join(directory, "ct2"),
            checkpoint_path=checkpoint.save(step=1),
            quality=export_cli._quality_writer(args, info, model),  # pylint: disable=W0212
        )

    directory = session_cache.directory("ct2-tiny-ldr-quality", _build)
    return os.path.join(directory, "ct2"), os.path.join(directory, "quality-corpus")
