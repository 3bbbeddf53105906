"""The APIs existing clients speak, beside ``ldr-serve``'s own: LibreTranslate's and
OpenNMT-py's REST server's.

* LibreTranslate: ``POST /translate`` with ``q`` (a text or a list of texts), ``source`` (the
  source language code, or ``auto``), ``target``, ``format`` (``text``; ``html`` is
  refused), ``alternatives`` (alternative translations per text, by beam search) and
  ``api_key`` (accepted and ignored: put authentication in front of the server, see
  docs/serving.md), as JSON or as a form (``application/x-www-form-urlencoded``, what the
  ``libretranslatepy`` client sends). Each text is split into its sentences
  (:mod:`ldr_opennmt.serving.sentences`), which are translated as one batch and put back in
  their places, line breaks kept, as LibreTranslate does. The answer is ``translatedText``
  (a list when ``q`` is), with ``alternatives`` and ``detectedLanguage`` (``source: auto``)
  as LibreTranslate gives them, and ``domain`` and ``domain_choice``: the domain each text
  was translated with and how it was chosen. A request may name the domain in the extra
  field ``domain``; without it, or with ``"domain": "auto"`` (TartuNLP's convention), each
  text gets the server's default for unlabelled text: the domain its classifier picks for
  the text as a whole (``--classifier``), else ``generic``. ``GET /languages`` lists the
  export's language pair, and ``POST /detect`` answers the source language with confidence
  100 (the model translates from one language: there is nothing to detect).
* OpenNMT-py: ``POST /translator/translate`` with ``[{"src": "text", "id": 100}]`` answers
  ``[[{"src", "tgt", "n_best", "pred_score"}]]`` (``id`` is accepted: one model), and an
  item may name its ``domain``.
"""

import urllib.parse

from ldr_opennmt.serving import api_models, sentences
from ldr_opennmt.serving.backend_kinds import CTRANSLATE2, RequestError

AUTO = "auto"
TEXT = "text"
#: Names of the language codes an export may record (``GET /languages``).
LANGUAGE_NAMES = {
    "ar": "Arabic",
    "cs": "Czech",
    "de": "German",
    "en": "English",
    "es": "Spanish",
    "fr": "French",
    "it": "Italian",
    "ja": "Japanese",
    "nl": "Dutch",
    "pl": "Polish",
    "pt": "Portuguese",
    "ru": "Russian",
    "zh": "Chinese",
}
#: Most fields of a form body.
MAX_FORM_FIELDS = 1024


def form_body(text, max_texts):
    """The fields of an ``application/x-www-form-urlencoded`` body, as a JSON body would
    give them: ``q`` repeated is a list, ``alternatives`` of digits an integer.

    Raises:
      RequestError: 400 on a body that is not a form of UTF-8 text.
    """
    try:
        pairs = urllib.parse.parse_qsl(
            text,
            keep_blank_values=True,
            strict_parsing=False,
            errors="strict",
            max_num_fields=max(MAX_FORM_FIELDS, max_texts + 16),
        )
    except UnicodeDecodeError as e:
        raise RequestError(
            400,
            "body: not a form of UTF-8 text (a %%-escape gives byte 0x%02x)" % e.object[e.start],
        ) from None
    except ValueError as e:
        raise RequestError(400, "body: not a form (%s)" % e) from None
    body, texts = {}, []
    for name, value in pairs:
        if name == "q":
            texts.append(value)
        else:
            body[name] = value
    if texts:
        body["q"] = texts[0] if len(texts) == 1 else texts
    if isinstance(body.get("alternatives"), str) and body["alternatives"].isdigit():
        body["alternatives"] = int(body["alternatives"])
    return body


def _texts(q):
    """``(texts, names, single)`` of a request's ``q``."""
    if isinstance(q, str):
        return [q], ["q"], True
    return list(q), ["q[%d]" % i for i in range(len(q))], False


def _check_language(field, code, expected, auto):
    if expected is None or code == expected or (auto and code == AUTO):
        return
    raise RequestError(
        422,
        "%s: %s is not this server's %s language (%s; see GET /languages)"
        % (field, api_models.short(code), field, expected),
    )


def _split(texts, names, limit):
    """The sentences of LibreTranslate's texts.

    Returns:
      ``(layouts, sentences, names, groups)``: each text's :class:`~ldr_opennmt.serving.
      sentences.Layout`, and for every sentence its text, its field name (``q``, ``q[1]``;
      ``q, sentence 2`` in a text of several) and the index of its text.

    Raises:
      RequestError: 422 on a text without a sentence, or more than :obj:`limit` sentences.
    """
    layouts, all_sentences, all_names, groups = [], [], [], []
    for index, (text, name) in enumerate(zip(texts, names)):
        layout = sentences.split(text)
        if not layout.sentences:
            raise RequestError(422, "%s: empty text" % name)
        layouts.append(layout)
        count = len(layout.sentences)
        all_sentences += layout.sentences
        all_names += (
            [name] if count == 1 else ["%s, sentence %d" % (name, k + 1) for k in range(count)]
        )
        groups += [index] * count
    if len(all_sentences) > limit:
        raise RequestError(
            422,
            "q: %d sentences, more than this server's limit of %d per request (--max_sentences): "
            "send the text in parts" % (len(all_sentences), limit),
        )
    return layouts, all_sentences, all_names, groups


