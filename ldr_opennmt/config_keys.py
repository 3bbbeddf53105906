"""The configuration keys the package adds to OpenNMT-tf's, in one declarative table.

:data:`KEYS` names each key with its section, type, range, default and one line of
help. :func:`check_config` reads it to check a run configuration before anything is
written (``Runner`` under ``ldr-main`` and every command of the package; the
``data`` and ``params`` sections under stock ``onmt-main`` too, when the model is
initialized), and the documentation's configuration reference is generated from it:
the checks and the reference cannot drift apart.

Checked here: the type and range of each key, and a key of the package found in a
section that does not read it (``params: domain_sampling_alpha`` would be ignored
without a word: it is read under ``train:``). :func:`check_known` refuses, in each file, a key
that neither the package nor OpenNMT-tf reads (:mod:`ldr_opennmt.onmt_keys`), with "did you
mean" for a near miss: ``params: domain_trainig``, ``train: max_stpe`` and a top-level
``parms:`` trained the defaults without a word (issue 71). Deeper checks of a key's contents (the
corpora entries, the domain list, the ensemble weights) stay with the code that reads
it, and run before anything is written too.
"""

import collections
import difflib
import math
import os
import re

from ldr_opennmt import onmt_keys
from ldr_opennmt.errors import UserError

Key = collections.namedtuple("Key", ["section", "name", "type", "range", "default", "help"])
Key.__doc__ = """One configuration key of the package.

Attributes:
  section: The section that reads it (``data``, ``train``, ``params``, ``infer``,
    ``finetune``), or :data:`TOP_LEVEL`.
  name: The key.
  type: ``"bool"``, ``"int"``, ``"float"``, ``"str"``, ``"list"`` or ``"mapping"``;
    several types are separated by ``" or "``.
  range: For numbers: ``(minimum, maximum)`` (``None`` for no bound), inclusive; for
    strings: a tuple of the accepted values or ``None``.
  default: The default, as documentation (the code that reads the key applies it).
  help: One line for the reference.
"""

#: The section name of the keys read at the top level of a run configuration.
TOP_LEVEL = "(top level)"

KEYS = (
    Key(TOP_LEVEL, "user_modules", "list or str", None, None,
        "Python files or module names that register model families, imported before"
        " anything else: their code runs with your rights in every command that reads the"
        " configuration (ldr-main, ldr-eval --system NAME=their.yml, ldr-export, ...), as"
        " fairseq's --user-dir does; name only code you trust"),
    Key(TOP_LEVEL, "opus_sources", "mapping", None, None,
        "ldr-data build opus --config FILE: each domain's OPUS zip (a path, a URL, or"
        " {url, sha256}); read by ldr-data only, ignored by training"),
    Key("data", "domains", "list", None, "the order of train_corpora",
        "declared domain names; a label's id is its index (letters, digits, -, _, .)"),
    Key("data", "train_corpora", "mapping or list", None, None,
        "per-domain training corpora: {domain: {source: FILE, target: FILE}} (ldr-main)"),
    Key("data", "eval_corpora", "mapping or list", None, None,
        "per-domain dev sets, scored one by one (ldr-main)"),
    Key("data", "domain_batches", "bool", None, "true with several train_corpora",
        "each training batch comes from one domain (Procedure 1's sampling)"),
    Key("data", "keep_empty_targets", "bool", None, False,
        "keep training pairs whose target is empty (dropped by default)"),
    Key("data", "domain_regions", "int", (1, None), "len(domains) + reserved regions",
        "number of domain regions; set from the checkpoint when domains are appended"),
    Key("data", "ensemble_weights", "mapping or list", None, None,
        "weights of the ens-learned view ensemble (written by ldr-eval fit-ensemble)"),
    Key("train", "domain_sampling_alpha", "float", (0, None), 1.0,
        "P(domain i) proportional to |C_i|^alpha (0.5: the LDR paper's LDR^0.5)"),
    Key("params", "domain_training", "str",
        ("procedure1", "joint", "summed", "general", "domains"), "the family's default",
        "procedure1 (two passes per batch), joint, summed (one loss of both passes), or one half"),
    Key("params", "summed_generic_weight", "float or str or mapping", None, 0.5,
        "summed: w in (1 - w) L_domain + w L_generic; corpus_share: L_domain + p(d) L_generic "
        "(p(d): the domain's share of the training data); a mapping domain: p(d)"),
    Key("params", "domain_classifier_loss_weight", "float", (0, None),
        "the model's argument", "weight w of the domain classifier loss (ML, AdvL)"),
    Key("params", "gradient_reversal_steps", "int", (0, None), "the model's argument (10000)",
        "AdvL: steps N of the reversal weight's ramp from 0 (Ganin-Lempitsky); 0: constant"),
    Key("params", "gradient_reversal_scale", "float", (0, None), "the model's argument (1)",
        "AdvL: the final reversal weight lambda the ramp reaches"),
    Key("params", "maximum_source_length", "int", (1, None), 1024,
        "longest source at inference, in tokens; longer inputs are truncated with a warning"),
    Key("infer", "domain_posterior", "bool", None, False,
        "the domain classifier also prints each domain's probability"),
    Key("finetune", "base", "str", None, None,
        "the trained model directory (or checkpoint) to continue from"),
    Key("finetune", "domain", "str", None, "all corpora",
        "the domain whose corpus the fine-tuning uses"),
    Key("finetune", "steps", "int", (1, None), None, "number of fine-tuning steps"),
    Key("finetune", "unfold", "bool", None, False,
        "Factorized stage 2: copy the general blocks into every domain, then train those"),
)  # fmt: skip

