"""Target Token Mixing (TTM; Britz et al., 2017): the domain as the first target word.

A plain Transformer (the Mixed baseline's) is trained on every domain, the target of a
sentence of domain ``NAME`` starting with the token ``<domain:NAME>``: the decoder
reads ``<s> <domain:NAME> w1 ..`` and learns to predict ``<domain:NAME> w1 .. </s>``.
The source is unchanged; no parameter is domain-specific, the domain token is a word
of the target vocabulary like any other.

**Inference.** With the label ``generic`` (``ldr-eval`` mode ``generic``), the model
predicts its domain token first, as the paper's model does, and translates after it.
With a real domain label (modes ``oracle`` and ``wrong``) the first target token is
forced to that domain's token (:mod:`ldr_opennmt.layers.ttm`: the other tokens have
probability 0 at step 0, for greedy search, beam search and sampling alike). Either
way every domain token is removed from the output (tokens, length and alignment;
``log_probs`` keep the score of the whole decoded sequence, in which a forced token
counts 0). The SavedModel takes one domain label per sentence, ``generic`` to let the
model predict it.

**Choices where the paper is silent** (it describes the method for one domain label
per sentence and a learned first token):

* Spelling ``<domain:NAME>``: angle brackets as OpenNMT-tf's own special tokens, a
  prefix that a tokenized word cannot produce by accident. The tokens must be in the
  target vocabulary (``initialize`` names the missing ones, see :func:`domain_tokens`),
  so that an existing vocabulary is never silently extended.
* ``generic``-labelled training sentences get no token: the label means "no domain"
  everywhere in this package, and a ``<domain:generic>`` token would make a domain of
  it. A ``generic`` label at inference means "the model decides".
* Every domain token is stripped, wherever it is: the model may emit one again later
  in the sentence (or a second one after the forced one), and no domain token is ever
  a translation.
* Sources without a label file (``infer --features_file test.src``) are ``generic``;
  training needs labels (without them no target would have a token).
* Scoring (``onmt-main score``, forced decoding) scores the target with its domain
  token, the sequence the model was trained on; the printed sentence and token-level
  scores are those of the words (so that they line up with the scored text).
* Training is joint (one pass, every parameter): the model has no domain-specific
  parameter for Procedure 1 to route.
"""

import opennmt
import tensorflow as tf
from opennmt import constants

from ldr_opennmt import domains as domains_lib
from ldr_opennmt import family_table
from ldr_opennmt.errors import UserError
from ldr_opennmt.inputters import MultiDomainInputter, constant_label, constant_label_name
from ldr_opennmt.layers import factorized as factorized_layers
from ldr_opennmt.layers import ttm as ttm_layers
from ldr_opennmt.layers.behaviours import Behaviour, install_behaviour
from ldr_opennmt.models import multitask, procedure
from ldr_opennmt.models.sequence_to_sequence import (
    MultiDomainTransformer,
    word_transformer_arguments,
)

#: The spelling of a domain token.
DOMAIN_TOKEN_FORMAT = "<domain:%s>"


def domain_token(name):
    """The target token of domain :obj:`name`."""
    return DOMAIN_TOKEN_FORMAT % name


def domain_tokens(domains):
    """The target tokens of the declared :obj:`domains`, in domain-id order."""
    return [domain_token(name) for name in domains]


def missing_domain_tokens(vocabulary_file, domains):
    """The domain tokens of :obj:`domains` that are not lines of :obj:`vocabulary_file`."""
    vocabulary = opennmt.data.Vocab.from_file(vocabulary_file)
    return [token for token in domain_tokens(domains) if token not in vocabulary]


