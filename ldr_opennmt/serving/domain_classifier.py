"""The project's domain classifier, exported as a SavedModel, labelling sentences for
``ldr-serve --classifier``.

The classifier is ``model_defs/domain_classifier.py`` (:mod:`ldr_opennmt.models.classifier`)
exported by ``ldr-main --config data.yml classifier.yml export --output_dir DIR``: its
``serving_default`` signature takes ``tokens`` and ``length`` and gives ``classes`` (the
predicted domain) and ``probs`` (the posterior over its domains, in the order of its
``data: domains``), what ``ldr-main predict_domains`` writes (``pred`` labels) and
``infer: domain_posterior`` (``ens-soft`` labels). Its class names are read from the
SavedModel's lookup table (the export has no ``domains.txt``).

Its tokens come from its own exported source tokenizer (the export of a configuration
with ``source_tokenization``), else from the translation model's source tokenizer (the
classifier is trained on the translation corpus's tokenized source side).

Every call holds :mod:`ldr_opennmt.serving.savedmodel_translate`'s process-wide SavedModel lock.
"""

import os

import tensorflow as tf
from opennmt import constants

from ldr_opennmt import assets as assets_lib
from ldr_opennmt import ensembles
from ldr_opennmt.errors import UserError
from ldr_opennmt.serving import savedmodel_translate


def _class_names(imported, count, export_dir):
    """The classifier's domain names, in class order, from its ``ids_to_tokens`` table."""
    try:
        table = imported.examples_inputter.labels_inputter.ids_to_tokens
        names = tf.raw_ops.LookupTableFindV2(
            table_handle=table.resource_handle,
            keys=tf.range(count, dtype=tf.int64),
            default_value=tf.constant(""),
        ).numpy()
    except (AttributeError, tf.errors.OpError) as e:
        raise UserError(
            "--classifier: %s: cannot read the classifier's domain names (%s): export "
            "model_defs/domain_classifier.py with ldr-main export" % (export_dir, e)
        ) from None
    names = [name.decode("utf-8") for name in names]
    if not all(names):
        raise UserError("--classifier: %s: a class without a domain name" % export_dir)
    return names


class DomainClassifier:
    """Labels token lists with the domain classifier of an export.

    Attributes:
      domains: Its domain names, in class order.
      tokenizer: Its exported source tokenizer, or ``None`` (then the caller's tokens).
    """

    def __init__(self, export_dir):
        """Loads the export.

        Raises:
          UserError: if it is not an export of the domain classifier.
        """
        if not os.path.isdir(export_dir):
            raise UserError("--classifier: %s: directory not found" % export_dir)
        if not os.path.isfile(os.path.join(export_dir, "saved_model.pb")):
            raise UserError(
                "--classifier: %s: not a SavedModel directory (no saved_model.pb; export the "
                "classifier with ldr-main --config ... export --output_dir %s)"
                % (export_dir, export_dir)
            )
        self.export_dir = export_dir
        with savedmodel_translate._SAVED_MODEL_LOCK:
            imported = tf.saved_model.load(export_dir)
            signature = imported.signatures.get(savedmodel_translate.SIGNATURE)
            outputs = signature.structured_outputs if signature is not None else {}
            inputs = signature.structured_input_signature[1] if signature is not None else {}
            if set(outputs) < {"classes", "probs"} or set(inputs) != {"tokens", "length"}:
                raise UserError(
                    "--classifier: %s: not a domain classifier (its %s signature should take "
                    "tokens and length and give classes and probs: export "
                    "model_defs/domain_classifier.py with ldr-main export)"
                    % (export_dir, savedmodel_translate.SIGNATURE)
                )
            self._imported = imported  # Keeps the variables alive.
            self._signature = signature
            self.domains = _class_names(imported, outputs["probs"].shape[-1], export_dir)
        self.tokenizer = assets_lib.load_tokenizer(export_dir, "source")

    def tokenize(self, text):
        """The classifier's tokens of a raw sentence (``None``: it has no tokenizer)."""
        if self.tokenizer is None:
            return None
        return savedmodel_translate._tokenize(self.tokenizer, text)

    def __call__(self, token_lists):
        """Classifies token lists.

        Returns:
          One ``(domain, posterior)`` per sentence: the predicted domain and the
          probability of each of :attr:`domains`.
        """
        length = max(len(tokens) for tokens in token_lists)
        inputs = dict(
            tokens=tf.constant(
                [t + [constants.PADDING_TOKEN] * (length - len(t)) for t in token_lists],
                tf.string,
            ),
            length=tf.constant([len(t) for t in token_lists], tf.int32),
        )
        with savedmodel_translate._SAVED_MODEL_LOCK:
            outputs = self._signature(**inputs)
            classes = outputs["classes"].numpy()
            probs = outputs["probs"].numpy()
        return [
            (name.decode("utf-8"), [float(p) for p in posterior])
            for name, posterior in zip(classes, probs)
        ]

    def soft_label(self, posterior):
        """The ``ens-soft`` label of a posterior: an explicit ensemble label over the
        classifier's domains (``generic`` gets no weight, as ``ldr-eval`` writes them)."""
        return ensembles.format_label(list(posterior) + [0.0], self.domains)
