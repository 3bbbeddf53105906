"""The family registry: every multi-domain method is declared here once, by name.

A *family* is a way of building a multi-domain model (LDR, Factorized PA, domain
mixing, ...). The package registers its own families in
:mod:`ldr_opennmt.models.catalog`; a researcher registers a new one the same way, from a
file of their own, without editing the package:

.. code-block:: python

    import opennmt

    from ldr_opennmt import registry, upstream
    from ldr_opennmt.models import MultiDomainTransformer
    from ldr_opennmt.models.sequence_to_sequence import transformer_arguments

    upstream.install()  # onmt-main's patches: this file is also a model definition.

    @registry.register_family(
        "bias_transformer",
        title="Domain output bias",
        paper="(this experiment)",
        summary="A Transformer whose output layer adds one bias vector per domain.",
    )
    def bias_transformer(num_layers=6, num_units=512, num_heads=8, ffn_inner_dim=2048,
                         dropout=0.1):
        return MultiDomainTransformer(
            opennmt.inputters.WordEmbedder(num_units),
            opennmt.inputters.WordEmbedder(num_units),
            **transformer_arguments(num_layers, num_units, num_heads, ffn_inner_dim, dropout),
        )

    def model():  # what onmt-main --model calls
        return bias_transformer()

(``examples/domain_bias/domain_bias.py`` puts the bias layer in; ``docs/adding-a-method.md``
builds it step by step.)

Everything that lists families reads this registry: the catalog, ``ldr-main
--list-families`` (:mod:`ldr_opennmt.cli.families`), ``ldr-analyze parameters``, the
experiments (``ldr_experiments``, which keep the repository's model definition files per
family in ``ldr_experiments/systems.py``), the tests' family list and the documentation. A
family is described here, and only here (with its presets and benchmark rows); what an
experiment does with it is the experiment's. Capabilities the model class already states
(label policy, training modes, the need for a base model, CTranslate2 folding, ensembles of
views) are read from a tiny instance by the capability probe (:mod:`ldr_opennmt.probe`, above
the models and the export), never written a second time here.

A user module (a Python file, or an importable module name) is loaded by
:func:`load_user_module`: by ``onmt-main --model FILE`` itself (the model definition is
the module), by the top-level configuration key ``user_modules`` (``ldr-main``,
``ldr-eval``) and by the ``--user_module`` option of the commands that list families.

Importing this module imports no TensorFlow (``tests/upstream/test_patches.py`` checks it). What a
family declares and the table it is registered in are :mod:`ldr_opennmt.family_table`
(re-exported here: ``registry.Family``, ``registry.register_family``), below both this module
and the catalog. The families are loaded when first asked for, from the entry points of group
``ldr_opennmt.families`` of the installed packages (:data:`FAMILIES_GROUP`): the package's own
names its catalog in ``setup.py``, and a package of yours can name its module there too, so
that installing it registers its families. The registry imports nothing above it.
"""

import hashlib
import importlib
import importlib.util
import os
import sys
import threading
import time
from importlib import metadata

from ldr_opennmt import errors
from ldr_opennmt.errors import UserError

# The table of declared families, re-exported: users register with registry.register_family.
from ldr_opennmt.family_table import (  # noqa: F401
    _FAMILIES,
    SIZES,
    TINY_RNN,
    TINY_SIZES,
    TINY_TRANSFORMER,
    Family,
    _module_files,
    register,
    register_family,
)

#: The configuration key (top level) naming user modules to load.
USER_MODULES_KEY = "user_modules"


def get(name):
    """The family :obj:`name`.

    Raises:
      UserError: naming the registered families, when there is none by that name.
    """
    _load_builtin()
    family = _FAMILIES.get(name)
    if family is None:
        raise UserError(
            "unknown model family %r (registered: %s; a family of your own is registered by "
            "its module: --user_module FILE or the configuration key %s)"
            % (name, ", ".join(_FAMILIES), USER_MODULES_KEY)
        )
    return family


def find(name):
    """The family :obj:`name`, or the one family whose :attr:`Family.short_name` it is
    (``ttm``, ``adapters``: the short names of ``ldr-analyze parameters`` and of the
    experiments' directories).

    Raises:
      UserError: when no family, or more than one, answers to :obj:`name`.
    """
    _load_builtin()
    if name in _FAMILIES:
        return _FAMILIES[name]
    matches = [family for family in _FAMILIES.values() if family.short_name == name]
    if len(matches) > 1:
        raise UserError(
            "%r is the short name of several families (%s): name one of them"
            % (name, ", ".join(family.name for family in matches))
        )
    return matches[0] if matches else get(name)


