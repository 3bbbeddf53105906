"""The request and response bodies of ``ldr-serve``, as pydantic models, and the checks of
raw request text.

The models are the validation: a body is parsed from JSON, checked for text that is not
valid Unicode (:func:`check_text`), then validated by its model, whose errors become one
line naming the field (:func:`validation_message`). The OpenAPI schema is generated from
the same models (:func:`openapi_schemas`), so what the schema allows is what is accepted:

* unknown fields are refused (``extra = "forbid"``: ``additionalProperties: false`` in the
  schema), so that a typo such as ``"beam": 4`` is not silently ignored;
* ``null`` is accepted where, and only where, the schema says so (``anyOf`` with
  ``{"type": "null"}``: the schema is OpenAPI 3.1, JSON Schema's own nulls);
* strings and integers are strict (``"2"`` is not an integer, ``3`` not a string);
* list sizes are bounded by the server's options (``--max_sentences``): the models are
  built per server by :func:`request_models`.

Pydantic 1 (the training environment's FastAPI 0.103) and pydantic 2 (a current FastAPI)
both work: the few places where they differ are marked.
"""

import json
from typing import Dict, List, Optional, Union

import pydantic
from pydantic import Field, StrictInt, StrictStr

PYDANTIC_V1 = pydantic.VERSION.startswith("1.")

#: The byte-order mark some editors put at the start of a UTF-8 text.
BOM = "\ufeff"


