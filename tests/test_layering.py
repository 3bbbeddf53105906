"""The package's layers: no module imports a layer above its own, nor another part of its
own layer (``docs/architecture.md``, "The package"); and no import circle, in the library
nor in the experiments.

Imports are read from the source, wherever they are (module level or inside a function),
with the dynamic ones: a string literal that names a module of the package
(``importlib.import_module("ldr_opennmt.models.catalog")``, ``"ldr_opennmt.x" in
sys.modules``) counts as an import of it. A name computed at run time
(``"ldr_experiments." + name``) cannot be seen.
"""

import ast
import os
import re
import tempfile
import textwrap

import tensorflow as tf

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = os.path.join(ROOT, "ldr_opennmt")

#: Bottom to top. A module may import its own package and the layers below it.
LAYERS = (
    ("errors", "onmt_keys"),
    (
        "utils",
        "names",
        "config_loader",
        "config_keys",
        "locks",
        "checkpoints",
        "gpu",
        "stamps",
        "family_table",
    ),
    ("domains", "reports", "domain_record", "registry"),
    ("layers", "assets", "data", "ensembles", "upstream"),
    ("inputters", "hooks"),
    ("models",),
    ("training",),
    ("serving",),
    ("export",),
    ("probe",),
    ("evaluation", "analysis"),
    ("checks",),
    ("cli",),
)
LEVEL = {name: level for level, names in enumerate(LAYERS) for name in names}


#: A string that names a module of the project (a dynamic import when the module exists).
MODULE_NAME = re.compile(r"(ldr_opennmt|ldr_experiments)(\.\w+)*")

#: Known circles of the experiments, to be broken by their owners (issue 46): the test fails
#: on any other circle, and when one of these is gone (remove it here).
KNOWN_CIRCLES = {}