#: The sections OpenNMT-tf reads, where a key of the package may be misplaced.
SECTIONS = ("data", "train", "eval", "infer", "score", "params", "finetune")
#: Sections that belong to the package alone: every key in them must be in :data:`KEYS`.
OWN_SECTIONS = ("finetune",)

_BY_NAME = collections.defaultdict(list)
for _key in KEYS:
    _BY_NAME[_key.name].append(_key)


def keys(section=None):
    """The keys of the table, or those of one section."""
    return [key for key in KEYS if section is None or key.section == section]


def _type_ok(value, type_name):
    for name in type_name.split(" or "):
        if name == "bool" and isinstance(value, bool):
            return True
        if name == "int" and isinstance(value, int) and not isinstance(value, bool):
            return True
        if name == "float" and isinstance(value, (int, float)) and not isinstance(value, bool):
            return True
        if name == "str" and isinstance(value, str):
            return True
        if name == "list" and isinstance(value, (list, tuple)):
            return True
        if name == "mapping" and isinstance(value, dict):
            return True
    return False


def check_value(key, value):
    """Checks one value against its key's type and range.

    Returns:
      The value (a float for ``float`` keys).

    Raises:
      UserError: ``SECTION: KEY must be ..., got VALUE``.
    """
    where = key.name if key.section == TOP_LEVEL else "%s: %s" % (key.section, key.name)
    if not _type_ok(value, key.type):
        article = "an" if key.type[0] in "aeiou" else "a"
        raise UserError("%s must be %s %s, got %r" % (where, article, key.type, value))
    if key.type == "float":
        value = float(value)
        if not math.isfinite(value):
            raise UserError("%s must be a finite number, got %s" % (where, value))
    if key.range is None:
        return value
    if isinstance(value, str):
        if value not in key.range:
            raise UserError("%s must be one of %s, got %r" % (where, ", ".join(key.range), value))
        return value
    low, high = key.range
    if low is not None and value < low:
        raise UserError("%s must be >= %s, got %s" % (where, low, value))
    if high is not None and value > high:
        raise UserError("%s must be <= %s, got %s" % (where, high, value))
    return value


