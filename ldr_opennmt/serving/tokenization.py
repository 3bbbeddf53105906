"""The tokenizers of an export, applied to raw text, without TensorFlow.

An export carries the pyonmttok options and files of the corpus's tokenizers in
``assets.extra/`` (:mod:`ldr_opennmt.assets`); without them (a model trained on tokenized
text and exported from a corpus that has none), text is split on spaces and tokens are
joined with spaces, as ``onmt-main infer`` does.
"""

import os

from ldr_opennmt import assets as assets_lib
from ldr_opennmt.errors import UserError


def tokenize(tokenizer, line):
    """The tokens of :obj:`line` (``None``: split on whitespace)."""
    if tokenizer is None:
        return line.split()
    tokens, _ = tokenizer.tokenize(line, training=False)
    return tokens


def detokenize(tokenizer, tokens):
    """The text of :obj:`tokens` (``None``: joined by spaces)."""
    if tokenizer is None:
        return " ".join(tokens)
    return tokenizer.detokenize(tokens)


def missing_source_tokenizer(export_dir, what="the export"):
    """The error of raw text sent to an export without a source tokenizer."""
    return UserError(
        "%s: missing tokenizer asset: %s has no source tokenizer (export a model whose "
        "configuration has source_tokenization, or from a corpus built by ldr-data, or pass "
        "--tokenized with tokenized input)"
        % (
            os.path.join(assets_lib.assets_dir(export_dir), assets_lib.TOKENIZER_CONFIGS["source"]),
            what,
        )
    )


def load_tokenizers(export_dir, tokenized):
    """``(source, target)`` tokenizers of an export, or ``None`` where tokens are split or
    joined by spaces.

    Args:
      export_dir: The export (or one model directory of a CTranslate2 export).
      tokenized: Whether the text is already tokenized (no tokenizer is loaded).

    Raises:
      UserError: if the text is raw and the export has no source tokenizer, or an asset is
        missing or invalid.
    """
    if tokenized:
        return None, None
    source = assets_lib.load_tokenizer(export_dir, "source")
    if source is None:
        raise missing_source_tokenizer(export_dir)
    # Without target_tokenization, onmt-main infer also joins the tokens with spaces.
    return source, assets_lib.load_tokenizer(export_dir, "target")
