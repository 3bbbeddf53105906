"""The table of declared model families: :class:`Family` and :func:`register`.

The lowest part of the family registry: what a family declares and the one table where it
is registered, checked on registration. The package's families are registered here by
:mod:`ldr_opennmt.models.catalog`, a user module's by its ``@register_family``; everything
else (finding a family, loading the package's and the user modules, the capabilities read
from a tiny model) is :mod:`ldr_opennmt.registry`, which users import (it re-exports these
names). Below both, so that the catalog registers without importing the registry that loads
it. Standard library only.
"""

import collections
import collections.abc
import dataclasses
import functools
import hashlib
import sys
from typing import Any, Callable, Mapping, Optional

from ldr_opennmt.errors import UserError

#: Sizes of the tiny models the tests, ``--list-families`` and the quick runs build.
TINY_TRANSFORMER = dict(num_layers=1, num_units=16, num_heads=2, ffn_inner_dim=32, dropout=0.0)
TINY_RNN = dict(embedding_size=16, hidden_size=16, dropout=0.0)
TINY_SIZES = {"transformer": TINY_TRANSFORMER, "rnn": TINY_RNN}

#: The named sizes, the one size table of every family (:meth:`Family.preset_arguments`):
#: ``paper``, the builders' defaults (the LDR paper's: 6+6 layers of 512 units, 8 heads, FFN
#: 2048; an RNN of 512-cell embeddings and 1024 cells); ``small``, the CPU size of the demo,
#: the tables and ``model_defs/small/`` (2+2 layers of 64 units, 4 heads, FFN 256; an RNN of
#: 64 and 128 cells). A family adds its own values to a size under the same name in its
#: :attr:`Family.presets` (LDR's ``small`` has domain regions of 4 cells).
PAPER = "paper"
SMALL = "small"
SIZES = {
    "transformer": {
        PAPER: dict(num_layers=6, num_units=512, num_heads=8, ffn_inner_dim=2048),
        SMALL: dict(num_layers=2, num_units=64, num_heads=4, ffn_inner_dim=256),
    },
    "rnn": {
        PAPER: dict(embedding_size=512, hidden_size=1024),
        SMALL: dict(embedding_size=64, hidden_size=128),
    },
}


#: The preset of the families with a tied variant: the decoder's output layer is the target
#: embedding table (the control of a tied row).
TIED = {"tied": {"share_target_embeddings": True}}


def sizes_only(count):
    """A parameter formula (:attr:`Family.parameter_count`) that ignores the size arguments
    of other families (the adapters' ``adapter_dim``)."""
    return lambda adapter_dim=2048, **sizes: count(**sizes)


def size_arguments(architecture, size):
    """The builder arguments of one named size (:data:`SIZES`) of one architecture."""
    return dict(SIZES[architecture][size])


