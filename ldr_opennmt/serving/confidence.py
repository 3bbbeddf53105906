"""A calibrated confidence for each translated sentence, without TensorFlow.

``ldr-export ctranslate2 --confidence --corpus DIR`` translates each domain's dev set with that
domain's folded model, scores every sentence (sacrebleu's chrF against its reference) and fits,
per domain, a logistic model of "this sentence's chrF is at least the dev median" on what the
server knows of a translation (:data:`FEATURES`: CTranslate2's score, the output's length
against the input's, the input's length); :mod:`ldr_opennmt.export.quality` stores its
parameters and the threshold below which an answer is flagged ``low_confidence`` (chosen on the
same dev set) in the export's ``quality.json``. This module applies them with numpy alone in
the serving runtime.

The confidence is that probability: 0.8 means that four in five sentences given 0.8 on the dev
set were at least as good as the domain's median sentence. It is calibrated for the decoding it
was fitted with (greedy, CTranslate2's default ``beam_size`` 1 of ``ldr-serve``); with another
beam the scores shift and the figure is an estimate.
"""

import math

import numpy as np

from ldr_opennmt.errors import UserError

#: What the model of a sentence's confidence reads, in order.
FEATURES = ("score", "score_per_token", "log_length_ratio", "log_source_length")


def features(source_length, output_length, score):
    """The :data:`FEATURES` of one translation.

    Args:
      source_length: Its source tokens.
      output_length: Its output tokens.
      score: CTranslate2's score of the hypothesis (a log-probability).
    """
    return [
        float(score),
        float(score) / max(1, output_length),
        math.log((output_length + 1.0) / (source_length + 1.0)),
        math.log(source_length + 1.0),
    ]


def _vector(entry, key, where, size):
    try:
        value = np.asarray(entry[key], dtype=np.float64)
    except (KeyError, TypeError, ValueError):
        raise UserError("%s: %s is missing or not numbers" % (where, key)) from None
    if value.shape != (size,) or not np.all(np.isfinite(value)):
        raise UserError("%s: %s: expected %d numbers" % (where, key, size))
    return value


class DomainConfidence:
    """One domain's calibrated model: standardized :data:`FEATURES`, then a logistic model.

    Attributes:
      threshold: Below this confidence an answer is ``low_confidence``.
    """

    def __init__(self, entry, where):
        if not isinstance(entry, dict):
            raise UserError("%s: expected a mapping" % where)
        size = len(FEATURES)
        self.mean = _vector(entry, "mean", where, size)
        self.scale = _vector(entry, "scale", where, size)
        self.coef = _vector(entry, "coef", where, size)
        if np.any(self.scale <= 0):
            raise UserError("%s: scale: expected positive numbers" % where)
        intercept, threshold = entry.get("intercept"), entry.get("threshold")
        if not isinstance(intercept, (int, float)) or not math.isfinite(intercept):
            raise UserError("%s: intercept: expected a number" % where)
        if not isinstance(threshold, (int, float)) or not 0 <= threshold <= 1:
            raise UserError("%s: threshold: expected a number in [0, 1]" % where)
        self.intercept = float(intercept)
        self.threshold = float(threshold)

    def __call__(self, rows):
        """The confidence of each row of :data:`FEATURES` (a list of lists), in [0, 1]."""
        rows = (np.asarray(rows, dtype=np.float64) - self.mean) / self.scale
        return 1.0 / (1.0 + np.exp(-(rows @ self.coef + self.intercept)))


class Confidence:
    """The calibrated confidence of an export's domains (``quality.json``'s ``confidence``).

    Attributes:
      domains: ``{domain: DomainConfidence}``: the domains calibrated (``generic`` too when the
        export has it).
      beam_size: The beam the calibration decoded with.
    """

    def __init__(self, stored, where="quality.json"):
        """Reads the parameters :func:`ldr_opennmt.export.quality.fit_confidence` stored.

        Raises:
          UserError: naming :obj:`where` and the key, if they are incomplete or inconsistent.
        """
        where = "%s: confidence" % where
        if not isinstance(stored, dict) or not isinstance(stored.get("domains"), dict):
            raise UserError("%s: domains: expected a mapping" % where)
        if list(stored.get("features") or []) != list(FEATURES):
            raise UserError(
                "%s: features: %r, expected %r (export again with this version's ldr-export)"
                % (where, stored.get("features"), list(FEATURES))
            )
        self.beam_size = stored.get("beam_size", 1)
        self.domains = {
            str(domain): DomainConfidence(entry, "%s: %s" % (where, domain))
            for domain, entry in stored["domains"].items()
        }

    def score(self, domain, source_lengths, outputs):
        """The confidence and flag of each translation of :obj:`domain`.

        Args:
          domain: The domain (model) that translated them.
          source_lengths: Each sentence's source tokens.
          outputs: Each sentence's ``(output tokens, CTranslate2 score)``.

        Returns:
          One ``(confidence, low_confidence)`` per sentence, or ``None`` for a domain the
          export has no calibration of.
        """
        model = self.domains.get(domain)
        if model is None or not outputs:
            return None
        rows = [
            features(length, len(tokens), score)
            for length, (tokens, score) in zip(source_lengths, outputs)
        ]
        return [(float(p), bool(p < model.threshold)) for p in model(rows)]
