"""The one YAML loader of the package: bounded in size and in alias expansion.

A run configuration is a few kilobytes. PyYAML's ``safe_load`` builds aliases as
shared references, cheap in memory, but whatever then walks or copies the
configuration (OpenNMT-tf merges configurations, dumps them for auto-tuning, deep
copies them) expands every alias: nine levels of ten aliases (the "billion laughs"
shape) hang the process and take gigabytes. Every configuration the package reads
goes through :func:`load_config_file`, which refuses, before anything is built:

* a path that is missing, a directory, empty, larger than :data:`MAX_BYTES` or not
  UTF-8;
* a document whose node graph, with every alias expanded, has more than
  :data:`MAX_NODES` nodes (counted on the composed graph, where an alias is a shared
  node, so counting costs the size of the file, not of the expansion), or an alias
  that contains itself;
* a document whose top level is not a mapping;
* a scalar that PyYAML cannot build: a date that does not exist (``2001-13-01``), an
  int of more than ``sys.get_int_max_str_digits()`` digits (in any base), an explicit
  tag that does not fit its value (``!!int abc``, ``!!bool maybe``), a character YAML
  does not allow (a control character);
* a key that repeats in a mapping (PyYAML would keep the last value without a word),
  naming both lines.

Every refusal is one :class:`~ldr_opennmt.errors.UserError` line naming the file, and
the line where YAML gives one: ``FILE:LINE: invalid YAML: ...``.

Stock ``onmt-main`` reads its ``--config`` with OpenNMT-tf's own loader before any
code of this package runs: ``ldr-main`` is the protected entry point, and the package's
model definitions read stock ``onmt-main``'s ``--config`` files again through this loader
when they install the package's patches (:func:`ldr_opennmt.upstream.patches.install`).
"""

import functools
import os
import sys

import yaml
from opennmt import config as config_util

from ldr_opennmt.errors import UserError, not_utf8_error

#: The largest configuration file read (bytes).
MAX_BYTES = 1 << 20
#: The largest configuration, as nodes with every alias expanded. The default corpus'
#: configurations have fewer than 200; a paper-size OPUS configuration about 300.
MAX_NODES = 100_000


def _expanded_size(root, path):
    """The number of nodes of :obj:`root` with every alias expanded, stopping past
    :data:`MAX_NODES`.

    Raises:
      UserError: past the limit, or on an alias that contains itself.
    """
    sizes = {}
    active = set()

    def _size(node):
        key = id(node)
        if key in sizes:
            return sizes[key]
        if key in active:
            raise UserError(
                "%s: a YAML alias contains itself (line %d)" % (path, node.start_mark.line + 1)
            )
        active.add(key)
        total = 1
        if isinstance(node, yaml.SequenceNode):
            children = node.value
        elif isinstance(node, yaml.MappingNode):
            children = [item for pair in node.value for item in pair]
        else:
            children = []
        for child in children:
            total += _size(child)
            if total > MAX_NODES:
                raise UserError(
                    "%s: the configuration expands to more than %d YAML nodes (aliases used "
                    "too often, e.g. nested aliases at line %d): refused"
                    % (path, MAX_NODES, child.start_mark.line + 1)
                )
        active.discard(key)
        sizes[key] = total
        return total

    return _size(root)


#: What PyYAML's scalar constructors raise on a value that does not fit its tag (besides
#: ``ConstructorError``): ``int("abc")``, ``datetime(2001, 13, 1)``, a ``!!bool`` or
#: ``!!timestamp`` that its table or pattern does not know, an empty ``!!int``.
_CONSTRUCTION_ERRORS = (ValueError, KeyError, AttributeError, IndexError, TypeError, OverflowError)
_YAML_TAG = "tag:yaml.org,2002:"
#: Python's default limit on the digits of an int it converts (``sys.int_info``).
_DEFAULT_DIGITS = sys.int_info.default_max_str_digits
#: The longest excerpt of a value in a message (characters).
_EXCERPT = 40


@functools.lru_cache(maxsize=4)
def _power_of_ten(digits):
    return 10**digits


def _excerpt(value):
    """:obj:`value` quoted for a one-line message, cut after :data:`_EXCERPT` characters."""
    if not isinstance(value, str):
        return type(value).__name__
    if len(value) <= _EXCERPT:
        return repr(value)
    return "%r... (%d characters)" % (value[:_EXCERPT], len(value))


