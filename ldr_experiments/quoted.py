"""Figures quoted from the papers, for printing beside this project's own, marked as quoted.

Nothing here was measured by this project: every number is copied from a table of one of
three papers (the files under ``shared/papers/``), on their data, their model sizes and their
BLEU implementations:

* Pham et al., 2019 (IWSLT), "Generic and Specialized Word Embeddings for Multi-Domain
  Machine Translation" (LDR): Table 2 (Transformer base, 6+6 layers, 512 units) and Table 3
  (attentional RNN, 1-layer bi-LSTM encoder, 1024 units), English to French and English to
  German on EMEA, EPPS and ECB (in-domain test sets of 1,000 sentences, detokenized BLEU; the
  second EMEA figure, on 300 sentences disjoint from training, is not kept). The
  generic-label mode of LDR ("Sparse (2)") is only in the longer EMNLP 2019 draft of the same
  work (``ldr-emnlp2019-draft.tex``, the tables labelled ``tab:1`` to ``tab:4``), whose other
  rows are the published ones, figure for figure.
* Deng et al., 2020, "Factorized Transformer": Table 2, a Transformer base on 105M English to
  French sentence pairs from OPUS (five target domains, oversampled, plus out-of-domain data),
  lowercased BLEU (mteval-13a).
* Jiang et al., 2020 (ACL), word-level adaptive layer-wise domain mixing: Table 2 (English to
  German, News and TED) and Table 4 (Chinese to English, four domains), a 6+6-layer fairseq
  Transformer (512 units, 4 heads, FFN 1024); each baseline is the better of that model and one
  with a sqrt(k) times wider embedding. Its Table 3 (English to French) is not quoted: the text
  extraction at hand lost its figures. It has no DC, TTM, adapter or fine-tuning rows (its
  single-domain "Direct Training" rows, trained from scratch, are not quoted).

The data, model sizes and training budgets differ from ours, and so do the absolute figures:
only the ordering of the systems within one paper's table is comparable with our ordering.

Rows are named as in this project's tables: the family titles (``"Mixed"``, ``"DC"``,
``"LDR"``, ``"Factorized PA"``...), label modes as ``"<system> (generic)"``, ``"(predicted)"``
and ``"(wrong)"`` (the plain name is the oracle label), the RNN systems of the LDR paper's
Table 3 as ``"Mixed (RNN)"``, ``"DC (RNN)"``, ``"LDR (RNN)"`` (and ``"LDR (RNN) (wrong)"``...).
``"FT"`` is fine-tuning on each domain, every domain scored by the model tuned on it.
"""

#: Per quoted setting (one table and one language pair): its source, data and metric.
PAPERS = {
    "ldr-transformer-en-fr": {
        "citation": "Pham et al., 2019 (IWSLT)",
        "table": "Table 2, Transformer, English-French",
        "data": "English-French; EMEA 1.09M, EPPS 2.01M, ECB 0.19M training pairs (OPUS,"
        " Europarl); random in-domain test sets of 1,000 sentences",
        "metric": "BLEU (detokenized)",
    },
    "ldr-transformer-en-de": {
        "citation": "Pham et al., 2019 (IWSLT)",
        "table": "Table 2, Transformer, English-German",
        "data": "English-German; EMEA 1.11M, EPPS 1.92M, ECB 0.11M training pairs (OPUS,"
        " Europarl); random in-domain test sets of 1,000 sentences",
        "metric": "BLEU (detokenized)",
    },
    "ldr-rnn-en-fr": {
        "citation": "Pham et al., 2019 (IWSLT)",
        "table": "Table 3, RNN, English-French",
        "data": "English-French; EMEA 1.09M, EPPS 2.01M, ECB 0.19M training pairs (OPUS,"
        " Europarl); random in-domain test sets of 1,000 sentences",
        "metric": "BLEU (detokenized)",
    },
    "ldr-rnn-en-de": {
        "citation": "Pham et al., 2019 (IWSLT)",
        "table": "Table 3, RNN, English-German",
        "data": "English-German; EMEA 1.11M, EPPS 1.92M, ECB 0.11M training pairs (OPUS,"
        " Europarl); random in-domain test sets of 1,000 sentences",
        "metric": "BLEU (detokenized)",
    },
    "factorized-en-fr": {
        "citation": "Deng et al., 2020 (Factorized Transformer)",
        "table": "Table 2",
        "data": "English-French, 105M OPUS pairs: 70M out-of-domain plus News, IWSLT, JRC, EMEA"
        " and Subtitles (low-resource ones oversampled x50-x100); 1K-sentence test sets each",
        "metric": "BLEU (lowercased, mteval-13a)",
    },
    "mixing-en-de": {
        "citation": "Jiang et al., 2020 (ACL)",
        "table": "Table 2, English-German",
        "data": "English-German; News (Europarl, 184K pairs) and TED (IWSLT, 160K pairs);"
        " test sets of 19K and 7K sentences",
        "metric": "BLEU (fairseq, beam 5)",
    },
    "mixing-zh-en": {
        "citation": "Jiang et al., 2020 (ACL)",
        "table": "Table 4, Chinese-English",
        "data": "Chinese-English; Laws, Speech, Thesis (UM-Corpus, 219K-300K pairs each) and"
        " News (LDC, 300K pairs); test sets of 456-650 sentences",
        "metric": "BLEU (fairseq, beam 5)",
    },
}


