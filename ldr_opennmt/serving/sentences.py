"""The sentences of a LibreTranslate text, and the text made of their translations.

LibreTranslate (Argos Translate) translates a text line by line, each line sentence by
sentence, and joins the translations. The models here are trained on sentences: a text of
three sentences sent as one input comes back as one invented sentence. So ``ldr-serve``
splits each text of ``q`` into sentences (:func:`split`), translates them as one batch, and
puts each translation in the place of its sentence (:meth:`Layout.join`): line breaks, blank
lines, indentation and the spaces between sentences are kept as they were.

No sentence splitter fits both environments without downloading data at run time: neither
lock (``requirements.lock``, ``requirements-serve.lock``) has one, pyonmttok and sacremoses
have none, NLTK's punkt and Stanza download their models, and pysbd, the rule-based one on
PyPI, has had no release since 2021. The rule is therefore the small one of Moses's
``split-sentences.perl``, the same in both environments:

* a sentence ends after ``.``, ``!``, ``?``, ``…`` (several of them: ``?!``, ``...``) and the
  closing quotes and brackets after them, when whitespace follows and the next word starts
  (after opening quotes or brackets, ``¿``, ``¡``) with an upper-case letter, a digit or a
  letter of a script without case (Arabic, Hebrew, Devanagari, CJK...): ``It works. Then``
  is split, ``e.g. this`` is not;
* a single ``.`` does not end a sentence after an abbreviation: one letter (``J. Smith``), a
  word with a dot inside (``U.S.``, ``z.B.``), a number that starts the line (``1.
  Introduction``), or a word of :data:`ABBREVIATIONS` (``Dr.``, ``Mr.``, ``Fig.``, ``M.``,
  ``Mme``...);
* ``。``, ``！``, ``？`` (full-width: Chinese, Japanese) end a sentence whatever follows;
* a line break always ends a sentence.

Two sentences with no space between them (Chinese, Japanese) get their translations joined
with one space, unless the first translation ends with a full-width stop. A sentence the rule
does not split is translated as one: the rule errs towards longer sentences.
"""

import re

#: Words after which a single ``.`` is not the end of a sentence (the common titles and
#: abbreviations of English, French, German and Spanish; Moses's nonbreaking prefixes).
ABBREVIATIONS = frozenset("""
    Mr Mrs Ms Messrs Dr Drs Prof Sr Sra Srta Jr St Mt Ste Gen Gov Sen Rep Capt Col Lt Sgt
    Cmdr Adm Maj Rev Hon Pres Supt Insp Atty Esq M MM Mme Mmes Mlle Mlles Me Pr Hr Hrn Fr
    Frl Dra Ud Uds No Nos Nr Nº Fig Figs Vol Vols Ch Chap Sec Art Abs Ref Refs Eq Eqs Tab
    Ed Eds Op pp p cf vs al ca approx resp bzw vgl usw etc Inc Ltd Co Corp Bros Dept Univ
    Jan Feb Aug Sep Sept Oct Nov Dec
    """.split())
#: What ends a sentence, when followed by a space and a sentence start.
_TERMINALS = ".!?…"
#: What ends a sentence whatever follows (full-width stops).
_FULL_WIDTH = "。！？"
_CLOSERS = "\"')]}»”’›」』）"
_OPENERS = "\"'([{«“‘‹「『（¿¡"
_END = re.compile(r"([%s]+|[%s]+)[%s]*" % (re.escape(_TERMINALS), _FULL_WIDTH, re.escape(_CLOSERS)))
_LINE_BREAK = re.compile(r"\r\n|\n|\r")


def _starts_sentence(text):
    """Whether :obj:`text` (what follows the whitespace after a stop) starts a sentence."""
    stripped = text.lstrip(_OPENERS)
    if not stripped:
        return False
    first = stripped[0]
    return first.isdigit() or (first.isalpha() and not first.islower())


def _abbreviation(line, stop_start):
    """Whether the word before the single ``.`` at :obj:`stop_start` is an abbreviation."""
    word = re.split(r"\s", line[:stop_start])[-1].lstrip(_OPENERS)
    if not word:
        return False
    if len(word) == 1 and word.isalpha():
        return True  # An initial: J. Smith.
    if "." in word and any(c.isalpha() for c in word):
        return True  # U.S., e.g., z.B.
    if word.isdigit() and not line[:stop_start].strip()[: -len(word)].strip():
        return True  # A numbered item at the start of a line: 1. Introduction.
    return word in ABBREVIATIONS


def _line_spans(line):
    """``(start, end)`` of each sentence of a line (no line break in it)."""
    spans, start = [], 0
    for match in _END.finditer(line):
        end = match.end()
        stops = match.group(1)
        if stops[0] not in _FULL_WIDTH:
            rest = line[end:]
            after = rest.lstrip()
            if after == rest or not _starts_sentence(after):
                continue  # No space after it, or the next word does not start a sentence.
            if stops == "." and _abbreviation(line, match.start(1)):
                continue
        if line[start:end].strip():
            spans.append((start, end))
        start = end
    if line[start:].strip():
        spans.append((start, len(line)))
    # Each span without the whitespace around it (kept in the layout).
    trimmed = []
    for begin, end in spans:
        text = line[begin:end]
        begin += len(text) - len(text.lstrip())
        end -= len(text) - len(text.rstrip())
        trimmed.append((begin, end))
    return trimmed


class Layout:
    """A text cut into its sentences and what lies between them.

    Attributes:
      sentences: The sentences, in order (no leading or trailing whitespace).
    """

    def __init__(self, pieces):
        #: ``(is_sentence, text)`` pieces that make the text.
        self.pieces = pieces
        self.sentences = [text for is_sentence, text in pieces if is_sentence]

    def join(self, translations):
        """The text with each sentence replaced by its translation (one per sentence)."""
        if len(translations) != len(self.sentences):
            raise ValueError(
                "%d translations for %d sentences" % (len(translations), len(self.sentences))
            )
        out, index, previous = [], 0, None
        for is_sentence, text in self.pieces:
            if not is_sentence:
                out.append(text)
                previous = None
                continue
            translation = translations[index]
            index += 1
            if previous is not None and previous and previous[-1] not in _FULL_WIDTH:
                out.append(" ")  # Adjacent sentences (no space between them in the source).
            out.append(translation)
            previous = translation
        return "".join(out)


def split(text):
    """The :class:`Layout` of :obj:`text`: its sentences, by the rule of the module
    docstring, and the whitespace and line breaks between them."""
    pieces = []
    position = 0
    lines = []
    for match in _LINE_BREAK.finditer(text):
        lines.append((position, match.start(), match.group()))
        position = match.end()
    lines.append((position, len(text), ""))
    for start, end, line_break in lines:
        line = text[start:end]
        cursor = 0
        for begin, finish in _line_spans(line):
            if begin > cursor:
                pieces.append((False, line[cursor:begin]))
            pieces.append((True, line[begin:finish]))
            cursor = finish
        if cursor < len(line):
            pieces.append((False, line[cursor:]))
        if line_break:
            pieces.append((False, line_break))
    # Adjacent whitespace pieces merged: the layout between two sentences is one piece.
    merged = []
    for piece in pieces:
        if merged and not piece[0] and not merged[-1][0]:
            merged[-1] = (False, merged[-1][1] + piece[1])
        else:
            merged.append(piece)
    return Layout(merged)