class _Loader(yaml.SafeLoader):
    """``yaml.SafeLoader`` whose constructors fail only with ``ConstructorError``, marked
    with the node that failed, and that refuses ints too long to be printed."""

    def construct_object(self, node, deep=False):
        try:
            return super().construct_object(node, deep=deep)
        except _CONSTRUCTION_ERRORS as e:
            tag = node.tag.replace(_YAML_TAG, "!!")
            reason = str(e) if isinstance(e, ValueError) else "not a valid %s" % tag
            raise yaml.constructor.ConstructorError(
                None,
                None,
                "cannot make %s from %s: %s" % (tag, _excerpt(node.value), reason),
                node.start_mark,
            ) from None

    def construct_yaml_int(self, node):
        """PyYAML's ints, without the ones ``str()`` refuses (Python limits the digits
        of an int printed in base 10, but not of one read in base 16), nor sexagesimal
        ints of thousands of parts (``1:0:0...``: PyYAML builds them in quadratic time)."""
        limit = sys.get_int_max_str_digits()
        too_long = ValueError("an int of more than %d digits" % limit)
        value = node.value
        parts = (limit or _DEFAULT_DIGITS) // 2  # 60**parts has about 1.8 * parts digits.
        if isinstance(value, str) and value.count(":") >= parts:
            raise ValueError("a sexagesimal int of more than %d parts" % parts)
        try:
            value = super().construct_yaml_int(node)
        except ValueError as e:
            if str(e).startswith("Exceeds the limit"):
                raise too_long from None
            raise
        if limit and abs(value) >= _power_of_ten(limit):
            raise too_long
        return value

    def construct_mapping(self, node, deep=False):
        """PyYAML's mapping, refusing a key that repeats: PyYAML keeps the last value of a
        repeated key without a word (a second ``params:`` section would replace the first,
        a domain given twice under ``train_corpora`` would keep only its last files). Keys
        merged in by ``<<:`` may be overridden, as YAML means them to be."""
        if isinstance(node, yaml.MappingNode):
            seen = {}
            for key_node, _ in node.value:
                if key_node.tag == _YAML_TAG + "merge" or not isinstance(key_node, yaml.ScalarNode):
                    continue
                key = self.construct_object(key_node)
                try:
                    first = seen.setdefault(key, key_node)
                except TypeError:  # An unhashable key: PyYAML refuses it itself.
                    continue
                if first is not key_node:
                    raise yaml.constructor.ConstructorError(
                        None,
                        None,
                        "key %s repeats the one of line %d (a repeated key would replace the"
                        " first: give it once)"
                        % (
                            _excerpt(key) if isinstance(key, str) else repr(key)[:_EXCERPT],
                            first.start_mark.line + 1,
                        ),
                        key_node.start_mark,
                    )
        return super().construct_mapping(node, deep=deep)


_Loader.add_constructor(_YAML_TAG + "int", _Loader.construct_yaml_int)


def _yaml_error(path, text, error):
    """The :class:`UserError` of a ``yaml.YAMLError``: ``PATH:LINE: invalid YAML: ...``
    (the line of the problem when YAML marks one), on one line."""
    line = None
    if isinstance(error, yaml.MarkedYAMLError):
        mark = error.problem_mark or error.context_mark
        line = mark.line + 1 if mark is not None else None
        parts = []
        if error.context:
            context = error.context
            if error.context_mark is not None and error.context_mark.line + 1 != line:
                context += " (line %d)" % (error.context_mark.line + 1)
            parts.append(context)
        if error.problem:
            parts.append(error.problem)
        if error.note:
            parts.append(error.note)
        detail = ", ".join(parts)
    elif isinstance(error, yaml.reader.ReaderError):
        if error.encoding == "unicode":  # Read from text: a character index.
            line = text.count("\n", 0, error.position) + 1
        detail = str(error).split("\n")[0]
    else:
        detail = str(error)
    where = path if line is None else "%s:%d" % (path, line)
    return UserError(
        "%s: invalid YAML: %s" % (where, " ".join(detail.split()) or type(error).__name__)
    )


def parse_config_text(text, path):
    """Parses one configuration document (a mapping), bounded as the module says.

    Args:
      text: The YAML text.
      path: Where it comes from, for the errors.

    Returns:
      The configuration (a dict).

    Raises:
      UserError: on invalid YAML (a value that does not fit its tag included), too many
        nodes, or a top level that is not a mapping.
    """
    loader = None
    try:
        # The constructor already reads the text: it refuses control characters.
        loader = _Loader(text)
        node = loader.get_single_node()
        if node is None:
            raise UserError("%s: empty configuration" % path)
        _expanded_size(node, path)
        config = loader.construct_document(node)
    except yaml.YAMLError as e:
        raise _yaml_error(path, text, e) from None
    except RecursionError:
        raise UserError("%s: the configuration is nested too deeply" % path) from None
    finally:
        if loader is not None:
            loader.dispose()
    if not isinstance(config, dict):
        raise UserError(
            "%s: a configuration is a mapping of sections (data:, train:, ...), got a %s"
            % (path, type(config).__name__)
        )
    return config


