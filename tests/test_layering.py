"""The package's layers: no module imports a layer above its own, nor another part of its
own layer (``docs/architecture.md``, "The package")."""

import ast
import os

import tensorflow as tf

PACKAGE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "ldr_opennmt")

#: Bottom to top. A module may import its own package and the layers below it.
LAYERS = (
    ("errors",),
    (
        "utils",
        "names",
        "config_loader",
        "config_keys",
        "locks",
        "checkpoints",
        "gpu",
        "registry",
        "stamps",
    ),
    ("domains", "compat", "onmt_main", "reports", "domain_record"),
    ("layers", "assets", "data", "ensembles", "guards", "stock_record"),
    ("inputters", "hooks"),
    ("models",),
    ("training",),
    ("serving", "evaluation", "analysis"),
    ("checks",),
    ("cli",),
)
LEVEL = {name: level for level, names in enumerate(LAYERS) for name in names}


def _part(module):
    """The top-level part of ``ldr_opennmt.<part>...``."""
    return module.split(".")[1] if module.count(".") else None


def _imports(path):
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + ["%s.%s" % (node.module, a.name) for a in node.names]
        else:
            continue
        for name in names:
            if name.startswith("ldr_opennmt.") and _part(name) in LEVEL:
                yield node.lineno, _part(name)


def upward_imports():
    """``file:line: part -> part`` for every import that goes up or sideways."""
    found = []
    for directory, _, files in os.walk(PACKAGE):
        for name in sorted(files):
            if not name.endswith(".py"):
                continue
            path = os.path.join(directory, name)
            relative = os.path.relpath(path, os.path.dirname(PACKAGE))
            parts = relative[: -len(".py")].split(os.sep)
            if len(parts) == 2 and parts[1] == "__init__":
                continue  # The package root.
            own = parts[1]
            for line, target in _imports(path):
                if target != own and LEVEL[target] >= LEVEL[own]:
                    found.append("%s:%d: %s -> %s" % (relative, line, own, target))
    return found


class LayeringTest(tf.test.TestCase):
    def test_every_part_has_a_layer(self):
        parts = {
            name[: -len(".py")] if name.endswith(".py") else name
            for name in os.listdir(PACKAGE)
            if not name.startswith("_") and (name.endswith(".py") or "." not in name)
        }
        self.assertEqual(parts, set(LEVEL))

    def test_no_import_goes_up(self):
        self.assertEqual(upward_imports(), [])


if __name__ == "__main__":
    tf.test.main()
