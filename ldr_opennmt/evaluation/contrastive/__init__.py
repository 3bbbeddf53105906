"""A contrastive test of domain-dependent lexical choice, built from the corpus itself.

BLEU cannot show what a domain label is for. This test asks a system to choose between the
reference translation of a test sentence and *variants* of it in which the translation of one
English word is replaced by its translation in another domain (``save``: ``enregistrer`` in
software, ``sauver`` in the Bible). A system is right on an item when it gives the reference a
higher log-probability (forced decoding of the whole target, OpenNMT-tf's ``score``) than
every variant.

A module per step, each documenting its criteria:

* :mod:`~ldr_opennmt.evaluation.contrastive.lexicon`: the words whose dominant translation depends
  on the domain, from the raw training data
  (:func:`~ldr_opennmt.evaluation.contrastive.lexicon.find_translations`);
* :mod:`~ldr_opennmt.evaluation.contrastive.items`: test sentences with such a word and their
  variants (:func:`~ldr_opennmt.evaluation.contrastive.items.build_items`);
* :mod:`~ldr_opennmt.evaluation.contrastive.scoring`: each system's scores of the items per label
  mode, summarized per domain (:func:`~ldr_opennmt.evaluation.contrastive.scoring.evaluate`);
* :mod:`~ldr_opennmt.evaluation.contrastive.report`: the results file, tables and chart
  (:func:`~ldr_opennmt.evaluation.contrastive.report.write_report`).

The names used outside the subpackage (``ldr-eval contrastive``, the experiments) are
re-exported here.
"""

from ldr_opennmt.evaluation.contrastive.items import (
    ITEM_SPLITS,
    ITEMS_FILE,
    build_items,
    items_summary,
    make_items,
    no_items_reason,
    read_items,
)
from ldr_opennmt.evaluation.contrastive.lexicon import (
    DEFAULT_SEED_WORDS,
    EN_STOPWORDS,
    FR_STOPWORDS,
    Entry,
    Sense,
    english_key,
    find_translations,
    french_key,
    read_seed_words,
    related,
    words,
)
from ldr_opennmt.evaluation.contrastive.report import (
    CHART_FILE,
    RESULTS_FILE,
    TABLE_FILE,
    chart,
    format_tables,
    write_report,
)
from ldr_opennmt.evaluation.contrastive.scoring import (
    MODES,
    check_outputs,
    evaluate,
    label_shift,
    summarize,
)