def load_config_file(path):
    """Reads one YAML configuration file.

    Raises:
      UserError: see the module documentation.
    """
    if not os.path.exists(path):
        raise UserError("%s: no such configuration file" % path)
    if os.path.isdir(path):
        raise UserError("%s: a directory, not a configuration file" % path)
    size = os.path.getsize(path)
    if size > MAX_BYTES:
        raise UserError(
            "%s: %d bytes: too large for a configuration (at most %d)" % (path, size, MAX_BYTES)
        )
    with open(path, "rb") as f:
        data = f.read(MAX_BYTES + 1)
    if len(data) > MAX_BYTES:  # A file that grew, or a device.
        raise UserError("%s: too large for a configuration (at most %d bytes)" % (path, MAX_BYTES))
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise not_utf8_error(path, data, 1, e) from None
    if not text.strip():
        raise UserError("%s: empty configuration" % path)
    return parse_config_text(text, path)


def load_run_config(config_paths, config=None):
    """Reads and merges run configuration files, as ``opennmt.config.load_config`` does
    (the rightmost file takes priority), through :func:`load_config_file`.

    Args:
      config_paths: The configuration files.
      config: A configuration to merge into (default: a new one).

    Returns:
      The merged configuration.

    Raises:
      UserError: on the first file refused.
    """
    if config is None:
        config = {}
    for path in config_paths:
        config_util.merge_config(config, load_config_file(path))
    return config


def resolve_tokenizer_files(tokenization):
    """A tokenization configuration as ``opennmt.tokenizers.make_tokenizer`` takes it, with
    the files a configuration *file* names found beside it.

    OpenNMT-tf passes a file option (``bpe_model_path: bpe.en``) to pyonmttok as it is, and a
    relative path is then relative to the current directory. Here a relative path is first
    looked up in the directory of the configuration file (``ldr-data`` writes
    ``tokenizer.LANG.yml`` so, next to ``bpe.LANG``: a corpus directory can be moved or
    copied), then in the current directory, as OpenNMT-tf would; an absolute path that no
    longer exists (a corpus of an older ``ldr-data``, moved) is looked up by its name beside
    the configuration. Any other configuration (a dict, inline JSON, a path that is not a
    file) is returned as it is, and so is a file option found nowhere: OpenNMT-tf reports it.

    Args:
      tokenization: What ``make_tokenizer`` takes.

    Returns:
      :obj:`tokenization`, or the file's content (a dict) with its file options resolved.
    """
    if not isinstance(tokenization, str) or not tokenization or "://" in tokenization:
        return tokenization
    if not os.path.isfile(tokenization):
        return tokenization
    try:
        with open(tokenization, encoding="utf-8") as config_file:
            loaded = yaml.safe_load(config_file)
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return tokenization  # OpenNMT-tf reads it again and reports.
    if not isinstance(loaded, dict):
        return tokenization
    options = loaded.get("params") if "type" in loaded else loaded
    if not isinstance(options, dict):
        return tokenization
    directory = os.path.dirname(os.path.abspath(tokenization))
    changed = False
    for key, value in list(options.items()):
        if not (isinstance(value, str) and value and key.endswith("_path")):
            continue
        if os.path.isabs(value):
            candidates = [value, os.path.join(directory, os.path.basename(value))]
        else:
            candidates = [os.path.join(directory, value), os.path.abspath(value)]
        found = next((path for path in candidates if os.path.isfile(path)), None)
        if found is not None and found != value:
            options[key] = found
            changed = True
    return loaded if changed else tokenization


def resolve_tokenization(data_config):
    """:obj:`data_config` with each ``*_tokenization`` entry that is a configuration file
    given as :func:`resolve_tokenizer_files` returns it (a copy; the entries that need no
    change, and every other key, as they are).

    What the package's models pass to their inputters (:class:`ldr_opennmt.models.
    sequence_to_sequence.MultiDomainModel`), so that ``tokenizer.LANG.yml`` of ``ldr-data``
    finds its BPE model beside it under any command, stock ``onmt-main`` included, without
    replacing ``opennmt.tokenizers.make_tokenizer``.
    """
    if not isinstance(data_config, dict):
        return data_config
    resolved = dict(data_config)
    for key, value in data_config.items():
        if isinstance(key, str) and key.endswith("_tokenization"):
            resolved[key] = resolve_tokenizer_files(value)
    return resolved