def preset(name, *presets, **overrides):
    """A builder of family :obj:`name`'s model at named presets, then :obj:`overrides`: what
    a model definition file gives ``onmt-main --model`` as its ``model``
    (:meth:`Family.preset`)::

        model = registry.preset("ldr_transformer", "small", "tied")
        model = registry.preset("ldr_transformer", "small", domain_region_size=8)

    Raises:
      UserError: on an unknown family or preset.
    """
    return find(name).preset(*presets, **overrides)


def names():
    """The registered family names, in registration order (the package's first)."""
    _load_builtin()
    return list(_FAMILIES)


def families():
    """The registered :class:`Family` entries, in registration order."""
    _load_builtin()
    return list(_FAMILIES.values())


#: The entry-point group of the packages that register families: the package's own
#: (``setup.py``: ``ldr_opennmt = ldr_opennmt.models.catalog``) and any installed package of
#: yours (``docs/adding-a-method.md``).
FAMILIES_GROUP = "ldr_opennmt.families"
#: The package's own entry point: loaded first, so that its families come first.
OWN_ENTRY_POINT = "ldr_opennmt"
_LOADED = []
_LOCK = threading.RLock()


def entry_points():
    """The installed entry points of :data:`FAMILIES_GROUP`, the package's own first (absent
    when the package is importable but not installed)."""
    points = list(metadata.entry_points(group=FAMILIES_GROUP))
    if OWN_ENTRY_POINT not in [point.name for point in points]:
        # The metadata of a package is that of its first copy on sys.path: a stale
        # ldr_opennmt.egg-info (an old build in the clone, seen from the clone's root) hides
        # the installation's. Every copy's metadata, then.
        points += [
            point
            for distribution in metadata.distributions()
            for point in distribution.entry_points
            if point.group == FAMILIES_GROUP and point.name == OWN_ENTRY_POINT
        ][:1]
    return sorted(points, key=lambda point: point.name != OWN_ENTRY_POINT)


def _load_builtin():
    # The families register when the modules the installed packages name under
    # FAMILIES_GROUP are imported (the package's catalog imports TensorFlow): when first
    # asked, so that importing the registry imports no TensorFlow. The registry names no
    # module above it: the catalog is found in the package's metadata, as a plugin's would be
    # (no import goes up: tests/test_layering.py).
    # One thread loads them; another asking meanwhile waits for all of them (the lock is
    # re-entrant: a module being loaded may ask for the families itself).
    with _LOCK:
        if _LOADED:
            return
        points = entry_points()
        if not points or points[0].name != OWN_ENTRY_POINT:
            raise UserError(
                "no family is registered: the entry point %r of group %r is missing (ldr-opennmt "
                "is importable but not installed: pip install -e . in its clone, or bash "
                "run/setup_env.sh)" % (OWN_ENTRY_POINT, FAMILIES_GROUP)
            )
        _LOADED.append(True)
        for point in points:
            try:
                if point.name == OWN_ENTRY_POINT:
                    point.load()
                else:  # Another package's families: its code fails as a user module's does.
                    what = "the families of entry point %r (%s, group %r)" % (
                        point.name,
                        point.value,
                        FAMILIES_GROUP,
                    )
                    _run_user_code(what, metadata.EntryPoint.load, point)
            except BaseException:
                _LOADED.clear()
                raise


