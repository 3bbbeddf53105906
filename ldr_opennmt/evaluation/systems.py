"""The systems ``ldr-eval`` evaluates: a trained model given by its OpenNMT-tf run
configuration(s) (:class:`System`: its Runner, checkpoint, domains, decoding options and
translation), the label modes it may be evaluated with, and the names of its files
(:func:`system_file_name`).

System names become file names: a name that looks like a path is refused where a
:class:`System` is made, and so are two systems of one name or of one file name
(:func:`check_system_names`).
"""

import json
import re

import tensorflow as tf

from ldr_opennmt import ensembles, probe, stamps
from ldr_opennmt.errors import UserError
from ldr_opennmt.names import check_path_name, check_unique
from ldr_opennmt.training.runner import Runner
from ldr_opennmt.utils import atomic_output

#: The ensemble label modes (:mod:`ldr_opennmt.ensembles`).
ENSEMBLE_MODES = ("ens-uniform", "ens-soft", "ens-learned")
#: The label modes of ``ldr-eval`` (see :mod:`ldr_opennmt.evaluation.evaluate`).
MODES = ("oracle", "generic", "wrong", "pred") + ENSEMBLE_MODES

#: OpenNMT-tf ``params`` that only training reads: left out of the translation stamp, so
#: that a changed learning rate alone does not redo translations. Every other parameter
#: (beam width, length and coverage penalties, maximum and minimum decoding length,
#: sampling, replacement of unknown words, ``num_hypotheses``, and any parameter a model
#: defines) is stamped: an unknown parameter costs at worst a needless translation, never
#: a stale one.
TRAINING_ONLY_PARAMS = frozenset(
    [
        "average_loss_in_time",
        "clip_gradients",
        "contrastive_learning",
        "decay_params",
        "decay_step_duration",
        "decay_type",
        "domain_training",
        "freeze_layers",
        "gradients_accum",
        "guided_alignment_type",
        "guided_alignment_weight",
        "label_smoothing",
        "learning_rate",
        "mask_loss_outliers",
        "max_margin_eta",
        "minimum_learning_rate",
        "optimizer",
        "optimizer_params",
        "regularization",
        "scheduled_sampling_k",
        "scheduled_sampling_read_probability",
        "scheduled_sampling_type",
        "start_decay_steps",
        "weight_decay",
    ]
)


#: Each run of these characters in a system name becomes ``_`` in its file names.
_NOT_IN_FILE_NAMES = re.compile(r"[^A-Za-z0-9._-]+")


def system_file_name(name, where="System"):
    """The name of a system's files (``NAME.oracle.fr``, ``NAME.stamp``).

    A system name is a table row: it may have spaces and punctuation (``Factorized PA``,
    ``Transformer (no legal)``); in its file names each run of characters other than
    letters, digits, ``-``, ``_`` and ``.`` becomes ``_`` (``Factorized_PA.oracle.fr``), and
    the result is checked by :func:`ldr_opennmt.names.check_path_name`. A name that looks
    like a path (a ``/`` or ``\\``, a leading ``.``), is blank, or has a line break or
    another control character is refused.

    Args:
      name: The system name.
      where: Where it comes from, for the message (``--system``).

    Raises:
      UserError: ``WHERE: invalid system name '../x' (it becomes a file name: ...)``.
    """
    if (
        not isinstance(name, str)
        or not name.strip()
        or name.startswith(".")
        or "/" in name
        or "\\" in name
        or not name.isprintable()
    ):
        check_path_name(name, "system name", where)  # Raises, with the rule for file names.
        raise UserError("%s: invalid system name %r" % (where, name))
    return check_path_name(_NOT_IN_FILE_NAMES.sub("_", name), "system name", where)