def _entry(paper, row, paper_row, domains, average, note):
    """One quoted row (see :data:`QUOTED`)."""
    return {
        "paper": paper,
        "row": row,
        "paper_row": paper_row,
        "domains": domains,
        "average": average,
        "note": note,
    }


def _ldr(emea, disjoint, epps, ecb):
    """The test sets of a row of the LDR paper, those its average covers: EMEA, EPPS and ECB.

    ``disjoint``, the paper's second EMEA figure (the 300 test sentences left once those also
    in the training data are removed), is not kept: no average of the paper counts it, and a
    mean of the domains would. It stays in the calls, as printed, for checking.
    """
    del disjoint
    return {"EMEA": emea, "EPPS": epps, "ECB": ecb}


_FT_LDR = (
    "FT_EMEA, FT_EPPS, FT_ECB: each domain's figure from the baseline fine-tuned on it alone"
    " (10k, 15k, 5k steps), three models; no combined average printed. Off-diagonal: %s"
)
_LDR_NOTE = (
    "LDR_oracle: Procedure 1 (domains sampled in proportion to |C_i|), regions [8, 8, 8, 488],"
    " source side, true labels. Not quoted: LDR^0.5 (sqrt(|C_i|) sampling), avg %s, the"
    " paper's best"
)
_PRED = "LDR_pred: labels from a bi-LSTM domain classifier (dev precision > 95%)"
_WRONG = "LDR_wrong: every test sentence given a wrong domain label"
_GENERIC = (
    "Sparse (2) in the EMNLP draft's table %s (generic region only, no label): no average"
    " printed; the draft's other rows equal the published ones"
)
_DC = "Domain control (Kobus et al.): 2 input cells encode the domain"
_MIXED_LDR = "All corpora concatenated, no domain label"

