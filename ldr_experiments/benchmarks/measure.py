"""The benchmark's measurements, each run in a process of its own (:func:`run_task`), and
the synthetic data they share.

A CTranslate2 measurement imports neither TensorFlow nor the registry nor a user module:
its row comes from the run's ``config.json``; the other measurements import TensorFlow
where they run.
"""

import collections
import json
import os
import random
import resource
import statistics
import sys
import tempfile
import time

from ldr_experiments import machine
from ldr_experiments.benchmarks.rows import (
    CT2,
    DOMAINS,
    FEED_ENSEMBLE,
    FEED_MIXED,
    INFER_DOMAIN,
    TF,
    TRAIN,
    VANILLA,
    Row,
    config_rows,
    find_row,
    infer_tasks,
)


def peak_rss_mib():
    """The peak resident set size of this process in MiB.

    On Linux this is ``VmHWM``, the peak of this process's own address space:
    ``ru_maxrss`` would be at least the RSS of the parent process, because the
    kernel carries the peak of the address space replaced by ``exec`` (the parent's,
    with the ``vfork`` that :mod:`subprocess` uses) into ``ru_maxrss``.
    """
    peak = machine.process_memory_mib()[1]
    if peak is not None:
        return peak
    maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return maxrss / (1024 * 1024 if sys.platform == "darwin" else 1024)  # Bytes on macOS.


def agreement(outputs, reference):
    """The fraction of sentences whose output equals the reference's, or ``None``."""
    if not outputs or reference is None or len(outputs) != len(reference):
        return None
    return sum(a == b for a, b in zip(outputs, reference)) / len(outputs)


def write_atomically(path, text):
    """Writes :obj:`text` to an exclusive temporary file next to :obj:`path`, then renames it.

    ``ldr_opennmt.utils.write_lines_atomic`` does the same, but importing the package
    imports TensorFlow, which this module keeps out of the CTranslate2 processes.
    """
    fd, tmp = tempfile.mkstemp(
        prefix="." + os.path.basename(path) + ".", dir=os.path.dirname(os.path.abspath(path))
    )
    renamed = False
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
        renamed = True
    finally:
        # Only the file created above: once renamed, whatever appears at its name is not ours.
        if not renamed and os.path.lexists(tmp):
            os.remove(tmp)


def directory_size_mib(path):
    """The total size of the files under :obj:`path` in MiB."""
    total = 0
    for root, _, files in os.walk(path):
        total += sum(os.path.getsize(os.path.join(root, name)) for name in files)
    return total / (1024 * 1024)


# The synthetic data.