def strip_tokens(predictions, tokens):
    """Removes every occurrence of :obj:`tokens` from decoded predictions.

    Args:
      predictions: OpenNMT-tf's predictions: ``tokens`` ``[batch, hyp, time]``,
        ``length`` ``[batch, hyp]`` and optionally ``alignment``
        ``[batch, hyp, time', source]``.
      tokens: The token strings to remove.

    Returns:
      New predictions: the kept tokens moved left in order, ``</s>`` after them, the
      lengths and alignment rows adjusted.
    """
    predictions = dict(predictions)
    words, length = predictions["tokens"], predictions["length"]
    positions = tf.range(tf.shape(words)[-1], dtype=length.dtype)
    strip = tf.reduce_any(tf.equal(words[..., tf.newaxis], tf.constant(tokens)), axis=-1)
    keep = tf.logical_and(positions < length[..., tf.newaxis], tf.logical_not(strip))
    # The kept positions first, in their order (a stable sort of 0 = kept, 1 = dropped).
    order = tf.argsort(tf.cast(tf.logical_not(keep), tf.int32), axis=-1, stable=True)
    new_length = tf.reduce_sum(tf.cast(keep, length.dtype), axis=-1)
    words = tf.gather(words, order, batch_dims=2)
    predictions["tokens"] = tf.where(
        positions < new_length[..., tf.newaxis], words, constants.END_OF_SENTENCE_TOKEN
    )
    predictions["length"] = new_length
    alignment = predictions.get("alignment")
    if alignment is not None:
        # One row per decoded token but the last (</s>): the kept tokens come first.
        rows = tf.shape(alignment)[2]
        order = tf.minimum(order[:, :, :rows], tf.maximum(rows - 1, 0))
        predictions["alignment"] = tf.gather(alignment, order, batch_dims=2)
    return predictions


class _UnlabelledSourceIsGeneric(Behaviour):
    """Source inputter behaviour: a source file given without labels is ``generic``
    (translated with the predicted domain token); training still needs labels."""

    applies_to = (MultiDomainInputter,)

    def _unlabelled(self, data_file):
        if isinstance(data_file, (list, tuple)) and len(data_file) == 1:
            data_file = data_file[0]
        if isinstance(data_file, str) and constant_label_name(data_file) is None:
            return data_file
        return None

    def split_files(self, data_file):
        source = self._unlabelled(data_file)
        if source is not None:
            return source, constant_label(domains_lib.GENERIC)
        return super().split_files(data_file)

    def make_dataset(self, data_file, training=None):
        if training and self._unlabelled(data_file) is not None:
            raise UserError(
                "Target Token Mixing needs domain labels for training (each target starts "
                "with its domain token): give features_file: [train.src, train.domain] or "
                "data: train_corpora, got %r" % (data_file,)
            )
        return super().make_dataset(data_file, training=training)