#: The quoted rows: ``paper`` (a :data:`PAPERS` key), ``row`` (our row name), ``paper_row``
#: (the paper's name for it), ``domains`` (test set -> score), ``average`` (the paper's own
#: average, ``None`` where it prints none: never computed here) and ``note``.
QUOTED = [
    # Pham et al., 2019, Table 2: Transformer, English-French.
    _entry(
        "ldr-transformer-en-fr",
        "Mixed",
        "Mixed",
        _ldr(67.69, 47.60, 37.50, 53.49),
        52.89,
        _MIXED_LDR + " (Transformer base)",
    ),
    _entry(
        "ldr-transformer-en-fr",
        "FT",
        "FT_EMEA / FT_EPPS / FT_ECB",
        _ldr(76.77, 49.43, 37.04, 56.52),
        None,
        _FT_LDR % "FT_EMEA scores 17.16 on EPPS and 11.99 on ECB",
    ),
    _entry(
        "ldr-transformer-en-fr",
        "DC",
        "DC",
        _ldr(67.87, 45.42, 37.31, 54.14),
        53.10,
        _DC,
    ),
    _entry(
        "ldr-transformer-en-fr",
        "LDR",
        "LDR_oracle",
        _ldr(74.26, 49.90, 37.67, 54.07),
        55.33,
        _LDR_NOTE % "56.07",
    ),
    _entry(
        "ldr-transformer-en-fr",
        "LDR (predicted)",
        "LDR_pred",
        _ldr(74.29, 49.84, 37.73, 54.01),
        55.34,
        _PRED,
    ),
    _entry(
        "ldr-transformer-en-fr",
        "LDR (wrong)",
        "LDR_wrong",
        _ldr(72.95, 49.78, 37.62, 53.35),
        54.64,
        _WRONG,
    ),
    _entry(
        "ldr-transformer-en-fr",
        "LDR (generic)",
        "Sparse (2)",
        _ldr(73.97, 49.54, 37.81, 53.67),
        None,
        _GENERIC % "tab:1",
    ),
    # Pham et al., 2019, Table 2: Transformer, English-German.
    _entry(
        "ldr-transformer-en-de",
        "Mixed",
        "Mixed",
        _ldr(64.57, 42.99, 26.47, 68.67),
        53.23,
        _MIXED_LDR + " (Transformer base)",
    ),
    _entry(
        "ldr-transformer-en-de",
        "FT",
        "FT_EMEA / FT_EPPS / FT_ECB",
        _ldr(68.35, 42.97, 26.29, 74.05),
        None,
        _FT_LDR % "FT_EMEA scores 17.02 on EPPS and 32.87 on ECB",
    ),
    _entry(
        "ldr-transformer-en-de",
        "DC",
        "DC",
        _ldr(63.48, 42.98, 26.27, 66.95),
        52.23,
        _DC,
    ),
    _entry(
        "ldr-transformer-en-de",
        "LDR",
        "LDR_oracle",
        _ldr(70.90, 46.12, 26.30, 68.90),
        55.36,
        _LDR_NOTE % "57.01",
    ),
    _entry(
        "ldr-transformer-en-de",
        "LDR (predicted)",
        "LDR_pred",
        _ldr(70.89, 46.12, 26.53, 68.63),
        55.35,
        _PRED,
    ),
    _entry(
        "ldr-transformer-en-de",
        "LDR (wrong)",
        "LDR_wrong",
        _ldr(69.51, 43.50, 26.31, 66.86),
        54.22,
        _WRONG,
    ),
    _entry(
        "ldr-transformer-en-de",
        "LDR (generic)",
        "Sparse (2)",
        _ldr(70.86, 45.60, 26.14, 68.59),
        None,
        _GENERIC % "tab:2",
    ),
    # Pham et al., 2019, Table 3: attentional RNN, English-French.
    _entry(
        "ldr-rnn-en-fr",
        "Mixed (RNN)",
        "Mixed",
        _ldr(65.42, 45.11, 34.70, 51.38),
        50.50,
        _MIXED_LDR + " (RNN: 1-layer bi-LSTM encoder, LSTM decoder, 1024 units)",
    ),
    _entry(
        "ldr-rnn-en-fr",
        "FT (RNN)",
        "FT_EMEA / FT_EPPS / FT_ECB",
        _ldr(72.06, 47.33, 34.61, 51.53),
        None,
        _FT_LDR % "FT_EMEA scores 18.62 on EPPS and 16.78 on ECB",
    ),
    _entry(
        "ldr-rnn-en-fr",
        "DC (RNN)",
        "DC",
        _ldr(68.26, 43.76, 35.13, 50.09),
        51.16,
        _DC,
    ),
    _entry(
        "ldr-rnn-en-fr",
        "LDR (RNN)",
        "LDR_oracle",
        _ldr(71.73, 46.30, 35.21, 50.91),
        52.62,
        _LDR_NOTE % "52.77",
    ),
    _entry(
        "ldr-rnn-en-fr",
        "LDR (RNN) (predicted)",
        "LDR_pred",
        _ldr(72.76, 46.35, 35.10, 50.38),
        52.75,
        _PRED + "; above LDR_oracle on EMEA here, as printed",
    ),
    _entry(
        "ldr-rnn-en-fr",
        "LDR (RNN) (wrong)",
        "LDR_wrong",
        _ldr(62.10, 43.29, 34.17, 48.79),
        48.35,
        _WRONG,
    ),
    _entry(
        "ldr-rnn-en-fr",
        "LDR (RNN) (generic)",
        "Sparse (2)",
        _ldr(70.59, 46.37, 35.22, 49.68),
        None,
        _GENERIC % "tab:3",
    ),
    # Pham et al., 2019, Table 3: attentional RNN, English-German.
    _entry(
        "ldr-rnn-en-de",
        "Mixed (RNN)",
        "Mixed",
        _ldr(57.37, 37.94, 23.10, 63.54),
        48.00,
        _MIXED_LDR + " (RNN: 1-layer bi-LSTM encoder, LSTM decoder, 1024 units)",
    ),
    _entry(
        "ldr-rnn-en-de",
        "FT (RNN)",
        "FT_EMEA / FT_EPPS / FT_ECB",
        _ldr(65.64, 44.71, 22.98, 71.07),
        None,
        _FT_LDR % "FT_EMEA scores 12.36 on EPPS and 15.93 on ECB",
    ),
    _entry(
        "ldr-rnn-en-de",
        "DC (RNN)",
        "DC",
        _ldr(62.53, 39.25, 23.74, 65.71),
        50.66,
        _DC + "; the one setting where DC beats LDR_oracle",
    ),
    _entry(
        "ldr-rnn-en-de",
        "LDR (RNN)",
        "LDR_oracle",
        _ldr(63.43, 40.04, 22.66, 64.40),
        50.16,
        _LDR_NOTE % "51.55",
    ),
    _entry(
        "ldr-rnn-en-de",
        "LDR (RNN) (predicted)",
        "LDR_pred",
        _ldr(63.17, 39.92, 22.51, 64.00),
        49.89,
        _PRED,
    ),
    _entry(
        "ldr-rnn-en-de",
        "LDR (RNN) (wrong)",
        "LDR_wrong",
        _ldr(56.84, 37.05, 22.06, 61.66),
        46.85,
        _WRONG,
    ),
    _entry(
        "ldr-rnn-en-de",
        "LDR (RNN) (generic)",
        "Sparse (2)",
        _ldr(63.27, 39.75, 22.62, 63.70),
        None,
        _GENERIC % "tab:4",
    ),
    # Deng et al., 2020, Table 2 (AVG-5: the mean of the five domains).
    _entry(
        "factorized-en-fr",
        "Mixed",
        "Transformer-base",
        {"NEWS": 35.33, "IWSLT": 41.49, "JRC": 64.20, "EMEA": 56.58, "SUB": 30.66},
        45.65,
        "Transformer base on all data, low-resource domains oversampled; 1x parameters",
    ),
    _entry(
        "factorized-en-fr",
        "FT",
        "Transformer-base+finetuning (FT)",
        {"NEWS": 35.46, "IWSLT": 41.63, "JRC": 69.00, "EMEA": 61.96, "SUB": 33.42},
        48.30,
        "Five models, each fine-tuned on one domain and scored on it (5x parameters); the"
        " paper's upper bound",
    ),
    _entry(
        "factorized-en-fr",
        "DC",
        "Domain Control (DC)",
        {"NEWS": 36.12, "IWSLT": 41.47, "JRC": 63.97, "EMEA": 56.15, "SUB": 30.97},
        45.73,
        "Kobus et al. domain tag, re-implemented in the Transformer; 1x parameters",
    ),
    _entry(
        "factorized-en-fr",
        "TTM",
        "Target Token Mixing (TTM)",
        {"NEWS": 35.97, "IWSLT": 41.81, "JRC": 64.05, "EMEA": 56.04, "SUB": 30.74},
        45.72,
        "Britz et al., re-implemented in the Transformer; 1x parameters",
    ),
    _entry(
        "factorized-en-fr",
        "ML",
        "Multitask Learning (ML)",
        {"NEWS": 34.87, "IWSLT": 41.72, "JRC": 64.04, "EMEA": 56.57, "SUB": 30.35},
        45.51,
        "Britz et al., re-implemented in the Transformer; 1x parameters; no AdvL row in this"
        " table",
    ),
    _entry(
        "factorized-en-fr",
        "Residual adapters",
        "Residual Adapters (RA)",
        {"NEWS": 35.33, "IWSLT": 41.49, "JRC": 65.90, "EMEA": 59.72, "SUB": 32.31},
        46.95,
        "Bapna et al. bottleneck adapters, inner dimension 2048 (2.3x parameters); NEWS and"
        " IWSLT equal the baseline's, as printed",
    ),
    _entry(
        "factorized-en-fr",
        "Factorized DF",
        "Deep Factorization (DF)",
        {"NEWS": 35.92, "IWSLT": 41.39, "JRC": 66.03, "EMEA": 59.25, "SUB": 32.89},
        46.99,
        "Blocks F1-F4, d_inner 280 (1x parameters). The five scores as printed average 47.10,"
        " not the printed AVG-5 46.99 (which the text's +1.34 repeats): one is likely a typo;"
        " by that mean DF would rank above SF",
    ),
    _entry(
        "factorized-en-fr",
        "Factorized SF",
        "Shallow Factorization (SF)",
        {"NEWS": 36.38, "IWSLT": 42.46, "JRC": 65.47, "EMEA": 58.63, "SUB": 32.34},
        47.05,
        "Blocks F2 and F6 (1.1x parameters)",
    ),
    _entry(
        "factorized-en-fr",
        "Factorized PA",
        "Parallel Attention (PA)",
        {"NEWS": 35.39, "IWSLT": 41.69, "JRC": 67.21, "EMEA": 61.70, "SUB": 33.14},
        47.78,
        "Block F5, every attention matrix per domain (1.8x parameters); the paper's best. The"
        " five scores as printed average 47.83, not the printed AVG-5 47.78 (text: +2.13)",
    ),
    # Jiang et al., 2020, Table 2: English-German (no average printed).
    _entry(
        "mixing-en-de",
        "Mixed",
        "News + TED",
        {"News": 26.06, "TED": 28.11},
        None,
        "Direct training on both domains pooled",
    ),
    _entry(
        "mixing-en-de",
        "ML",
        "MTL",
        {"News": 26.90, "TED": 29.27},
        None,
        "Britz et al. multitask (sentence-level domain classifier on the encoder)",
    ),
    _entry(
        "mixing-en-de",
        "AdvL",
        "AdvL",
        {"News": 25.68, "TED": 27.46},
        None,
        "Britz et al. adversarial (classifier behind a gradient reversal)",
    ),
    _entry(
        "mixing-en-de",
        "Domain mixing (E)",
        "Encoder",
        {"News": 27.78, "TED": 30.30},
        None,
        "Domain mixing in the encoder only, without the weighted loss (WL)",
    ),
    _entry(
        "mixing-en-de",
        "Domain mixing",
        "E/DC",
        {"News": 27.58, "TED": 30.33},
        None,
        "Domain mixing in encoder and decoder, without WL; k times the parameters",
    ),
    # Jiang et al., 2020, Table 4: Chinese-English (no average printed).
    _entry(
        "mixing-zh-en",
        "Mixed",
        "Mixed",
        {"Laws": 48.87, "News": 26.92, "Speech": 16.38, "Thesis": 12.09},
        None,
        "All domains pooled; layer normalization first in every layer (Table 8: the"
        " baselines fail to train with it last)",
    ),
    _entry(
        "mixing-zh-en",
        "ML",
        "MTL",
        {"Laws": 49.14, "News": 27.15, "Speech": 16.34, "Thesis": 11.80},
        None,
        "Britz et al. multitask (sentence-level domain classifier on the encoder)",
    ),
    _entry(
        "mixing-zh-en",
        "AdvL",
        "AdvL",
        {"Laws": 48.93, "News": 26.51, "Speech": 16.18, "Thesis": 12.08},
        None,
        "Britz et al. adversarial (classifier behind a gradient reversal)",
    ),
    _entry(
        "mixing-zh-en",
        "Domain mixing (E)",
        "Encoder",
        {"Laws": 50.21, "News": 27.94, "Speech": 16.85, "Thesis": 12.03},
        None,
        "Domain mixing in the encoder only, without the weighted loss (WL)",
    ),
    _entry(
        "mixing-zh-en",
        "Domain mixing",
        "E/DC",
        {"Laws": 50.64, "News": 28.48, "Speech": 17.41, "Thesis": 11.71},
        None,
        "Domain mixing in encoder and decoder, without WL; k times the parameters",
    ),
]


