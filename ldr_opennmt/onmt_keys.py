"""The configuration keys OpenNMT-tf 2.32 reads, per section.

Written by hand from OpenNMT-tf's configuration reference (docs/configuration.md of
OpenNMT-tf 2.32, :data:`ldr_opennmt.config_keys.OPENNMT_CONFIGURATION_URL`) and from the keys
its code reads that the reference leaves out (``train: batch_autotune_mode``,
``pad_to_bucket_boundary``, ``prefetch_buffer_size``, ``eval: external_evaluators``, ...):
OpenNMT-tf has no table of its own keys to import. ``tests/test_onmt_keys.py`` reads
the installed OpenNMT-tf's sources and fails when they read a key this table lacks (a new
release).

Only the keys directly under a section are listed: what is inside ``optimizer_params``,
``decay_params``, ``source_tokenization`` or ``early_stopping`` is read (and refused) by
OpenNMT-tf, pyonmttok or the optimizer themselves.
"""

import re

#: Keys at the top level of a run configuration.
TOP_LEVEL = frozenset(
    {"model_dir", "data", "params", "train", "eval", "infer", "score", "auto_config"}
)

#: ``data`` keys of fixed name (the per-inputter keys are :data:`INPUTTER_DATA_KEY`).
DATA = frozenset(
    {
        "train_features_file",
        "train_labels_file",
        "train_files_weights",
        "train_alignments",
        "example_weights",
        "eval_features_file",
        "eval_labels_file",
        "export_vocabulary_assets",
    }
)

#: The ``data`` keys each inputter reads under its prefix: ``source_``, ``target_``,
#: ``source_1_`` for the first of parallel inputs (``source_1_2_`` nested), the package's domain
#: labels under ``source_domain_``, none for a language model.
INPUTTER_SUFFIXES = (
    "vocabulary",
    "tokenization",
    "embedding",
    "sequence_controls",
    "tagging_scheme",
)

#: A ``data`` key an inputter reads (:data:`INPUTTER_SUFFIXES` under a prefix). A custom
#: inputter with another prefix declares its keys
#: (:func:`ldr_opennmt.config_keys.declare`).
INPUTTER_DATA_KEY = re.compile(
    r"^(?:(?:source|target)(?:_[0-9]+)*(?:_domain)?_)?(?:%s)$" % "|".join(INPUTTER_SUFFIXES)
)

PARAMS = frozenset(
    {
        "optimizer",
        "optimizer_params",
        "learning_rate",
        "dropout",
        "freeze_layers",
        "regularization",
        "average_loss_in_time",
        "mask_loss_outliers",
        "decay_type",
        "decay_params",
        "decay_step_duration",
        "start_decay_steps",
        "minimum_learning_rate",
        "scheduled_sampling_type",
        "scheduled_sampling_read_probability",
        "scheduled_sampling_k",
        "label_smoothing",
        "beam_width",
        "num_hypotheses",
        "length_penalty",
        "coverage_penalty",
        "sampling_topk",
        "sampling_temperature",
        "decoding_noise",
        "decoding_subword_token",
        "decoding_subword_token_is_spacer",
        "minimum_decoding_length",
        "maximum_decoding_length",
        "replace_unknown_target",
        "guided_alignment_type",
        "guided_alignment_weight",
        "contrastive_learning",
        "max_margin_eta",
        "tflite_output_size",
    }
)

TRAIN = frozenset(
    {
        "batch_size",
        "batch_type",
        "effective_batch_size",
        "save_checkpoints_steps",
        "keep_checkpoint_max",
        "save_summary_steps",
        "max_step",
        "single_pass",
        "maximum_features_length",
        "maximum_labels_length",
        "length_bucket_width",
        "sample_buffer_size",
        "moving_average_decay",
        "average_last_checkpoints",
        # Read by its code, not in the reference.
        "batch_autotune_mode",
        "batch_size_autotune_scale",
        "batch_size_autotune_timeout",
        "pad_to_bucket_boundary",
        "prefetch_buffer_size",
    }
)

EVAL = frozenset(
    {
        "batch_size",
        "batch_type",
        "steps",
        "save_eval_predictions",
        "scorers",
        "external_evaluators",  # The former name of scorers, still read.
        "length_bucket_width",
        "export_on_best",
        "export_format",
        "max_exports_to_keep",
        "early_stopping",
    }
)

INFER = frozenset(
    {
        "batch_size",
        "batch_type",
        "n_best",
        "with_scores",
        "with_alignments",
        "length_bucket_width",
        "prefetch_buffer_size",
    }
)

SCORE = frozenset(
    {
        "batch_size",
        "batch_type",
        "length_bucket_width",
        "with_token_level",
        "with_alignments",
        "prefetch_buffer_size",
    }
)

#: The keys of each section (``data`` also takes :data:`INPUTTER_DATA_KEY`).
SECTIONS = {
    "data": DATA,
    "params": PARAMS,
    "train": TRAIN,
    "eval": EVAL,
    "infer": INFER,
    "score": SCORE,
}


def reads(section, name):
    """Whether OpenNMT-tf reads :obj:`name` in :obj:`section` (``None``: the top level)."""
    if section is None:
        return name in TOP_LEVEL
    if name in SECTIONS.get(section, ()):
        return True
    return section == "data" and bool(INPUTTER_DATA_KEY.match(name))


def names(section):
    """The names OpenNMT-tf reads in :obj:`section` (``None``: the top level), the inputter
    keys of ``data`` as ``source_`` and ``target_`` ones."""
    if section is None:
        return set(TOP_LEVEL)
    found = set(SECTIONS.get(section, ()))
    if section == "data":
        found.update(
            "%s_%s" % (side, suffix)
            for side in ("source", "target")
            for suffix in INPUTTER_SUFFIXES
        )
    return found