def package_modules(root, package):
    """``{module name: (path, is package)}`` of every module of :obj:`package` under
    :obj:`root`."""
    found = {}
    for directory, _, files in os.walk(os.path.join(root, package)):
        for name in files:
            if not name.endswith(".py"):
                continue
            path = os.path.join(directory, name)
            parts = os.path.relpath(path, root)[: -len(".py")].split(os.sep)
            is_package = parts[-1] == "__init__"
            found[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return found


def module_imports(root, package):
    """``{module: {imported module of the package: first line}}``: static imports anywhere in
    the module (relative ones resolved; ``from package import name`` is the module
    ``package.name`` when there is one) and string literals naming a module."""
    known = package_modules(root, package)
    graph = {}
    for name, (path, is_package) in known.items():
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
        here = name if is_package else name.rpartition(".")[0]
        targets = {}

        def add(target, line, name=name, targets=targets):
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name and target.split(".")[0] == package:
                targets.setdefault(target, line)

        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    add(alias.name, node.lineno)
            elif isinstance(node, ast.ImportFrom):
                module = node.module
                if node.level:
                    base = here.split(".")
                    base = base[: len(base) - node.level + 1]
                    module = ".".join(base + ([node.module] if node.module else []))
                for alias in node.names:
                    full = "%s.%s" % (module, alias.name)
                    add(full if full in known else module, node.lineno)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                if MODULE_NAME.fullmatch(node.value) and node.value in known:
                    add(node.value, node.lineno)
        graph[name] = targets
    return graph


def circles(graph):
    """The import circles of :obj:`graph` (``{module: imported modules}``): each a sorted
    list of the modules that import one another (strongly connected components of two
    modules or more), in sorted order."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(module):
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for target in sorted(graph.get(module, ())):
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in on_stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return sorted(found)


def _part(module):
    """The top-level part of ``ldr_opennmt.<part>...``."""
    return module.split(".")[1] if module.count(".") else None


def upward_imports():
    """``file:line: part -> part`` for every import that goes up or sideways (lazy ones
    included: there is none on purpose)."""
    found = []
    known = package_modules(ROOT, "ldr_opennmt")
    for module, targets in sorted(module_imports(ROOT, "ldr_opennmt").items()):
        own = _part(module)
        if own is None:
            continue  # The package root.
        for target, line in sorted(targets.items()):
            part = _part(target)
            if part is None or part == own:
                continue
            if LEVEL[part] >= LEVEL[own]:
                path = os.path.relpath(known[module][0], ROOT)
                found.append("%s:%d: %s -> %s" % (path, line, own, part))
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

    def test_the_registry_names_no_module_above_it(self):
        # It loads the package's families from the installed metadata (the entry point of
        # setup.py), not by importing the catalog (issue 57: no import goes up, lazy or not).
        graph = module_imports(ROOT, "ldr_opennmt")
        self.assertNotIn("ldr_opennmt.models.catalog", graph["ldr_opennmt.registry"])
        self.assertFalse(
            [
                target
                for target in graph["ldr_opennmt.registry"]
                if _part(target) and LEVEL[_part(target)] > LEVEL["registry"]
            ]
        )
        # The capability probe reads the fold's verdict from above the export (issue 57 item
        # 4): the registry does not import it.
        self.assertIn("ldr_opennmt.export.folding", graph["ldr_opennmt.probe"])
        # The catalog registers into the table below the registry, not into the registry.
        self.assertNotIn("ldr_opennmt.registry", graph["ldr_opennmt.models.catalog"])


class ServingRuntimeTest(tf.test.TestCase):
    def test_the_serving_runtime_reaches_no_model_nor_the_export(self):
        # Issue 57 item 4: what ldr-serve, ldr-translate and the Translator import, however
        # deep, holds no model, layer, training, seam to OpenNMT-tf or export-time code.
        graph = module_imports(ROOT, "ldr_opennmt")
        reached, todo = set(), [m for m in graph if m.startswith("ldr_opennmt.serving")]
        while todo:
            module = todo.pop()
            if module not in reached:
                reached.add(module)
                todo.extend(graph.get(module, ()))
        forbidden = ("models", "layers", "training", "upstream", "export", "inputters")
        self.assertEqual(sorted(m for m in reached if _part(m) in forbidden), [])
        self.assertIn("ldr_opennmt.serving.server", reached)


class CircleTest(tf.test.TestCase):
    def test_no_circle_in_the_library(self):
        self.assertEqual(circles(module_imports(ROOT, "ldr_opennmt")), [])

    def test_no_circle_in_the_experiments(self):
        found = circles(module_imports(ROOT, "ldr_experiments"))
        self.assertEqual(found, KNOWN_CIRCLES.get("ldr_experiments", []))

    def test_a_planted_circle_is_found(self):
        # a imports b at its top, b imports a by name inside a function, c imports b only,
        # d and e import each other relatively: two circles, c in none.
        files = {
            "ldr_opennmt/__init__.py": "",
            "ldr_opennmt/a.py": "from ldr_opennmt import b\n",
            "ldr_opennmt/b.py": """\
                import importlib


                def late():
                    return importlib.import_module("ldr_opennmt.a")
                """,
            "ldr_opennmt/c.py": "import ldr_opennmt.b\n",
            "ldr_opennmt/sub/__init__.py": "",
            "ldr_opennmt/sub/d.py": "from . import e\n",
            "ldr_opennmt/sub/e.py": "from .d import something\n",
        }
        with tempfile.TemporaryDirectory() as root:
            for path, text in files.items():
                os.makedirs(os.path.dirname(os.path.join(root, path)), exist_ok=True)
                with open(os.path.join(root, path), "w", encoding="utf-8") as f:
                    f.write(textwrap.dedent(text))
            graph = module_imports(root, "ldr_opennmt")
            self.assertEqual(
                circles(graph),
                [
                    ["ldr_opennmt.a", "ldr_opennmt.b"],
                    ["ldr_opennmt.sub.d", "ldr_opennmt.sub.e"],
                ],
            )
            self.assertEqual(graph["ldr_opennmt.b"], {"ldr_opennmt.a": 5})
            # Without the dynamic import, no circle through a and b.
            with open(os.path.join(root, "ldr_opennmt/b.py"), "w", encoding="utf-8") as f:
                f.write("NAME = 'ldr_opennmt.a module'\n")  # A sentence, not a module name.
            self.assertEqual(
                circles(module_imports(root, "ldr_opennmt")),
                [["ldr_opennmt.sub.d", "ldr_opennmt.sub.e"]],
            )


if __name__ == "__main__":
    tf.test.main()
