"""The configuration keys the package's code reads, found in its source, against the reference.

The configuration reference (``docs/configuration.md``) is generated from
:data:`ldr_opennmt.config_keys.KEYS`. This module makes the other half of "cannot drift":
it reads the package's source (no import, no execution) and lists every key the code
reads from a run configuration section (``params.get("beam_width")``,
``config["data"]["domains"]``, ``"finetune" in config``, ...); a key found there that is
neither in ``KEYS`` nor one of OpenNMT-tf's own (read the same way from OpenNMT-tf's
installed source) fails the documentation build and ``tests/test_docs.py``.

How a read is recognised (``ast``): a call ``R.get(KEY, ...)``, ``R.pop(KEY, ...)`` or
``R.setdefault(KEY, ...)``, a subscript ``R[KEY]`` or a test ``KEY in R``, where ``KEY`` is
a string literal and the receiver ``R`` is a section of a run configuration:

- a name or attribute that names one (``params``, ``data_config``, ``self._params``, ...:
  :data:`SECTION_NAMES`);
- a section taken from a configuration (``config["data"]``, ``config.get("params") or
  {}``, ``self._config["train"]``), a configuration being a name or attribute in
  :data:`CONFIG_NAMES`;
- a variable assigned from one of those in the same module (``finetune =
  config.get("finetune") or {}``).

Reads through a computed key (``params.get(name)``) are not seen; every key of the
package is read with a literal today.
"""

import ast
import os

#: The sections of a run configuration (OpenNMT-tf's, and the package's ``finetune``).
SECTIONS = ("data", "train", "eval", "infer", "score", "params", "finetune")

#: Names of variables and attributes that hold one section.
SECTION_NAMES = {
    "params": "params",
    "_params": "params",
    "params_config": "params",
    "data_config": "data",
    "_data_config": "data",
    "train_config": "train",
    "_train_config": "train",
    "eval_config": "eval",
    "_eval_config": "eval",
    "infer_config": "infer",
    "_infer_config": "infer",
    "score_config": "score",
    "finetune_config": "finetune",
}

#: Names of variables and attributes that hold a whole run configuration.
CONFIG_NAMES = {"config", "_config", "run_config", "user_config", "auto_config", "merged"}

_READERS = ("get", "pop", "setdefault")

#: Methods of OpenNMT-tf's model API whose ``params`` argument is the ``infer`` section
#: (OpenNMT-tf passes ``config["infer"]`` to them), not ``params``.
INFER_PARAMS_METHODS = ("format_prediction", "print_prediction")

#: Dictionaries named like a configuration that are not one: ``{(file, key): reason}``
#: (file relative to the repository).
NOT_RUN_CONFIGURATION = {
    ("ldr_opennmt/assets.py", "mode"): "a pyonmttok tokenizer configuration",
}