@dataclasses.dataclass(frozen=True)
class Family:
    """One multi-domain method, as registered.

    Attributes:
      name: The registry key.
      builder: A callable returning a new, unbuilt model; its keyword arguments are the
        model sizes (``num_layers``, ``num_units``, ... for a Transformer).
      title: The name in tables (``"Factorized PA"``).
      paper: The paper the family implements (authors, year, venue), or where it comes
        from.
      summary: One sentence: the idea.
      architecture: ``"transformer"`` or ``"rnn"``: which size arguments the builder takes.
      tiny: Extra keyword arguments of the tiny model (e.g. ``domain_region_size=2``).
      stage1: For a family trained in two stages from another family's checkpoint, the
        name of that family (``mixed_transformer``), else ``None``.
      finetune: The ``finetune:`` mode that starts it from :attr:`stage1` (``"unfold"``
        or ``"base"``), or ``None``.
      parameter_count: ``f(**sizes) -> int`` in the Factorized paper's convention
        (:mod:`ldr_opennmt.analysis.parameters`), or ``None`` (no row in the table).
      presets: Named builder arguments (``{"tied": {"share_target_embeddings": True}}``),
        chosen by name in a model definition (:meth:`preset_arguments`); a preset named like
        a size of :data:`SIZES` adds the family's values to that size.
      benchmark: The benchmark's rows (``ldr-experiments bench``): ``{row: builder
        arguments}``, the arguments a dict or a callable of the benchmark's model size
        returning one (``ldr_experiments.systems``); ``None``: not benchmarked; empty: one
        row named after the family.
      module: Where it was registered (filled in by :func:`register_family`).
    """

    name: str
    builder: Callable[..., Any]
    title: str
    paper: str
    summary: str
    architecture: str = "transformer"
    tiny: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    stage1: Optional[str] = None
    finetune: Optional[str] = None
    parameter_count: Optional[Callable[..., int]] = None
    presets: Mapping[str, Mapping[str, Any]] = dataclasses.field(default_factory=dict)
    benchmark: Optional[Mapping[str, Any]] = dataclasses.field(default_factory=dict)
    module: str = ""

    @property
    def short_name(self):
        """The family's short name in tables and commands: the last word of its title,
        lowercased, with the words of a parenthesized qualifier appended (``Factorized
        PA``: ``pa``, ``Residual adapters``: ``adapters``, ``LDR (RNN)``: ``ldr_rnn``).
        :func:`find` resolves it; two families with the same short name are reached by
        their names only."""
        title, _, qualifier = self.title.partition("(")
        words = (title.split() or [self.name])[-1:] + qualifier.replace(")", " ").split()
        return "_".join("".join(c if c.isalnum() else "_" for c in w.lower()) for w in words)

    def build(self, **sizes):
        """A new model of this family (the builder's defaults, overridden by ``sizes``)."""
        return self.builder(**sizes)

    def build_tiny(self, **overrides):
        """A tiny model of this family (the tests' size: one layer of 16 units); an override
        replaces the family's own tiny value (``dropout=0`` over a tiny ``dropout``)."""
        sizes = dict(TINY_SIZES[self.architecture])
        sizes.update(self.tiny)
        sizes.update(overrides)
        return self.builder(**sizes)

    def preset_names(self):
        """The presets :meth:`preset_arguments` accepts: the sizes of :data:`SIZES` and the
        family's own :attr:`presets`."""
        return list(dict.fromkeys(list(SIZES[self.architecture]) + list(self.presets)))

    def preset_arguments(self, *names):
        """The builder arguments of named presets, applied in order: a size of :data:`SIZES`
        (with the family's values of the same name), or one of the family's :attr:`presets`
        (``("small", "tied")``: the CPU size, then the tied output layer).

        Raises:
          UserError: on a preset the family does not have, naming those it has.
        """
        arguments = {}
        for name in names:
            if name not in self.preset_names():
                raise UserError(
                    "family %s has no preset %r (its presets: %s)"
                    % (self.name, name, ", ".join(self.preset_names()))
                )
            arguments.update(SIZES[self.architecture].get(name, {}))
            arguments.update(self.presets.get(name, {}))
        return arguments

    def preset(self, *names, **overrides):
        """A builder of this family's model at named presets (:meth:`preset_arguments`),
        then :obj:`overrides`, called with no argument: what ``onmt-main --model FILE``
        calls as ``FILE``'s ``model`` (``model = family.preset("small", "tied")``)."""
        return functools.partial(self.builder, **dict(self.preset_arguments(*names), **overrides))


_FAMILIES = collections.OrderedDict()
_ARCHITECTURES = tuple(TINY_SIZES)
_FINETUNE_MODES = ("unfold", "base")