def escape(text):
    """:obj:`text` with lone surrogates written as ``\\udXXX`` (always encodable)."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def short(value, limit=40):
    """A JSON excerpt of :obj:`value` for an error message (encodable, one line)."""
    text = escape(json.dumps(value, ensure_ascii=False))
    return text if len(text) <= limit else text[: limit - 3] + "..."


def field_name(loc):
    """``sentences[2]`` from a location such as ``("sentences", 2)``."""
    name = ""
    for part in loc:
        if isinstance(part, int):
            name += "[%d]" % part
        else:
            name += ("." if name else "") + escape(str(part))
    return name or "body"


def _check_string(value, name):
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ValueError(
            "%s: not valid Unicode (lone surrogate %s at character %d)"
            % (name, escape(value[e.start]), e.start)
        ) from None


def check_text(value, loc=()):
    """Raises ``ValueError("FIELD: ...")`` on the first string (value or key) of a decoded
    JSON value that holds a lone surrogate (``"\\ud800"`` escaped in JSON decodes to one;
    no UTF-8 text can hold it, and no model can read it)."""
    if isinstance(value, str):
        _check_string(value, field_name(loc))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            check_text(item, loc + (i,))
    elif isinstance(value, dict):
        for key, item in value.items():
            _check_string(key, "the field name %s in %s" % (short(key), field_name(loc)))
            check_text(item, loc + (key,))


def strip_bom(sentences, names):
    """Removes a byte-order mark at the start of each sentence (an editor's, not text).

    Args:
      sentences: The sentences.
      names: The request field of each (for the notes).

    Returns:
      ``(sentences, warnings)``: the sentences and one note per sentence changed.
    """
    warnings = []
    cleaned = []
    for name, sentence in zip(names, sentences):
        if sentence.startswith(BOM):
            sentence = sentence.lstrip(BOM)
            warnings.append("%s: a byte-order mark (U+FEFF) at its start was removed" % name)
        cleaned.append(sentence)
    return cleaned, warnings


class _Strict(pydantic.BaseModel):
    """Refuses unknown fields, and documents ``null`` where it is accepted."""

    class Config:
        extra = "forbid"

        if PYDANTIC_V1:  # Pydantic 2 writes Optional as anyOf [..., null] itself.

            @staticmethod
            def schema_extra(schema, model):
                for field in model.__fields__.values():
                    prop = schema.get("properties", {}).get(field.alias)
                    if prop is None:
                        continue
                    if field.sub_fields and field.sub_fields[0].allow_none and "items" in prop:
                        prop["items"] = {"anyOf": [prop["items"], {"type": "null"}]}
                    if field.allow_none:
                        inner = {k: v for k, v in prop.items() if k not in ("title", "description")}
                        kept = {k: v for k, v in prop.items() if k in ("title", "description")}
                        prop.clear()
                        prop.update(kept, anyOf=[inner, {"type": "null"}])


def _list(default, description, min_items=None, max_items=None):
    """A list field with size bounds (pydantic 1 names them min_items/max_items, pydantic
    2 min_length/max_length)."""
    bounds = {}
    if min_items is not None:
        bounds["min_items" if PYDANTIC_V1 else "min_length"] = min_items
    if max_items is not None:
        bounds["max_items" if PYDANTIC_V1 else "max_length"] = max_items
    return Field(default, description=description, **bounds)


def _conlist(max_items):
    """A list of 1 to :obj:`max_items` strings, as a type."""
    if PYDANTIC_V1:
        return pydantic.conlist(StrictStr, min_items=1, max_items=max_items)
    return pydantic.conlist(StrictStr, min_length=1, max_length=max_items)


#: The ``glossary`` field of the translation requests.
GLOSSARY_HELP = (
    "Terms to apply: {source term: target term} (at most 1000; whole words, any case). For a"
    " model trained on a corpus of ldr-data terms; refused otherwise."
)


def request_models(max_sentences, max_beam_size):
    """The request models of a server with these limits.

    Returns:
      ``{name: model}``: ``TranslateRequest`` (the native ``POST /translate``),
      ``LibreTranslateRequest``, ``DetectRequest`` and ``OpenNMTPyItem``.
    """

    texts = _conlist(max_sentences)

    class TranslateRequest(_Strict):
        """The native body of ``POST /translate``."""

        sentences: List[StrictStr] = _list(
            ..., "Raw source sentences (one to --max_sentences).", 1, max_sentences
        )
        domain: Optional[StrictStr] = Field(
            None,
            description="The domain of every sentence (a domain of GET /domains; on a "
            "SavedModel that has them, an ensemble label too). null: none.",
        )
        domains: Optional[List[Optional[StrictStr]]] = _list(
            None, "One domain per sentence (null: none).", 1, max_sentences
        )
        unlabelled: Optional[StrictStr] = Field(
            None,
            description="For the sentences without a domain: generic, classifier "
            "(--classifier), or an ensemble of domain views (SavedModel): ens-uniform, "
            "ens-learned, ens-soft. Default: classifier with --classifier, else generic.",
        )
        beam_size: Optional[pydantic.conint(strict=True, ge=1, le=max_beam_size)] = Field(
            None,
            description="Beam size (CTranslate2; default 1: greedy). A SavedModel has its own.",
        )
        num_hypotheses: Optional[pydantic.conint(strict=True, ge=1, le=max_beam_size)] = Field(
            None, description="Translations per sentence (default 1)."
        )
        glossary: Optional[Dict[StrictStr, StrictStr]] = Field(None, description=GLOSSARY_HELP)

    class LibreTranslateRequest(_Strict):
        """LibreTranslate's body of ``POST /translate`` (JSON or a form)."""

        q: Union[StrictStr, texts] = Field(
            ..., description="A text, or a list of texts (then translatedText is a list)."
        )
        source: StrictStr = Field(..., description="The source language code, or auto.")
        target: StrictStr = Field(..., description="The target language code.")
        format: Optional[StrictStr] = Field(None, description="text (html is refused).")
        alternatives: Optional[pydantic.conint(strict=True, ge=0, le=max_beam_size - 1)] = Field(
            None, description="Alternative translations per text."
        )
        api_key: Optional[StrictStr] = Field(None, description="Accepted and ignored.")
        domain: Optional[StrictStr] = Field(
            None,
            description="ldr-serve's extension: the domain of every text; absent, null or "
            "auto: the domain the classifier picks for each text (--classifier), else generic.",
        )
        glossary: Optional[Dict[StrictStr, StrictStr]] = Field(
            None, description="ldr-serve's extension: " + GLOSSARY_HELP
        )

    class DetectRequest(_Strict):
        """The body of ``POST /detect`` and ``POST /detect_domain``."""

        q: Union[StrictStr, texts] = Field(..., description="A text or a list of texts.")
        api_key: Optional[StrictStr] = Field(None, description="Accepted and ignored.")

    class OpenNMTPyItem(_Strict):
        """One sentence of OpenNMT-py's REST ``POST /translator/translate``."""

        src: StrictStr = Field(..., description="A raw source sentence.")
        id: Optional[StrictInt] = Field(None, description="The model id (any: one model).")
        domain: Optional[StrictStr] = Field(None, description="ldr-serve's extension.")

    return {
        "TranslateRequest": TranslateRequest,
        "LibreTranslateRequest": LibreTranslateRequest,
        "DetectRequest": DetectRequest,
        "OpenNMTPyItem": OpenNMTPyItem,
    }


class Translation(pydantic.BaseModel):
    text: str
    domain: str = Field(
        ..., description="The domain (or ensemble label) the sentence was translated with."
    )
    domain_choice: str = Field(
        ...,
        description="'given', 'generic: no label', 'classifier', 'guard' (the export's "
        "wrong-domain guard), 'guard: DOMAIN P below T, generic' (unsure: generic), 'ensemble', "
        "or 'ignored: WHY' (the model reads no label).",
    )
    domain_probability: Optional[float] = Field(
        None,
        description="The classifier's or the guard's probability of the domain it picked "
        "(only when one of them chose).",
    )
    hypotheses: List[str]
    scores: List[float]
    terms: Optional[List[List[str]]] = Field(
        None,
        description="The glossary's terms found in the sentence and annotated: [source as "
        "found, target] (a request with a glossary).",
    )
    confidence: Optional[float] = Field(
        None,
        description="The probability, calibrated on the domain's dev set, that this "
        "translation is at least as good (chrF) as the dev median (only for a model exported "
        "with --confidence).",
    )
    low_confidence: Optional[bool] = Field(
        None, description="Whether the confidence is below the threshold chosen on dev."
    )


class TranslateResponse(pydantic.BaseModel):
    translations: List[Translation]
    warnings: Optional[List[str]] = Field(
        None, description="Notes on the input (e.g. a byte-order mark removed)."
    )


class DetectedLanguage(pydantic.BaseModel):
    language: str
    confidence: float


class LibreTranslateResponse(pydantic.BaseModel):
    translatedText: Union[str, List[str]]
    alternatives: Optional[Union[List[str], List[List[str]]]] = None
    detectedLanguage: Optional[Union[DetectedLanguage, List[DetectedLanguage]]] = None
    domain: Optional[Union[str, List[str]]] = Field(
        None, description="The domain each text was translated with."
    )
    domain_choice: Optional[Union[str, List[str]]] = Field(
        None,
        description="How it was chosen: 'given', 'classifier', 'guard', 'guard: DOMAIN P "
        "below T, generic', 'generic: no label' (no classifier), or 'ignored: WHY' (the model "
        "reads no label).",
    )
    confidence: Optional[Union[float, List[float]]] = Field(
        None,
        description="Each text's confidence: that of its least confident sentence (a model "
        "exported with --confidence).",
    )
    low_confidence: Optional[Union[bool, List[bool]]] = Field(
        None, description="Whether a sentence of the text is below its confidence threshold."
    )
    terms: Optional[Union[List[List[str]], List[List[List[str]]]]] = Field(
        None,
        description="Each text's glossary terms found and annotated: [source as found, target]"
        " (a request with a glossary).",
    )
    warnings: Optional[List[str]] = None


class Language(pydantic.BaseModel):
    code: str
    name: str
    targets: List[str]


class DomainDetection(pydantic.BaseModel):
    domain: str = Field(..., description="The domain the classifier picks.")
    probability: float = Field(..., description="Its probability.")
    probabilities: Dict[str, float] = Field(..., description="Every domain's probability.")


class OpenNMTPyResult(pydantic.BaseModel):
    src: str
    tgt: str
    n_best: int
    pred_score: float
    domain: Optional[str] = None


class Error(pydantic.BaseModel):
    error: str = Field(..., description="One line naming the field or the cause.")


RESPONSE_MODELS = (
    TranslateResponse,
    LibreTranslateResponse,
    Language,
    DomainDetection,
    OpenNMTPyResult,
    Error,
)


def _fields(model):
    return model.__fields__ if PYDANTIC_V1 else model.model_fields


def openapi_schemas(models):
    """``{name: JSON schema}`` of :obj:`models` and the models they use, with references
    into ``#/components/schemas/``."""
    if PYDANTIC_V1:
        from pydantic import schema as schema_lib  # pylint: disable=import-outside-toplevel

        return schema_lib.schema(models, ref_prefix="#/components/schemas/")["definitions"]
    from pydantic import json_schema  # pylint: disable=import-outside-toplevel

    _, top = json_schema.models_json_schema(
        [(m, "validation") for m in models], ref_template="#/components/schemas/{model}"
    )
    return top.get("$defs", {})


def validate(model, body):
    """``model`` validated from the decoded JSON :obj:`body`.

    Raises:
      ValueError: one line naming the first wrong field.
    """
    try:
        return model.parse_obj(body) if PYDANTIC_V1 else model.model_validate(body)
    except pydantic.ValidationError as e:
        raise ValueError(validation_message(e.errors(), body, model)) from None


def _value_at(body, loc):
    value = body
    for part in loc:
        try:
            value = value[part]
        except (KeyError, IndexError, TypeError):
            return None
    return value


_TYPE_MISMATCH = ("type_error.str", "type_error.list", "string_type", "list_type")


def validation_message(errors, body=None, model=None):
    """One line for the first of pydantic's (or FastAPI's) validation errors.

    Args:
      errors: ``ValidationError.errors()``.
      body: The validated value (to quote what was wrong).
      model: The model (to list its fields after an unknown one).
    """
    if not errors:
        return "body: invalid"
    # A union (q: a string or a list) gives one error per member: the most telling one (a
    # list's size, an item) rather than "not a string"; the field once.
    error = errors[0]
    same_field = [e for e in errors if e.get("loc", ())[:1] == error.get("loc", ())[:1]]
    telling = [
        e
        for e in same_field
        if e.get("type") not in _TYPE_MISMATCH or len(e.get("loc", ())) > len(error.get("loc", ()))
    ]
    if len(same_field) > 1 and telling:
        error, errors = telling[0], [telling[0]]
    loc = tuple(p for p in error.get("loc", ()) if p != "body")
    if not PYDANTIC_V1:
        # Pydantic 2 names the member of a union it tried (q -> "list[str]" -> 1): not a field.
        loc = loc[:1] + tuple(p for p in loc[1:] if p not in ("str", "list[str]"))
    name = field_name(loc)
    kind = error.get("type", "")
    got = short(_value_at(body, loc)) if body is not None else None
    ctx = error.get("ctx") or {}
    if kind in ("value_error.missing", "missing"):
        return "%s: missing" % name
    if kind in ("value_error.extra", "extra_forbidden"):
        expected = ", ".join(_fields(model)) if model is not None else None
        return "%s: unknown field%s" % (name, " (expected: %s)" % expected if expected else "")
    if kind in ("type_error.none.not_allowed",) or (got == "null" and "type" in kind):
        return "%s: null is not allowed here" % name
    if kind in ("type_error.dict", "dict_type", "model_type", "model_attributes_type"):
        return "%s: expected a JSON object, got %s" % (name, got)
    if kind in ("type_error.list", "list_type"):
        return "%s: expected a list, got %s" % (name, got)
    if kind in ("type_error.str", "string_type"):
        if (
            any(
                e.get("loc") == error.get("loc") or e.get("loc")[:-1] == error.get("loc")[:-1]
                for e in errors[1:]
            )
            and name == "q"
        ):
            return "q: expected a string or a list of strings, got %s" % got
        return "%s: expected a string, got %s" % (name, got)
    if kind in ("type_error.integer", "int_type"):
        return "%s: expected an integer, got %s" % (name, got)
    if kind in ("value_error.list.min_items", "too_short"):
        return "%s: empty list" % name
    if kind in ("value_error.list.max_items", "too_long"):
        limit = ctx.get("limit_value", ctx.get("max_length"))
        count = len(_value_at(body, loc) or ()) if body is not None else "too many"
        return "%s: %s items, more than this server's limit of %s" % (name, count, limit)
    if kind in ("value_error.number.not_ge", "greater_than_equal"):
        return "%s: must be >= %s, got %s" % (name, ctx.get("limit_value", ctx.get("ge")), got)
    if kind in ("value_error.number.not_le", "less_than_equal"):
        return "%s: must be <= %s, got %s" % (name, ctx.get("limit_value", ctx.get("le")), got)
    message = " ".join(escape(str(error.get("msg", "invalid"))).split())
    return "%s: %s" % (name, message)