def check_section(section, values):
    """Checks the package's keys in one section of a configuration.

    Args:
      section: The section name.
      values: Its contents (a dict, or ``None``).

    Raises:
      UserError: on a section that is not a mapping, a value out of its type or range,
        a key of the package in a section that does not read it, or an unknown key in
        a section of the package's own.
    """
    if values is None:
        return
    if not isinstance(values, dict):
        raise UserError("%s: must be a mapping of keys, got %r" % (section, values))
    for name, value in values.items():
        candidates = _BY_NAME.get(name, [])
        own = [key for key in candidates if key.section == section]
        if own:
            if value is not None:
                check_value(own[0], value)
        elif (
            candidates
            and section not in OWN_SECTIONS
            and all(key.section not in OWN_SECTIONS for key in candidates)
        ):
            raise UserError(
                "%s: %s is not read here (it would be ignored): write %s"
                % (
                    section,
                    name,
                    " or ".join(
                        name if key.section == TOP_LEVEL else "%s: %s" % (key.section, name)
                        for key in candidates
                    ),
                )
            )
        elif section in OWN_SECTIONS:
            raise UserError(
                "%s: unknown key %r (known: %s)"
                % (section, name, ", ".join(key.name for key in keys(section)))
            )


def check_config(config, where="the configuration"):
    """Checks every section of a run configuration (see :func:`check_section`).

    Args:
      config: The configuration (a dict).
      where: The files it comes from, for a top level that is not a mapping.

    Raises:
      UserError: on the first error.
    """
    if not isinstance(config, dict):
        raise UserError("%s: a configuration is a mapping of sections" % where)
    for section in SECTIONS:
        check_section(section, config.get(section))
    for key in keys(TOP_LEVEL):
        if config.get(key.name) is not None:
            check_value(key, config[key.name])


#: Keys that user modules declare (:func:`declare`): ``{(section, name)}``.
_DECLARED = set()


def declare(section, name):
    """Declares a configuration key that a user module's family or inputter reads, so that
    :func:`check_known` accepts it.

    Args:
      section: ``"data"``, ``"params"``, ... or ``None`` for the top level.
      name: The key.
    """
    _DECLARED.add((section, name))


def _package_reads(section, name):
    where = TOP_LEVEL if section is None else section
    return any(key.section == where for key in _BY_NAME.get(name, ())) or (
        section is None and name in OWN_SECTIONS
    )


def _reads(section, name):
    return isinstance(name, str) and (
        onmt_keys.reads(section, name)
        or _package_reads(section, name)
        or (section, name) in _DECLARED
    )


def _known_names(section):
    where = TOP_LEVEL if section is None else section
    found = onmt_keys.names(section) | {key.name for key in keys(where)}
    if section is None:
        found.update(OWN_SECTIONS)
    return found | {name for s, name in _DECLARED if s == section}


def _elsewhere(section, name):
    """The sections (``"train:"``, ``"the top level"``) that read :obj:`name`, but not
    :obj:`section`."""
    places = []
    for other in (None,) + SECTIONS:
        if other != section and _reads(other, name):
            places.append("the top level" if other is None else "%s:" % other)
    return places


def _key_line(text, section, name):
    """The line (1-based) of :obj:`name` under :obj:`section` (``None``: the top level) in a
    configuration's :obj:`text`, or ``None``."""
    inside = section is None
    for number, line in enumerate(text.splitlines(), 1):
        if line[:1] not in ("", " ", "\t", "#"):  # A key at the top level.
            if section is None and re.match(r"^%s\s*:" % re.escape(name), line):
                return number
            inside = bool(re.match(r"^%s\s*:" % re.escape(section or ""), line))
        elif inside and section is not None:
            if re.match(r"^\s+%s\s*:" % re.escape(name), line):
                return number
    return None


def unknown_key(section, name):
    """The message of a key that nobody reads in :obj:`section` (``None``: the top level)."""
    where = "" if section is None else "%s: " % section
    elsewhere = _elsewhere(section, name)
    if elsewhere:
        return "%s%s is not read here (it would be ignored): write it under %s" % (
            where,
            name,
            " or ".join(elsewhere),
        )
    hint = ""
    close = difflib.get_close_matches(str(name), sorted(_known_names(section)), n=1, cutoff=0.7)
    if close:
        hint = " (did you mean %s?)" % close[0]
    return (
        "%sunknown key %r%s: neither OpenNMT-tf nor ldr-opennmt reads it, so it would be "
        "ignored (docs/configuration.md)" % (where, name, hint)
    )


