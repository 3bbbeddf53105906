"""The wrong-domain guard of a CTranslate2 export: which domain a raw sentence is from, without
TensorFlow.

``ldr-export ctranslate2 --domain_guard --corpus DIR`` fits it on the corpus's raw training
text (:mod:`ldr_opennmt.export.quality`, scikit-learn's ``TfidfVectorizer`` and
``LogisticRegression``) and stores its parameters in the export's ``quality.json``; this module
applies them with numpy alone, so that ``ldr-serve`` routes ``domain: auto`` in the serving
runtime (``.venv-serve``: no TensorFlow, no scikit-learn).

Its features are character n-grams of each word (:func:`char_ngrams`: the same function is
scikit-learn's analyzer at training, so both sides count the same n-grams), weighted by
sublinear tf-idf and scaled to unit length; a linear model gives the posterior over the
export's declared domains. When the largest posterior is below the threshold chosen on the dev
sets (:attr:`DomainGuard.threshold`), the sentence goes to ``generic``: a wrong domain costs
more than none (docs/serving.md, "The wrong-domain guard").

Why the parameters and not a pickle: a pickled scikit-learn model is tied to the version that
wrote it (the training environment's scikit-learn on Python 3.11 and numpy 1.24 is not the
serving runtime's), and unpickling runs code from the file; a table of numbers in JSON is read
by any version, and ``tests/serving/test_domain_guard.py`` checks that this module's
posteriors are scikit-learn's.
"""

import math

import numpy as np

from ldr_opennmt.errors import UserError

#: The ``domain_choice`` of a sentence the guard routed (``guard: ...`` when it fell back).
GUARD = "guard"


def char_ngrams(text, ngram_range):
    """The character n-grams of each word of :obj:`text`, lowercased, the word padded with a
    space on each side (a word no longer than ``n`` counts once, whole, and ends the larger
    ``n``): scikit-learn's ``char_wb`` analyzer, the features of the guard at training and at
    serving.

    Args:
      text: A raw sentence.
      ngram_range: ``(smallest n, largest n)``.
    """
    smallest, largest = ngram_range
    grams = []
    for word in text.lower().split():
        word = " %s " % word
        for n in range(smallest, largest + 1):
            if len(word) <= n:  # The whole word, once, as scikit-learn's char_wb counts it.
                grams.append(word)
                break
            grams.extend(word[i : i + n] for i in range(len(word) - n + 1))
    return grams


def _array(stored, key, where, ndim):
    try:
        value = np.asarray(stored[key], dtype=np.float64)
    except (KeyError, TypeError, ValueError):
        raise UserError("%s: domain_guard: %s is missing or not numbers" % (where, key)) from None
    if value.ndim != ndim or not np.all(np.isfinite(value)):
        raise UserError("%s: domain_guard: %s has the wrong shape" % (where, key))
    return value