def check_system_names(systems, where):
    """Refuses two systems of one name, or whose files would have one name.

    Raises:
      UserError: ``WHERE: system name 'LDR' is given twice``, or ``WHERE: system names 'A B'
        and 'A_B' would share their files (A_B.*): rename one``.
    """
    check_unique([system.name for system in systems], "system name", where)
    seen = {}
    for system in systems:
        other = seen.setdefault(system.file_name, system.name)
        if other != system.name:
            raise UserError(
                "%s: system names %r and %r would share their files (%s.*): rename one"
                % (where, other, system.name, system.file_name)
            )


def check_system_domains(systems, domains, corpus_dir):
    """Refuses a system that declares a domain the corpus has no files for.

    Raises:
      UserError: ``system NAME declares domain 'x' but the corpus CORPUS has no files for it
        (its domains: ...)``.
    """
    for system in systems:
        for domain in system.config.get("data", {}).get("domains") or []:
            if domain not in domains:
                raise UserError(
                    "system %s declares domain %r but the corpus %s has no files for it "
                    "(its domains: %s)" % (system.name, domain, corpus_dir, ", ".join(domains))
                )


class System:
    """A trained system given by its OpenNMT-tf run configuration(s)."""

    def __init__(self, name, config_paths, modes=None, where="System"):
        """Initializes the system.

        Args:
          name: The row name; it also names the system's output files, see
            :func:`system_file_name` (:attr:`file_name`).
          config_paths: Its run configuration files (with ``model_dir``).
          modes: Label modes to evaluate it with, overriding those of
            :func:`ldr_opennmt.evaluation.evaluate.evaluate` (e.g. ``["oracle"]`` for a
            fine-tuned baseline).
          where: Where the name comes from, for the error message (e.g. ``--system``).

        Raises:
          UserError: on an invalid name (``--system: invalid system name '../x' (...)``), an
            unknown label mode or an unreadable configuration.
        """
        self.file_name = system_file_name(name, where)
        self.name = name
        self.config_paths = list(config_paths)
        if modes is not None:
            unknown = [m for m in modes if m not in MODES]
            if unknown or not modes:
                raise UserError(
                    "system %s: unknown label modes %s (known: %s)"
                    % (name, unknown or modes, ", ".join(MODES))
                )
        self.modes = tuple(modes) if modes is not None else None
        try:
            self.config = Runner.read_config(self.config_paths)
        except UserError as e:
            raise UserError("system %s: %s" % (name, e)) from e
        self.model_dir = self.config["model_dir"]
        self._runner = None
        self._finalized_config = None
        self._capabilities = None

    @property
    def runner(self):
        """The multi-domain Runner of the system (reads per-domain corpora and
        fine-tuning configurations); built on first use."""
        if self._runner is None:
            try:
                self._runner = Runner.from_files(self.config_paths, auto_config=True)
            except UserError as e:
                raise UserError("system %s: %s" % (self.name, e)) from e
        return self._runner

    @property
    def model(self):
        return self.runner.model

    @property
    def reads_labels(self):
        """Whether the model's inputs include a label file (read or ignored)."""
        return hasattr(self.model.features_inputter, "domain_inputter")

    @property
    def capabilities(self):
        """The model's :class:`ldr_opennmt.probe.Capabilities` (label policy, ensembles),
        read as the capability probe reads a family's
        (:func:`ldr_opennmt.probe.model_capabilities`) from the model initialized with the
        system's configuration: a family may create its domain layers in ``initialize``, as
        the domain output bias example does.

        Raises:
          UserError: ``system NAME: ...`` on a configuration error.
        """
        if self._capabilities is None:
            try:
                model = self.runner.checked_new_model(self.finalized_config())
            except UserError as e:
                raise UserError("system %s: %s" % (self.name, e)) from e
            self._capabilities = probe.model_capabilities(model)
        return self._capabilities

    @property
    def uses_domains(self):
        """Whether the labels change the translation: Mixed models ignore them, domain
        mixing models read them for training only (``optional_labels``)."""
        return self.capabilities.labels == probe.LABEL_NEEDED

    @property
    def domains(self):
        """The domains the system declares (``None`` for a model that ignores them)."""
        return (self.finalized_config().get("data") or {}).get("domains")

    @property
    def ensemble_refusal(self):
        """Why the system translates no ensemble of domain views, or ``None``."""
        capabilities = self.capabilities
        if capabilities.labels != probe.LABEL_NEEDED:
            return "%s does not use domain labels" % type(self.model).__name__
        return capabilities.ensembles

    def reload(self):
        """Forgets the runner and configuration (e.g. after ``ensemble.json`` was written)."""
        self._runner = None
        self._finalized_config = None
        self._capabilities = None

    def checkpoint(self):
        """The checkpoint translations are made with (the latest one)."""
        try:
            return self.runner.latest_checkpoint()
        except UserError as e:
            raise UserError("system %s: %s" % (self.name, e)) from e

    def checkpoint_digest(self, checkpoint=None):
        """The SHA-256 of a checkpoint's files, its ``.index`` and every data shard
        (:func:`ldr_opennmt.stamps.checkpoint_digest`, read through ``tf.io.gfile``): a model
        retrained at the same path differs.

        Args:
          checkpoint: The checkpoint prefix (default: :meth:`checkpoint`).

        Raises:
          UserError: ``system NAME: PREFIX: not a complete checkpoint ...``.
        """
        if checkpoint is None:
            checkpoint = self.checkpoint()
        try:
            return stamps.checkpoint_digest(
                checkpoint, open_file=tf.io.gfile.GFile, glob=tf.io.gfile.glob
            )
        except UserError as e:
            raise UserError("system %s: %s" % (self.name, e)) from e

    def finalized_config(self):
        """The configuration :meth:`translate` runs with (user files, automatic
        configuration and OpenNMT-tf's defaults); computed once."""
        if self._finalized_config is None:
            self._finalized_config = self.runner.finalized_config()
        return self._finalized_config

    def decoding_options(self):
        """What the translations depend on besides the weights and the input sentences.

        The :meth:`finalized_config`'s ``params`` but :data:`TRAINING_ONLY_PARAMS`, and its
        whole ``infer`` section (batch size, batch type and length bucketing change the
        padding, hence possibly the beam search's ties; ``n_best`` and ``with_scores``
        change the output lines), as plain JSON values.
        """
        config = self.finalized_config()
        params = config.get("params") or {}
        options = {
            "params": {k: v for k, v in params.items() if k not in TRAINING_ONLY_PARAMS},
            "infer": config.get("infer") or {},
            # ens-learned translations depend on the fitted weights, ens-uniform ones on
            # the views (a domain added into a reserved region adds one).
            "ensemble_weights": (config.get("data") or {}).get(ensembles.CONFIG_KEY),
            "domains": (config.get("data") or {}).get("domains"),
        }
        return json.loads(json.dumps(options, sort_keys=True, default=repr))

    def vocabularies(self):
        """The SHA-256 of each vocabulary file of the data configuration (a vocabulary
        reordered at the same size still loads the checkpoint, but translates otherwise)."""
        data = self.finalized_config().get("data") or {}
        return {
            key: stamps.file_digest(value, open_file=tf.io.gfile.GFile)
            for key, value in sorted(data.items())
            if key.endswith("_vocabulary") and isinstance(value, str) and tf.io.gfile.exists(value)
        }

    def translate(self, source_file, label_file, output, listener=None):
        """Translates with the latest checkpoint into :obj:`output` (atomically: the
        predictions are written under an exclusive temporary name, renamed when complete).

        Args:
          source_file: The source lines.
          label_file: Their labels (unread by a system that ignores domains).
          output: The translation file.
          listener: If set, ``listener(stopped, limit)`` after each translation, in input
            order (``stopped``: the translation stopped at ``maximum_decoding_length``,
            ``limit``), which then reports those (see ``Runner.infer``).
        """
        features = [source_file, label_file] if self.reads_labels else source_file
        checkpoint = self.checkpoint()
        with atomic_output(output) as tmp:
            self.runner.infer(
                features, predictions_file=tmp, checkpoint_path=checkpoint, listener=listener
            )