def check_known(config, path=None, text=None):
    """Refuses a key that neither OpenNMT-tf nor the package reads (or a user module
    declared: :func:`declare`), at the top level and directly under each section.

    Args:
      config: One configuration file's contents (a dict).
      path: The file, named in the message (with the key's line when :obj:`text` is given).
      text: The file's text (read from :obj:`path` when not given).

    Raises:
      UserError: ``FILE:LINE: SECTION: unknown key 'NAME' (did you mean ...?): ...``.
    """
    if not isinstance(config, dict):
        return

    def _refuse(section, name):
        source = text
        if source is None and path and os.path.isfile(path):
            with open(path, encoding="utf-8", errors="replace") as f:
                source = f.read(1 << 20)  # Read again for the line of the message only.
        line = _key_line(source, section, str(name)) if source is not None else None
        prefix = "%s:%d: " % (path, line) if line else ("%s: " % path if path else "")
        raise UserError(prefix + unknown_key(section, name))

    for name, values in config.items():
        if not _reads(None, name):
            _refuse(None, name)
        if name in OWN_SECTIONS or name not in SECTIONS or not isinstance(values, dict):
            continue  # The package's own sections are checked by check_section.
        for key in values:
            if not _reads(name, key):
                _refuse(name, key)


#: OpenNMT-tf's own reference of the configuration keys.
OPENNMT_CONFIGURATION_URL = "https://opennmt.net/OpenNMT-tf/configuration.html"


def _sentence(text):
    """:obj:`text` with a final full stop (its first word may be a value: kept as it is)."""
    return text if text.endswith(".") else text + "."


def markdown_reference():
    """The configuration reference of the package's keys (Markdown), generated from
    :data:`KEYS`, one definition (MyST's definition lists) per key under a heading per
    section: ``docs/configuration.md`` is this text (``python -m
    ldr_opennmt.config_keys > docs/configuration.md`` writes it; a test fails when it
    differs)."""

    def _range(key):
        if key.range is None:
            return ""
        if isinstance(key.range[0], str):
            return ", ".join("`%s`" % value for value in key.range)
        low, high = key.range
        return " and ".join(
            part
            for part in (
                ">= %s" % low if low is not None else "",
                "<= %s" % high if high is not None else "",
            )
            if part
        )

    lines = [
        "# Configuration keys added by ldr-opennmt",
        "",
        "Generated from `ldr_opennmt/config_keys.py` (`KEYS`), the table that also checks",
        "them: every key below is checked for its type and range before anything is",
        "written, and a key found in a section that does not read it is refused.",
        "All other keys are OpenNMT-tf's: see [its configuration reference]"
        "(%s)." % OPENNMT_CONFIGURATION_URL,
        "",
        "A key that neither OpenNMT-tf nor ldr-opennmt reads is refused by every command",
        "(`ldr-main`, `onmt-main` with the package's model definitions, `ldr-eval`, ...),",
        "naming its file and line, with the nearest known key:",
        "`run.yml:3: train: unknown key 'max_stpe' (did you mean max_step?): ...`.",
        "OpenNMT-tf's keys are listed in `ldr_opennmt/onmt_keys.py`; a family or inputter of",
        "your own (`user_modules`) that reads a key of its own declares it with",
        '`ldr_opennmt.config_keys.declare("params", "my_key")` when it is imported.',
    ]
    for section in [TOP_LEVEL] + [s for s in SECTIONS if keys(s)]:
        lines += ["", "## %s" % ("Top level" if section == TOP_LEVEL else "`%s`" % section)]
        for key in keys(section):
            facts = [key.type]
            if _range(key):
                facts.append(_range(key))
            if key.default is not None:
                facts.append("default: %s" % key.default)
            lines += ["", "`%s` (%s)" % (key.name, "; ".join(facts))]
            lines.append(": %s" % _sentence(key.help))
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(markdown_reference(), end="")