class DomainGuard:
    """A linear model over character n-grams that picks a sentence's domain.

    Attributes:
      domains: The domains it chooses among (the export's declared domains), in class order.
      threshold: Below this posterior of its best domain, the sentence goes to ``generic``.
      fallback: Where those go (``generic``).
    """

    #: What ldr-serve's messages call it.
    export_dir = "the export's domain guard"

    def __init__(self, stored, where="quality.json"):
        """Reads the parameters :func:`ldr_opennmt.export.quality.fit_guard` stored.

        Raises:
          UserError: naming :obj:`where` and the key, if they are incomplete or inconsistent.
        """
        if not isinstance(stored, dict):
            raise UserError("%s: domain_guard: expected a mapping" % where)
        domains = stored.get("domains")
        if not isinstance(domains, list) or len(domains) < 2:
            raise UserError("%s: domain_guard: domains: expected two names or more" % where)
        self.domains = [str(d) for d in domains]
        ngram_range = stored.get("ngram_range")
        if (
            not isinstance(ngram_range, list)
            or len(ngram_range) != 2
            or not all(isinstance(n, int) and n >= 1 for n in ngram_range)
            or ngram_range[0] > ngram_range[1]
        ):
            raise UserError("%s: domain_guard: ngram_range: expected [smallest, largest]" % where)
        self.ngram_range = tuple(ngram_range)
        vocabulary = stored.get("vocabulary")
        if not isinstance(vocabulary, list) or not all(isinstance(g, str) for g in vocabulary):
            raise UserError("%s: domain_guard: vocabulary: expected a list of n-grams" % where)
        self.index = {gram: i for i, gram in enumerate(vocabulary)}
        self.idf = _array(stored, "idf", where, 1)
        self.coef = _array(stored, "coef", where, 2)
        self.intercept = _array(stored, "intercept", where, 1)
        classes = 1 if len(self.domains) == 2 else len(self.domains)
        if (
            len(self.idf) != len(vocabulary)
            or self.coef.shape != (classes, len(vocabulary))
            or self.intercept.shape != (classes,)
        ):
            raise UserError(
                "%s: domain_guard: idf, coef and intercept do not match its %d n-grams and %d"
                " domains" % (where, len(vocabulary), len(self.domains))
            )
        threshold = stored.get("threshold")
        if not isinstance(threshold, (int, float)) or not 0 <= threshold <= 1:
            raise UserError("%s: domain_guard: threshold: expected a number in [0, 1]" % where)
        self.threshold = float(threshold)
        self.fallback = str(stored.get("fallback", "generic"))

    # What ldr-serve asks of its classifier (ldr_opennmt.serving.server): the guard reads the
    # raw text, so a "token list" is the text itself.

    def tokenize(self, text):
        """The guard's input for :obj:`text`: the text itself (one item)."""
        return [text]

    def __call__(self, items):
        """``(domain, posterior)`` of each :meth:`tokenize` item: the domain is
        :attr:`fallback` where the guard is unsure (see :meth:`choose`)."""
        texts = [" ".join(item) for item in items]
        posteriors = self.posteriors(texts)
        return [
            (
                self.domains[int(np.argmax(p))] if p.max() >= self.threshold else self.fallback,
                [float(x) for x in p],
            )
            for p in posteriors
        ]

    def choice(self, posterior):
        """The answer's ``domain_choice`` for :obj:`posterior`: ``guard``, or why it fell back
        (``guard: medical 0.62 below 0.96, generic``)."""
        best = int(np.argmax(posterior))
        if posterior[best] >= self.threshold:
            return GUARD
        return "guard: %s %.2f below %.2f, %s" % (
            self.domains[best],
            posterior[best],
            self.threshold,
            self.fallback,
        )

    def features(self, texts):
        """The tf-idf rows of :obj:`texts` (sublinear tf, unit length), as a dense array."""
        rows = np.zeros((len(texts), len(self.idf)))
        for row, text in enumerate(texts):
            counts = {}
            for gram in char_ngrams(text, self.ngram_range):
                column = self.index.get(gram)
                if column is not None:
                    counts[column] = counts.get(column, 0) + 1
            for column, count in counts.items():
                rows[row, column] = (1.0 + math.log(count)) * self.idf[column]
            norm = np.linalg.norm(rows[row])
            if norm > 0:
                rows[row] /= norm
        return rows

    def posteriors(self, texts):
        """The probability of each of :attr:`domains` for each text: ``(len(texts), domains)``."""
        scores = self.features(texts) @ self.coef.T + self.intercept
        if len(self.domains) == 2:
            second = 1.0 / (1.0 + np.exp(-scores[:, 0]))
            return np.stack([1.0 - second, second], axis=1)
        scores -= scores.max(axis=1, keepdims=True)
        exp = np.exp(scores)
        return exp / exp.sum(axis=1, keepdims=True)

    def choose(self, texts):
        """The guard's choice for each text: ``(domain, posterior of its best domain, why)``,
        where ``domain`` is :attr:`fallback` when that posterior is below :attr:`threshold`
        (``why`` then names the domain it would have picked)."""
        return [
            (
                self.domains[int(np.argmax(p))] if p.max() >= self.threshold else self.fallback,
                float(p.max()),
                self.choice(p),
            )
            for p in self.posteriors(texts)
        ]