def write_labels(path, sentences, domains, block):
    """Writes a label file: :obj:`domains` in turn by blocks of :obj:`block` lines."""
    with open(path, "w") as f:
        for i in range(sentences):
            f.write(domains[(i // block) % len(domains)] + "\n")


def write_data(directory, vocab_size, sentences, length, seed, block=1):
    """Writes random source/target/domain files and the shared vocabulary.

    The domains come in blocks of :obj:`block` sentences (a training batch), in turn:
    each training batch has one domain, as ``ldr-main``'s sampling gives.

    Returns:
      A dict of paths: ``src``, ``tgt``, ``dom`` and ``vocab``.
    """
    rng = random.Random(seed)
    words = ["w%d" % i for i in range(vocab_size)]
    paths = {k: os.path.join(directory, k) for k in ("src", "tgt", "dom", "vocab")}
    with open(paths["src"], "w") as src, open(paths["tgt"], "w") as tgt, open(
        paths["dom"], "w"
    ) as dom:
        for i in range(sentences):
            src.write(" ".join(rng.choices(words, k=length)) + "\n")
            tgt.write(" ".join(rng.choices(words, k=length)) + "\n")
            dom.write(DOMAINS[(i // block) % len(DOMAINS)] + "\n")
    with open(paths["vocab"], "w") as f:
        f.write("\n".join(["<blank>", "<s>", "</s>"] + words) + "\n")
    return paths


def inference_batches(config):
    """The inference sentences (token lists) in batches."""
    with open(config["paths"]["src"]) as f:
        sentences = [line.split() for _, line in zip(range(config["sentences"]), f)]
    size = config["infer_batch"]
    return [sentences[i : i + size] for i in range(0, len(sentences), size)]


# The measurements (each in its own process).


def _load_user_modules(config):
    """Loads the run's user modules (a TensorFlow process: they register families)."""
    specs = config.get("user_modules") or []
    if specs:
        from ldr_opennmt import registry

        for spec in specs:
            registry.load_user_module(spec)


def as_row(system, config):
    """The :class:`Row` of :obj:`system`: a row, or the name of one of the run's rows."""
    return system if isinstance(system, Row) else find_row(config, system)


def build_model(system, config):
    """A new model of a row (name or :class:`Row`) at the run's size."""
    import opennmt

    row = as_row(system, config)
    if row.name == VANILLA:
        return opennmt.models.Transformer(**config["size"])
    if row.family is None:
        raise ValueError("unknown system %r" % row.name)
    from ldr_opennmt import registry

    _load_user_modules(config)
    return registry.get(row.family).build(**config["size"], **row.kwargs)


def label_file(system, config):
    """The training label file of a row: its domains by blocks of one batch."""
    domains = as_row(system, config).domains
    if domains == DOMAINS:
        return config["paths"]["dom"]
    path = os.path.join(config["workdir"], "data", "dom_%d" % len(domains))
    if not os.path.exists(path):
        write_labels(path, config["data_sentences"], domains, config["batch"])
    return path


def _domain_token_vocabulary(domains, config):
    """The shared vocabulary followed by the domain tokens of :obj:`domains` (the target
    vocabulary of a model whose targets begin with one)."""
    from ldr_opennmt.models import ttm

    path = os.path.join(config["workdir"], "data", "vocab_domain_tokens_%d" % len(domains))
    if not os.path.exists(path):
        with open(config["paths"]["vocab"]) as f:
            words = f.read().split("\n")[:-1]
        write_atomically(path, "\n".join(words + ttm.domain_tokens(domains)) + "\n")
    return path


def data_config(system, config):
    row = as_row(system, config)
    paths = config["paths"]
    data = {"source_vocabulary": paths["vocab"], "target_vocabulary": paths["vocab"]}
    if row.domain_tokens:
        data["target_vocabulary"] = _domain_token_vocabulary(row.domains, config)
    if row.name != VANILLA:
        data["domains"] = row.domains
    return data


def measure_training(config, system, build=build_model, after=None):
    """Median step time of OpenNMT-tf's training step on cached batches.

    Args:
      config: The run's configuration.
      system: A row, or the name of one of the run's rows.
      build: ``build(system, config)`` makes the model (default :func:`build_model`; the
        GPU check builds with XLA and its own rows).
      after: Optional ``after(model, trainer)``, called once the timed steps are done (the
        GPU check's bit-identity check goes on training the same model); the dict it
        returns is added to the result.
    """
    import opennmt
    import tensorflow as tf

    import ldr_opennmt.models  # noqa: F401 (imports counted before the model)
    from ldr_opennmt.upstream import ledger

    _load_user_modules(config)
    import_rss = peak_rss_mib()
    tf.random.set_seed(config["seed"])
    paths = config["paths"]
    row = as_row(system, config)
    model = build(system, config)
    params = {"optimizer": "Adam", "learning_rate": 1e-4}
    if row.domain_training:
        params["domain_training"] = row.domain_training
    model.initialize(data_config(system, config), params=params)
    optimizer = model.get_optimizer()
    features_file = (
        paths["src"] if row.name == VANILLA else [paths["src"], label_file(system, config)]
    )
    dataset = model.examples_inputter.make_training_dataset(
        features_file,
        paths["tgt"],
        batch_size=config["batch"],
        batch_type="examples",
        shuffle_buffer_size=1,
        length_bucket_width=None,
    )
    # The same 16 batches for every row, held in memory: the step time measures
    # the model, not the text pipeline.
    dataset = dataset.take(16).cache().repeat()
    tokens = [
        int(tf.reduce_sum(features["length"]) + tf.reduce_sum(labels["length"]))
        for features, labels in dataset.take(16)
    ]
    if getattr(model, "requires_base", False):
        optimizer.iterations.assign(1)  # As after restoring a trained base (adapters).
    trainer = opennmt.training.Trainer(model, optimizer)
    times = []
    start = time.perf_counter()
    for i, loss in enumerate(ledger.training_steps(trainer, dataset, accum_steps=1)):
        now = time.perf_counter()
        if i >= config["warmup"]:
            times.append(now - start)
        start = now
        if len(times) == config["steps"]:
            break
    step = statistics.median(times)
    tokens_per_step = statistics.mean(tokens)
    result = {
        "params": model.count_params(),
        "ms_per_step": 1000 * step,
        "tokens_per_step": tokens_per_step,
        "tokens_per_s": tokens_per_step / step,
        "steps": len(times),
        "last_loss": loss,
        "import_rss_mib": import_rss,
    }
    if after is not None:
        result.update(after(model, trainer))
    return result


def _model_dirs(config, row):
    """The (SavedModel, CTranslate2) directories of a row's exported models."""
    root = config["workdir"]
    return os.path.join(root, "savedmodel", row.model), os.path.join(root, "ct2", row.model)


def _ct2_model_dir(config, row):
    _, ct2_dir = _model_dirs(config, row)
    return ct2_dir if row.name == VANILLA else os.path.join(ct2_dir, INFER_DOMAIN)


def _prepare_inference(config):
    """Builds each exported model once: the SavedModels and CTranslate2 models of the
    inference rows (an ensemble's is the SavedModel of the row it ensembles)."""
    import tensorflow as tf

    from ldr_opennmt.export import ct2_export

    _load_user_modules(config)
    exports = collections.OrderedDict()  # Model name: [a row that builds it, tf, ct2].
    for runtime, row in infer_tasks(config_rows(config)):
        export = exports.setdefault(row.model, [row, False, False])
        export[1 if runtime == TF else 2] = True
    exported = {}
    for name, (row, savedmodel, ct2) in exports.items():
        tf.random.set_seed(config["seed"])
        model = build_model(row, config)
        params = {
            "beam_width": config["beam"],
            "maximum_decoding_length": config["decode_length"],
            "minimum_decoding_length": config["decode_length"],
        }
        model.initialize(data_config(row, config), params=params)
        model.create_variables()
        savedmodel_dir, ct2_dir = _model_dirs(config, row)
        if savedmodel:
            model.export(savedmodel_dir)
        if ct2 and row.name == VANILLA:
            ct2_export.convert(model, ct2_dir, quantization=config["quantization"])
        elif ct2:
            ct2_export.export(
                model, ct2_dir, domains=[INFER_DOMAIN], quantization=config["quantization"]
            )
        exported[name] = {"params": model.count_params()}
    return exported


def _time_inference(config, translate, batches):
    """Times passes over the batches after one warm-up batch.

    Returns:
      (median seconds per pass, the outputs of the last pass).
    """
    translate(batches[0])
    times = []
    for _ in range(config["passes"]):
        outputs = []
        start = time.perf_counter()
        for batch in batches:
            outputs.extend(translate(batch))
        times.append(time.perf_counter() - start)
    return statistics.median(times), outputs


def _inference_result(seconds, outputs, model_dir, import_rss):
    tokens = sum(len(output) for output in outputs)
    return {
        "sentences_per_s": len(outputs) / seconds,
        "ms_per_sentence": 1000 * seconds / len(outputs),
        "tokens_per_s": tokens / seconds,
        "tokens_per_sentence": tokens / len(outputs),
        "sentences": len(outputs),
        "model_mib": directory_size_mib(model_dir),
        "import_rss_mib": import_rss,
        "outputs": outputs,
    }


def _measure_savedmodel(config, system):
    """Sentences/s of a SavedModel's ``serving_default`` signature (beam search)."""
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(config["threads"])
    _load_user_modules(config)
    import_rss = peak_rss_mib()
    row = find_row(config, system)
    model_dir, _ = _model_dirs(config, row)
    imported = tf.saved_model.load(model_dir)
    signature = imported.signatures["serving_default"]
    inputs = signature.structured_input_signature[1]
    feeds = []
    for batch in inference_batches(config):
        length = max(len(tokens) for tokens in batch)
        feed = {
            # "<blank>" is OpenNMT-tf's padding token (opennmt.constants.PADDING_TOKEN).
            "tokens": tf.constant([t + ["<blank>"] * (length - len(t)) for t in batch]),
            "length": tf.constant([len(t) for t in batch], tf.int32),
        }
        if "domain" in inputs:
            if row.labels == FEED_ENSEMBLE:
                labels = ["ens-uniform"] * len(batch)
            elif row.labels == FEED_MIXED:
                labels = [DOMAINS[i % len(DOMAINS)] for i in range(len(batch))]
            else:
                labels = [INFER_DOMAIN] * len(batch)
            feed["domain"] = tf.constant(labels)
        feeds.append(feed)

    def _translate(feed):
        outputs = signature(**feed)
        tokens = outputs["tokens"].numpy()[:, 0]
        lengths = outputs["length"].numpy()[:, 0]
        return [[t.decode("utf-8") for t in row[:n]] for row, n in zip(tokens, lengths)]

    seconds, outputs = _time_inference(config, _translate, feeds)
    return _inference_result(seconds, outputs, model_dir, import_rss)


def _measure_ctranslate2(config, system):
    """Sentences/s of a CTranslate2 model (beam search), without TensorFlow (nor the
    registry, nor any user module: the row comes from the configuration)."""
    import ctranslate2

    import_rss = peak_rss_mib()
    model_dir = _ct2_model_dir(config, find_row(config, system))
    # CTranslate2's throughput setting: one batch per thread, batches in parallel.
    # Why intra_threads=1: BENCHMARKS.md, "Measurements behind the budgets".
    translator = ctranslate2.Translator(
        model_dir, device="cpu", inter_threads=config["threads"], intra_threads=1
    )
    length = config["decode_length"]

    def _translate(sentences):
        results = translator.translate_batch(
            sentences,
            max_batch_size=config["infer_batch"],
            beam_size=config["beam"],
            max_decoding_length=length,
            min_decoding_length=length,
        )
        return [result.hypotheses[0] for result in results]

    batches = inference_batches(config)
    # One call per pass with every sentence (CTranslate2 splits them into batches of
    # max_batch_size); _time_inference's warm-up is then a whole pass.
    everything = [tokens for batch in batches for tokens in batch]
    seconds, outputs = _time_inference(config, _translate, [everything])
    result = _inference_result(seconds, outputs, model_dir, import_rss)
    if "tensorflow" in sys.modules:
        result["warning"] = "TensorFlow was imported in the CTranslate2 process"
    return result


def run_task(task, workdir):
    """Runs one measurement (in a process of its own) and writes its result file.

    Args:
      task: ``prepare``, ``train:<row>``, ``tf:<row>`` or ``ct2:<row>``.
      workdir: The run directory (``config.json`` is read from it).
    """
    with open(os.path.join(workdir, "config.json")) as f:
        config = json.load(f)
    kind, _, system = task.partition(":")
    if kind == "prepare":
        result = _prepare_inference(config)
    elif kind == TRAIN:
        result = measure_training(config, system)
    elif kind == TF:
        result = _measure_savedmodel(config, system)
    elif kind == CT2:
        result = _measure_ctranslate2(config, system)
    else:
        raise ValueError("unknown task %r" % task)
    result["peak_rss_mib"] = peak_rss_mib()
    with open(result_path(workdir, task), "w") as f:
        json.dump(result, f)


def result_path(workdir, task):
    return os.path.join(workdir, "results", task.replace(":", "-") + ".json")