def score(entry):
    """The figure :func:`ordering` ranks an entry by.

    Args:
      entry: A :data:`QUOTED` entry.

    Returns:
      Its paper's printed average if every row of that paper setting has one; else, for every
      row of that setting alike, the mean of its scores on the domains that every row of the
      setting reports (for the LDR paper, EMEA, EPPS and ECB: what its Avg. column averages).
    """
    paper = entry["paper"]
    entries = [e for e in QUOTED if e["paper"] == paper]
    if all(e["average"] is not None for e in entries):
        return entry["average"]
    names = [name for name in entry["domains"] if all(name in e["domains"] for e in entries)]
    return sum(entry["domains"][name] for name in names) / len(names)


def ordering(paper):
    """The systems of one paper setting, best first.

    Ranked by :func:`score`: the paper's printed average where every row of that setting has
    one (Deng et al.'s AVG-5); else, for every row alike, the mean of the domains every row of
    the setting reports (the LDR paper, whose FT and generic rows have no printed average:
    EMEA, EPPS and ECB, as its Avg. column; Jiang et al., who print no average: all domains).
    Equal scores keep the order of :data:`QUOTED`.

    Args:
      paper: A :data:`PAPERS` key.

    Returns:
      Our row names, best first.

    Raises:
      KeyError: ``paper`` is not a key of :data:`PAPERS`.
    """
    if paper not in PAPERS:
        raise KeyError("no quoted paper %r (known: %s)" % (paper, ", ".join(PAPERS)))
    entries = [entry for entry in QUOTED if entry["paper"] == paper]
    return [entry["row"] for entry in sorted(entries, key=score, reverse=True)]