def prepare(server, body):
    """Checks a LibreTranslate body (decoded).

    Returns:
      ``(request, answer)``: the server's request, and ``answer(native)``, which turns the
      server's native answer into LibreTranslate's.

    Raises:
      RequestError: on the first mistake.
    """
    request = server.validate("LibreTranslateRequest", body)
    if request.format not in (None, TEXT):
        raise RequestError(
            422, "format: %s is not supported (this server translates text)" % request.format
        )
    _check_language("source", request.source, server.source_language, auto=True)
    _check_language("target", request.target, server.target_language, auto=False)
    texts, names, single = _texts(request.q)
    layouts, parts, part_names, groups = _split(texts, names, server.options.max_sentences)
    domain = request.domain
    if domain == AUTO and AUTO not in server.backend.labels:
        domain = None  # TartuNLP's "auto": the server's way with unlabelled text.
    alternatives = request.alternatives or 0
    num_hypotheses = alternatives + 1
    beam_size = None
    if alternatives and server.backend.kind == CTRANSLATE2:
        beam_size = num_hypotheses
    checked = server.prepare(
        parts,
        [domain] * len(parts),
        ["domain"] * len(parts),
        beam_size=beam_size,
        num_hypotheses=num_hypotheses if alternatives else None,
        names=part_names,
        groups=groups,
        glossary=request.glossary,
    )
    detected = None
    if request.source == AUTO:
        detected = (
            {"language": server.source_language, "confidence": 100.0}
            if server.source_language
            else {"language": AUTO, "confidence": 0.0}
        )

    def _answer(native):
        translations = native["translations"]
        answer = {"translatedText": [], "alternatives": [], "domain": [], "domain_choice": []}
        start = 0
        for layout in layouts:
            own = translations[start : start + len(layout.sentences)]
            start += len(layout.sentences)
            answer["translatedText"].append(layout.join([t["text"] for t in own]))
            answer["alternatives"].append(
                [
                    layout.join([t["hypotheses"][min(k, len(t["hypotheses"]) - 1)] for t in own])
                    for k in range(1, num_hypotheses)
                ]
            )
            # A text's sentences share its domain (given, the classifier's for the text, or
            # generic).
            answer["domain"].append(own[0]["domain"])
            answer["domain_choice"].append(own[0]["domain_choice"])
            # A text is as sure as its least sure sentence (a model exported with
            # --confidence: every sentence of a text has one, or none has).
            if all("terms" in t for t in own):  # A request with a glossary.
                answer.setdefault("terms", []).append([term for t in own for term in t["terms"]])
            if all("confidence" in t for t in own):
                answer.setdefault("confidence", []).append(min(t["confidence"] for t in own))
                answer.setdefault("low_confidence", []).append(
                    any(t["low_confidence"] for t in own)
                )
        if len(answer.get("terms", ())) != len(layouts):
            answer.pop("terms", None)
        if len(answer.get("confidence", ())) != len(layouts):
            answer.pop("confidence", None)
            answer.pop("low_confidence", None)
        if not alternatives:
            del answer["alternatives"]
        if detected is not None:
            answer["detectedLanguage"] = [detected] * len(layouts)
        if single:
            answer = {key: value[0] for key, value in answer.items()}
        if native.get("warnings"):
            answer["warnings"] = native["warnings"]
        return answer

    return checked, _answer


def languages(server):
    """``GET /languages``: the export's language pair (empty when it is not known)."""
    source, target = server.source_language, server.target_language
    if source is None or target is None:
        return []
    return [
        {"code": source, "name": LANGUAGE_NAMES.get(source, source), "targets": [target]},
        {"code": target, "name": LANGUAGE_NAMES.get(target, target), "targets": []},
    ]


def detect(server, body):
    """``POST /detect``: the source language, confidence 100, for each text (the export
    translates from one language: the answer is that language, whatever the text).

    Raises:
      RequestError: 422 on a wrong body, 501 when the server's source language is unknown.
    """
    request = server.validate("DetectRequest", body)
    if server.source_language is None:
        raise RequestError(
            501,
            "this server's source language is not known (the export records none: start it "
            "with --source_language)",
        )
    candidates = [{"language": server.source_language, "confidence": 100.0}]
    texts, _, single = _texts(request.q)
    return candidates if single else [candidates for _ in texts]


def onmt_py_prepare(server, body):
    """Checks an OpenNMT-py REST body (decoded): ``(request, answer)`` as :func:`prepare`."""
    if not isinstance(body, list):
        raise RequestError(
            422, 'body: expected a list of {"src": ...} objects, got %s' % api_models.short(body)
        )
    if not body:
        raise RequestError(422, "body: empty list")
    if len(body) > server.options.max_sentences:
        raise RequestError(
            422,
            "body: %d sentences, more than this server's limit of %d per request"
            % (len(body), server.options.max_sentences),
        )
    items = []
    for i, item in enumerate(body):
        try:
            items.append(server.validate("OpenNMTPyItem", item))
        except RequestError as e:
            raise RequestError(e.status, "[%d].%s" % (i, str(e))) from None
    checked = server.prepare(
        [item.src for item in items],
        [item.domain for item in items],
        ["[%d].domain" % i for i in range(len(items))],
        names=["[%d].src" % i for i in range(len(items))],
    )

    def _answer(native):
        return [
            [
                {
                    "src": item.src,
                    "tgt": t["text"],
                    "n_best": 1,
                    "pred_score": t["scores"][0] if t["scores"] else 0.0,
                    "domain": t["domain"],
                }
                for item, t in zip(items, native["translations"])
            ]
        ]

    return checked, _answer