class TTMTransformer(MultiDomainTransformer):
    """A Transformer whose targets start with a domain token (Target Token Mixing)."""

    # The label forces the domain token: translations depend on it.
    reads_labels_without_domain_layers = True

    domain_training_modes = (procedure.JOINT,)
    domain_training_reason = "Target Token Mixing trains jointly (no parameter is domain-specific)"

    #: Why ``ldr-export ctranslate2`` refuses the model.
    ctranslate2_refusal = (
        "TTM forces the domain token at the first decoding step and strips domain tokens "
        "from the output, which a plain CTranslate2 model does not do: export a SavedModel"
    )

    def __init__(
        self,
        num_layers=6,
        num_units=512,
        num_heads=8,
        ffn_inner_dim=2048,
        dropout=0.1,
        share_target_embeddings=False,
        strip_domain_tokens=True,
    ):
        """Initializes the model.

        Args:
          num_layers: Number of encoder and decoder layers.
          num_units: Model size.
          num_heads: Number of attention heads.
          ffn_inner_dim: FFN inner size.
          dropout: Dropout, attention dropout and FFN dropout.
          share_target_embeddings: Tie the target input and output embeddings.
          strip_domain_tokens: Remove the domain tokens from the predictions (``False``
            shows what was decoded, e.g. the predicted domain).
        """
        super().__init__(
            domain_training=procedure.JOINT,
            **word_transformer_arguments(
                num_layers, num_units, num_heads, ffn_inner_dim, dropout, share_target_embeddings
            ),
        )
        self.strip_domain_tokens = bool(strip_domain_tokens)
        install_behaviour(self.decoder, ttm_layers.FirstTokenForcing)
        install_behaviour(self.features_inputter, _UnlabelledSourceIsGeneric)
        self.examples_inputter.target_prefix_fn = self._target_prefix

    @property
    def domain_tokens(self):
        """The target tokens of the declared domains, in domain-id order."""
        return domain_tokens(self.domains)

    def initialize(self, data_config, params=None):
        super().initialize(data_config, params=params)
        vocabulary_file = self.labels_inputter.vocabulary_file
        missing = missing_domain_tokens(vocabulary_file, self.domains)
        if missing:
            raise UserError(
                "%s: the target vocabulary lacks the domain token%s %s that Target Token "
                "Mixing puts before each target: append %s to the vocabulary file, one "
                "token per line"
                % (
                    vocabulary_file,
                    "s" if len(missing) > 1 else "",
                    " ".join(missing),
                    "them" if len(missing) > 1 else "it",
                )
            )
        if self.labels_inputter.tokenizer.in_graph:
            raise UserError(
                "Target Token Mixing needs the target tokens of each prediction to remove "
                "the domain token: the target tokenizer must not run in the graph"
            )
        if data_config.get("train_alignments"):
            raise UserError(
                "data: train_alignments is not supported by Target Token Mixing (the "
                "alignments would not count the domain token at the start of each target)"
            )
        vocabulary = opennmt.data.Vocab.from_file(vocabulary_file)
        self.decoder.first_token_ids = tuple(
            vocabulary.lookup(token) for token in self.domain_tokens
        )

    def _target_prefix(self, features):
        """The domain token of one labelled example, nothing for a generic one."""
        domain = features["domain"]
        token = tf.gather(tf.constant(self.domain_tokens), tf.maximum(domain, 0))
        count = tf.cast(tf.greater_equal(domain, 0), tf.int32)
        return tf.reshape(token, [1])[:count]

    def call(self, features, labels=None, training=None, step=None):
        outputs, predictions = super().call(features, labels=labels, training=training, step=step)
        if predictions is not None and self.strip_domain_tokens:
            predictions = strip_tokens(predictions, self.domain_tokens)
        return outputs, predictions

    def format_score(self, score, params=None):
        # The score is that of the whole target; the sentence, token-level scores and
        # attention are those of its words (the domain token, if any, comes first).
        length = score["length"]
        if length > 0 and score["tokens"][0].decode("utf-8") in self.domain_tokens:
            score = dict(score)
            score["length"] = length - 1
            for name in ("tokens", "cross_entropy", "attention"):
                if name in score:
                    score[name] = score[name][1:]
        return super().format_score(score, params=params)


def ttm_transformer(num_layers=6, num_units=512, num_heads=8, ffn_inner_dim=2048, dropout=0.1):
    """Target Token Mixing (Britz et al., 2017) on a Transformer: each target starts
    with its domain token, predicted at inference for ``generic`` sentences and forced
    for labelled ones, and removed from the output."""
    return TTMTransformer(
        num_layers=num_layers,
        num_units=num_units,
        num_heads=num_heads,
        ffn_inner_dim=ffn_inner_dim,
        dropout=dropout,
    )


def _ttm_count(**sizes):
    # One target-vocabulary row per domain token.
    return (
        factorized_layers.parameter_count("vanilla", **sizes)
        + sizes["num_domains"] * sizes["d_model"]
    )


TTM_TRANSFORMER = family_table.Family(
    name="ttm_transformer",
    builder=ttm_transformer,
    title="TTM",
    paper=multitask.BRITZ_PAPER,
    summary="Target token mixing: each target starts with its domain token.",
    parameter_count=family_table.sizes_only(_ttm_count),
    benchmark={"ttm": {}},
)
