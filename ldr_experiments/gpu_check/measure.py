"""The GPU check's measurements, each in a child process: a family's training in one mode,
the bit identity of absent domains' parameters, and translation on the GPU."""

import math
import os
import time

from ldr_experiments.benchmarks import measure as bench_measure
from ldr_experiments.benchmarks import rows as bench_rows
from ldr_experiments.gpu_check.plan import (
    FP32,
    MIXED,
    MIXED_XLA,
    PRESENT_DOMAIN,
    TRANSFORMER,
    steps_of,
)


def _set_policy(config, mode):
    import tensorflow as tf

    if mode in (MIXED, MIXED_XLA):
        tf.keras.mixed_precision.set_global_policy(config["mixed_policy"])


def builder(mode):
    """``build(system, config)``: the model of a row of this check (a row, or the name of one of
    the run's rows), with XLA under ``mixed_xla`` (as ``onmt-main --jit_compile``:
    ``model.set_jit_compile(True)``).

    A row of a family of another architecture than the Transformer (the RNNs) carries its
    sizes in its builder arguments (:func:`ldr_experiments.gpu_check.rows.check_rows`);
    :func:`ldr_experiments.benchmarks.measure.build_model` builds the others at the
    benchmark's Transformer size.
    """

    def build(system, config):
        from ldr_opennmt import registry

        row = bench_measure.as_row(system, config)
        family = registry.get(row.family) if row.family else None
        if family is not None and family.architecture != TRANSFORMER:
            model = family.build(**row.kwargs)
        else:
            model = bench_measure.build_model(row, config)
        if mode == MIXED_XLA:
            model.set_jit_compile(True)
        return model

    return build


def _gpu_memory_mib():
    import tensorflow as tf

    if not tf.config.list_logical_devices("GPU"):
        return None
    return tf.config.experimental.get_memory_info("GPU:0")["peak"] / (1024 * 1024)


def measure(config, mode, system, frozen_check=False):
    """One family in one mode: :func:`ldr_experiments.benchmarks.measure.measure_training`
    with :func:`builder`'s model, plus the loss check; with :obj:`frozen_check` (its long
    run under mixed precision + XLA), the bit-identity check of :func:`present_phase` on the
    model it trained, under ``"frozen"``."""
    _set_policy(config, mode)
    bench_config = dict(config)
    bench_config["steps"] = steps_of(config, mode, system)

    def after(model, trainer):
        return {"frozen": present_phase(config, system, model, trainer)}

    result = bench_measure.measure_training(
        bench_config, system, build=builder(mode), after=after if frozen_check else None
    )
    result["finite_loss"] = math.isfinite(result["last_loss"])
    if frozen_check:
        result["frozen"]["finite_loss"] &= result["finite_loss"]
    result["gpu_peak_mib"] = _gpu_memory_mib()
    result["policy"] = config["mixed_policy"] if mode != FP32 else "float32"
    return result


def _snapshot(variables):
    return [v.numpy().copy() for v in variables]


def _train(config, trainer, dataset, steps):
    """The losses of :obj:`steps` steps of :obj:`trainer` on :obj:`dataset`."""
    from ldr_opennmt.upstream import ledger

    losses = []
    for loss in ledger.training_steps(trainer, dataset, accum_steps=1):
        losses.append(loss)
        if len(losses) == steps:
            break
    return losses


def _dataset(config, model, labels):
    """The run's 16 cached training batches with the domain labels of :obj:`labels`."""
    paths = config["paths"]
    dataset = model.examples_inputter.make_training_dataset(
        [paths["src"], labels],
        paths["tgt"],
        batch_size=config["batch"],
        batch_type="examples",
        shuffle_buffer_size=1,
        length_bucket_width=None,
    )
    return dataset.take(16).cache().repeat()


def present_phase(config, system, model, trainer):
    """The second phase of the bit-identity check, on a model that has trained on batches of
    every domain (so Adam has moments for every region): ``frozen_steps`` steps on batches of
    :data:`PRESENT_DOMAIN` only, then the other domains' regions compared with theirs before.
    """
    import numpy as np

    present = os.path.join(config["workdir"], "data", "dom_present")
    if not os.path.exists(present):
        bench_measure.write_labels(present, config["data_sentences"], [PRESENT_DOMAIN], 1)
    regions = model.domain_weights()
    present_id = bench_rows.DOMAINS.index(PRESENT_DOMAIN)
    absent = [k for k in regions if k != present_id]
    before = {k: _snapshot(regions[k]) for k in regions}
    losses = _train(config, trainer, _dataset(config, model, present), config["frozen_steps"])
    changed = {
        k: sum(not np.array_equal(v.numpy(), b) for v, b in zip(regions[k], before[k]))
        for k in regions
    }
    return {
        "regions": len(regions),
        "absent_regions": len(absent),
        "absent_variables": sum(len(regions[k]) for k in absent),
        "absent_changed": sum(changed[k] for k in absent),
        "present_variables": len(regions.get(present_id, [])),
        "present_changed": changed.get(present_id, 0),
        "compute_dtype": model.compute_dtype,
        "finite_loss": all(math.isfinite(loss) for loss in losses),
        "loss_scale": float(getattr(trainer._optimizer, "loss_scale", float("nan"))),
    }