def load_user_module(spec, base_dir=None):
    """Imports a user module that registers families, once.

    Args:
      spec: A path to a Python file (``experiments/my_method.py``) or an importable module
        name (``my_package.my_method``).
      base_dir: The directory a relative file path is relative to (the directory of the
        configuration file naming it); default the current directory. A relative path
        found from the current directory only (the rule before configurations' directories
        were) is still loaded from there.

    Returns:
      The names of the families the module registered (possibly none: a module may add
      layers only).

    Raises:
      UserError: naming the module, when it cannot be found or fails to import.
    """
    _load_builtin()
    before = set(_FAMILIES)
    if spec.endswith(".py") or os.sep in spec or "/" in spec:
        relative = not os.path.isabs(spec) and base_dir is not None
        path = os.path.join(base_dir, spec) if relative else spec
        if relative and not os.path.isfile(path) and os.path.isfile(spec):
            path = spec
        path = os.path.abspath(path)
        if os.path.isdir(path):
            raise UserError(
                "user module %s: a directory, not a Python file: give the .py file in it that"
                " registers the family (e.g. %s), or a module name importable from sys.path"
                % (spec, os.path.join(spec, "family.py"))
            )
        if not os.path.isfile(path):
            where = " (relative to %s)" % os.path.abspath(base_dir) if relative else ""
            if os.path.exists(path):
                raise UserError("user module %s: not a regular file" % spec)
            raise UserError("user module %s: file not found%s" % (spec, where))
        digest = hashlib.sha256(path.encode("utf-8")).hexdigest()[:12]
        name = "ldr_opennmt_user_%s_%s" % (
            "".join(c if c.isalnum() else "_" for c in os.path.basename(path)[:-3]),
            digest,
        )
        if name not in sys.modules:
            _module_files[name] = spec
            module_spec = importlib.util.spec_from_file_location(name, path)
            module = importlib.util.module_from_spec(module_spec)
            sys.modules[name] = module
            try:
                _run_user_code("user module %s" % spec, module_spec.loader.exec_module, module)
            except BaseException:
                del sys.modules[name]
                raise
    else:
        _run_user_code("user module %s" % spec, importlib.import_module, spec)
    return [name for name in _FAMILIES if name not in before]


#: Seconds after which a user module still being imported is named on standard error (a
#: module that hangs at import would otherwise hang the command without a word).
SLOW_IMPORT_S = 30.0


def _say_still_importing(what, started):
    sys.stderr.write(
        "%s: note: %s is still being imported after %.0f s (importing only defines"
        " and registers: does its code wait for something? Ctrl-C stops the command)\n"
        % (errors.PACKAGE_PROG, what, time.monotonic() - started)
    )
    sys.stderr.flush()


def _run_user_code(what, function, argument):
    """Runs the import of a user's code (a user module, another package's entry point): any
    failure of it (an exception, a ``sys.exit``) is one :class:`UserError` line starting with
    :obj:`what` (``"user module X"``) and naming the cause; an import that takes longer than
    :data:`SLOW_IMPORT_S` is named in one line meanwhile (and Ctrl-C stops it with one line:
    :func:`ldr_opennmt.errors.run_main`)."""
    timer = threading.Timer(SLOW_IMPORT_S, _say_still_importing, (what, time.monotonic()))
    timer.daemon = True
    timer.start()
    try:
        return function(argument)
    except UserError:
        raise
    except ModuleNotFoundError as e:
        raise UserError("%s: %s" % (what, e)) from e
    except SystemExit as e:
        raise UserError(
            "%s: it called sys.exit(%r) while being imported (a user module only defines and"
            " registers)" % (what, e.code)
        ) from None
    except Exception as e:  # Any failure of user code: one line naming the module.
        first = (str(e).strip().splitlines() or [""])[0]
        raise UserError("%s: %s: %s" % (what, type(e).__name__, first)) from e
    finally:
        timer.cancel()


def load_configured_modules(config, base_dir=None):
    """Loads the modules of the top-level key ``user_modules`` of a run configuration.

    Args:
      config: The run configuration (a dict).
      base_dir: The directory of the configuration file that gives the key: relative
        file paths are relative to it (default: the current directory), see
        :func:`load_user_module`.

    Returns:
      The names of the families they registered.
    """
    specs = (config or {}).get(USER_MODULES_KEY) or []
    if isinstance(specs, str):
        specs = [specs]
    registered = []
    for spec in specs:
        registered += load_user_module(str(spec), base_dir=base_dir)
    return registered


#: The names that moved to the capability probe (:mod:`ldr_opennmt.probe`, issue 57 item 4).
MOVED_TO_PROBE = (
    "Capabilities",
    "capabilities",
    "model_capabilities",
    "LABEL_NEEDED",
    "LABEL_IGNORED",
    "LABEL_NONE",
)


def __getattr__(name):
    # A one-line pointer for code written against the registry before the probe moved out
    # of it (importing the probe here would import the export: it is above the registry).
    if name in MOVED_TO_PROBE:
        raise AttributeError(
            "ldr_opennmt.registry.%s moved to ldr_opennmt.probe.%s (from ldr_opennmt import "
            "probe)" % (name, name)
        )
    raise AttributeError("module %r has no attribute %r" % (__name__, name))
