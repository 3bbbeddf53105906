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
* a document whose top level is not a mapping.

Stock ``onmt-main`` reads its ``--config`` with OpenNMT-tf's own loader before any
code of this package runs: ``ldr-main`` is the protected entry point.
"""

import os

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


def parse_config_text(text, path):
    """Parses one configuration document (a mapping), bounded as the module says.

    Args:
      text: The YAML text.
      path: Where it comes from, for the errors.

    Returns:
      The configuration (a dict).

    Raises:
      UserError: on invalid YAML, too many nodes, or a top level that is not a mapping.
    """
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            raise UserError("%s: empty configuration" % path)
        _expanded_size(node, path)
        config = loader.construct_document(node)
    except yaml.YAMLError as e:
        raise UserError("%s: invalid YAML: %s" % (path, " ".join(str(e).split()))) from None
    except RecursionError:
        raise UserError("%s: the configuration is nested too deeply" % path) from None
    finally:
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