def _check(family):
    where = family.module or "<unknown module>"
    if not family.name or not family.name.replace("_", "").isalnum():
        raise UserError(
            "%s: family name %r: use letters, digits and underscores" % (where, family.name)
        )
    if not callable(family.builder):
        raise UserError("%s: family %s: the builder is not callable" % (where, family.name))
    if family.architecture not in _ARCHITECTURES:
        raise UserError(
            "%s: family %s: architecture must be one of %s, got %r"
            % (where, family.name, ", ".join(_ARCHITECTURES), family.architecture)
        )
    if (family.stage1 is None) != (family.finetune is None):
        raise UserError(
            "%s: family %s: stage1 and finetune go together (the stage-1 family and the "
            "finetune mode that starts from it)" % (where, family.name)
        )
    if family.finetune is not None and family.finetune not in _FINETUNE_MODES:
        raise UserError(
            "%s: family %s: finetune must be one of %s, got %r"
            % (where, family.name, ", ".join(_FINETUNE_MODES), family.finetune)
        )
    for field in ("title", "paper", "summary"):
        if not isinstance(getattr(family, field), str) or not getattr(family, field).strip():
            raise UserError("%s: family %s: %s is required" % (where, family.name, field))
    for preset, arguments in family.presets.items():
        if not isinstance(arguments, collections.abc.Mapping) or not all(
            isinstance(k, str) for k in arguments
        ):
            raise UserError(
                "%s: family %s: preset %r must map argument names to values, got %r"
                % (where, family.name, preset, arguments)
            )


def register(family):
    """Registers :obj:`family` (a :class:`Family`).

    A name is registered once. Registering it again is accepted only for the same family:
    the same builder object, or a builder of the same qualified name defined in a file of
    the same contents (``onmt-main`` imports a model definition a second time as its copy
    ``model_dir/model_description.py``; a file named both by ``user_modules`` and by
    ``--model`` is imported under two module names), with the same declaration. Anything
    else, a builder whose code merely equals the first one's included, is refused.

    Raises:
      UserError: on an invalid declaration or a name another family holds.
    """
    _check(family)
    previous = _FAMILIES.get(family.name)
    if previous is not None and not _same_family(previous, family):
        raise UserError(
            "family %s is registered twice: by %s and by %s (a name is registered once: "
            "choose another name)" % (family.name, previous.module, family.module)
        )
    _FAMILIES[family.name] = family
    _DIGESTS[family.name] = _source_digest(family.builder)
    return family


#: The declaration fields that a second registration of the same family repeats.
_DECLARATION = ("title", "paper", "summary", "architecture", "stage1", "finetune")


#: The SHA-256 of the file defining each registered builder, read when it registered.
_DIGESTS = {}


def _same_family(previous, family):
    if any(getattr(previous, f) != getattr(family, f) for f in _DECLARATION):
        return False
    if previous.builder is family.builder:
        return True
    # The same function imported twice from byte-identical files (the model definition
    # and its copy): same qualified name, same file contents.
    names = [getattr(f.builder, "__qualname__", None) for f in (previous, family)]
    digests = [_DIGESTS.get(previous.name), _source_digest(family.builder)]
    return None not in names + digests and names[0] == names[1] and digests[0] == digests[1]


def _source_digest(builder):
    """SHA-256 of the file that defines :obj:`builder`, or ``None`` if unknown."""
    path = getattr(getattr(builder, "__code__", None), "co_filename", None)
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except (OSError, TypeError):
        return None


def register_family(name, **declaration):
    """Decorator form of :func:`register` for a builder function.

    Args:
      name: The family name.
      **declaration: The other fields of :class:`Family` (``title``, ``paper``,
        ``summary`` are required).

    Returns:
      The decorator; the decorated builder is returned unchanged.
    """

    caller = sys._getframe(1).f_globals.get("__name__", "")

    def _decorate(builder):
        module = declaration.pop("module", None) or origin(builder, caller)
        register(Family(name=name, builder=builder, module=module, **declaration))
        return builder

    return _decorate


def origin(builder, caller=""):
    """Where a family is registered: a user module's file as the user named it, else the
    registering module's name (the builder's when unknown: a ``functools.partial``'s
    function's)."""
    module = caller or getattr(getattr(builder, "func", builder), "__module__", None) or ""
    return _module_files.get(module, module)


#: The module names of the user modules loaded from files -> the path as the user named it
#: (:func:`ldr_opennmt.registry.load_user_module` fills it).
_module_files = {}