def _name(node):
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _literal(node, constants=None, module=None):
    """A string literal, or a module-level string constant that names one
    (``CONFIG_KEY`` in its module, ``ensembles.CONFIG_KEY`` elsewhere)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if constants is None:
        return None
    if isinstance(node, ast.Name):
        if node.id in constants.get(module, {}):
            return constants[module][node.id]
        values = {c[node.id] for c in constants.values() if node.id in c}
        return values.pop() if len(values) == 1 else None
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return constants.get(node.value.id, {}).get(node.attr)
    return None


def module_constants(tree):
    """``{NAME: "value"}``: the module-level string constants of a module."""
    constants = {}
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            constants[node.targets[0].id] = node.value.value
    return constants


class _Scanner:
    def __init__(self, tree, constants=None, module=None):
        self.tree = tree
        self.constants = constants
        self.module = module
        self.aliases = {}  # variable name -> section, from assignments in this module
        self.reads = []  # (section, key, line)
        self.infer_params_lines = set()  # lines where ``params`` is the infer section
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and node.name in INFER_PARAMS_METHODS:
                self.infer_params_lines.update(range(node.lineno, node.end_lineno + 1))

    def section_of(self, node):
        """The section a receiver expression holds, ``"top"`` for a whole configuration,
        or ``None``."""
        if isinstance(node, ast.BoolOp) and node.values:  # config.get("data") or {}
            return self.section_of(node.values[0])
        name = _name(node)
        if name is not None:
            if isinstance(node, ast.Name) and name == "params":
                if node.lineno in self.infer_params_lines:
                    return "infer"
            if isinstance(node, ast.Name) and name in self.aliases:
                return self.aliases[name]
            if name in SECTION_NAMES:
                return SECTION_NAMES[name]
            if name in CONFIG_NAMES:
                return "top"
            return None
        key, receiver = None, None
        if isinstance(node, ast.Subscript):
            key, receiver = _literal(node.slice), node.value
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in _READERS
            and node.args
        ):
            key, receiver = _literal(node.args[0]), node.func.value
        if key in SECTIONS and self.section_of(receiver) == "top":
            return key
        return None

    def _collect_aliases(self):
        for _ in range(3):  # Aliases of aliases.
            for node in ast.walk(self.tree):
                if isinstance(node, ast.Assign) and len(node.targets) == 1:
                    target = node.targets[0]
                    if isinstance(target, ast.Name) and target.id not in SECTION_NAMES:
                        section = self.section_of(node.value)
                        if section in SECTIONS:
                            self.aliases[target.id] = section

    def scan(self):
        self._collect_aliases()
        for node in ast.walk(self.tree):
            key, receiver = None, None
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in _READERS
                and node.args
            ):
                key, receiver = _literal(node.args[0]), node.func.value
            elif isinstance(node, ast.Subscript):
                if isinstance(node.ctx, (ast.Store, ast.Del)):
                    continue  # Written, not read.
                key, receiver = _literal(node.slice), node.value
            elif (
                isinstance(node, ast.Compare)
                and len(node.ops) == 1
                and isinstance(node.ops[0], (ast.In, ast.NotIn))
            ):
                key, receiver = _literal(node.left), node.comparators[0]
            if key is None and receiver is not None:
                key_node = (
                    node.args[0]
                    if isinstance(node, ast.Call)
                    else node.slice if isinstance(node, ast.Subscript) else node.left
                )
                key = _literal(key_node, self.constants, self.module)
            if key is None:
                continue
            section = self.section_of(receiver)
            if section is not None:
                self.reads.append((section, key, node.lineno))
        return self.reads


def python_files(root):
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            if name.endswith(".py"):
                yield os.path.join(folder, name)


def scan_tree(root, relative_to=None):
    """``{(section, key): ["FILE:LINE", ...]}``: the configuration keys the Python files
    under ``root`` read (``section`` is ``"top"`` for a top-level key); keys given as
    module-level string constants are resolved."""
    trees = {}
    for path in python_files(root):
        with open(path, encoding="utf-8") as f:
            trees[path] = ast.parse(f.read(), path)
    constants = {}
    for path, tree in trees.items():
        module = os.path.splitext(os.path.basename(path))[0]
        constants.setdefault(module, {}).update(module_constants(tree))
    reads = {}
    for path, tree in trees.items():
        module = os.path.splitext(os.path.basename(path))[0]
        where = os.path.relpath(path, relative_to) if relative_to else path
        for section, key, line in _Scanner(tree, constants, module).scan():
            reads.setdefault((section, key), []).append("%s:%d" % (where, line))
    return reads


def opennmt_keys():
    """``{(section, key)}`` that OpenNMT-tf reads, scanned from its installed source the
    same way, plus the keys of its ``auto_config`` defaults."""
    import opennmt  # pylint: disable=import-outside-toplevel

    root = os.path.dirname(opennmt.__file__)
    keys = set(scan_tree(root))
    # The data annotations its inputters accept (accepted_annotations={"train_alignments":
    # ...}), and the defaults its models return from auto_config().
    for path in python_files(root):
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
        for node in ast.walk(tree):
            if isinstance(node, ast.keyword) and node.arg == "accepted_annotations":
                if isinstance(node.value, ast.Dict):
                    keys.update(("data", _literal(k)) for k in node.value.keys if _literal(k))
    keys |= _auto_config_keys()
    return keys


def _auto_config_keys():
    import opennmt  # pylint: disable=import-outside-toplevel

    keys = set()
    for model in (opennmt.models.TransformerBase(),):
        for section, values in model.auto_config(num_replicas=1).items():
            keys.add(("top", section))
            if isinstance(values, dict):
                keys.update((section, key) for key in values)
    return keys


def undocumented_keys(package_root, documented, upstream, top_level, repository=None):
    """The keys the package reads that no reference lists.

    Args:
      package_root: The package's folder.
      repository: The repository's folder (the files of :data:`NOT_RUN_CONFIGURATION`
        are relative to it; default: the package folder's parent).
      documented: ``{(section, key)}`` of the package's reference (``KEYS``).
      upstream: ``{(section, key)}`` OpenNMT-tf reads (:func:`opennmt_keys`).
      top_level: The package's top-level keys the reference lists.

    Returns:
      ``{(section, key): ["FILE:LINE", ...]}``; empty when every key is listed.
    """
    repository = repository or os.path.dirname(os.path.abspath(package_root))
    missing = {}
    for (section, key), places in sorted(scan_tree(package_root, repository).items()):
        places = [p for p in places if (p.rsplit(":", 1)[0], key) not in NOT_RUN_CONFIGURATION]
        if not places:
            continue
        if (section, key) in documented or (section, key) in upstream:
            continue
        if section == "top" and (key in SECTIONS or key in top_level):
            continue
        missing[(section, key)] = places
    return missing