def frozen(config, system):
    """Float16 + XLA: the parameters of absent domains stay bit-identical, in a process of its
    own (a run whose modes have no mixed precision + XLA long run to share it with).

    Trains ``frozen_steps`` steps on batches of every domain, then :func:`present_phase`.
    """
    import opennmt
    import tensorflow as tf

    _set_policy(config, MIXED_XLA)
    tf.random.set_seed(config["seed"])
    model = builder(MIXED_XLA)(system, config)
    params = {"optimizer": "Adam", "learning_rate": 1e-3}
    params["domain_training"] = bench_measure.as_row(system, config).domain_training
    model.initialize(bench_measure.data_config(system, config), params=params)
    trainer = opennmt.training.Trainer(model, model.get_optimizer())
    labels = bench_measure.label_file(system, config)
    losses = _train(config, trainer, _dataset(config, model, labels), config["frozen_steps"])
    result = present_phase(config, system, model, trainer)
    result["finite_loss"] &= all(math.isfinite(loss) for loss in losses)
    return result


def translate(config):
    """An LDR SavedModel and its folded CTranslate2 models translate with labels on the GPU
    (the benchmark's inference row of :data:`TRANSLATE_FAMILY`)."""
    import ctranslate2
    import tensorflow as tf

    from ldr_opennmt.export import ct2_export
    from ldr_opennmt.serving import savedmodel_translate

    tf.random.set_seed(config["seed"])
    row = bench_rows.Row(**config["translate"])
    system = row.name
    model = bench_measure.build_model(row, config)
    model.initialize(
        bench_measure.data_config(row, config),
        params={
            "beam_width": config["beam"],
            "maximum_decoding_length": config["decode_length"],
            "minimum_decoding_length": config["decode_length"],
        },
    )
    model.create_variables()
    savedmodel = os.path.join(config["workdir"], "savedmodel", system)
    ct2_dir = os.path.join(config["workdir"], "ct2", system)
    domains = bench_rows.DOMAINS[:2]
    model.export(savedmodel)
    ct2_export.export(model, ct2_dir, domains=domains)
    sentences = [batch for batch in bench_measure.inference_batches(config)][0]
    result = {"sentences": len(sentences), "domains": domains}

    translator = savedmodel_translate.SignatureRunner(savedmodel)
    outputs = {}
    start = time.perf_counter()
    for domain in domains:
        outputs[domain] = translator(sentences, [domain] * len(sentences))
    result["savedmodel_s"] = time.perf_counter() - start
    result["savedmodel_on_gpu"] = bool(tf.config.list_logical_devices("GPU")) and (
        tf.config.experimental.get_memory_info("GPU:0")["peak"] > 0
    )
    result["savedmodel_lengths"] = sorted({len(o) for d in domains for o in outputs[d]})
    result["labels_change_output"] = outputs[domains[0]] != outputs[domains[1]]

    result["ct2_cuda_devices"] = ctranslate2.get_cuda_device_count()
    for compute_type in ("float32", "float16"):
        key = "ct2_%s" % compute_type
        try:
            ct2 = ctranslate2.Translator(
                os.path.join(ct2_dir, domains[0]), device="cuda", compute_type=compute_type
            )
            start = time.perf_counter()
            hypotheses = [
                r.hypotheses[0]
                for r in ct2.translate_batch(
                    sentences,
                    beam_size=config["beam"],
                    max_decoding_length=config["decode_length"],
                    min_decoding_length=config["decode_length"],
                )
            ]
            result[key] = {
                "seconds": time.perf_counter() - start,
                "lengths": sorted({len(h) for h in hypotheses}),
                "agreement": bench_measure.agreement(hypotheses, outputs[domains[0]]),
            }
        except Exception as e:  # Reported, not raised: the other checks still run.
            result[key] = {"error": "%s: %s" % (type(e).__name__, e)}
    return result
