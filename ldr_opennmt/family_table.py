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
import dataclasses
import hashlib
import sys
from typing import Any, Callable, Mapping, Optional

from ldr_opennmt.errors import UserError

#: Sizes of the tiny models the tests, ``--list-families`` and the quick runs build.
TINY_TRANSFORMER = dict(num_layers=1, num_units=16, num_heads=2, ffn_inner_dim=32, dropout=0.0)
TINY_RNN = dict(embedding_size=16, hidden_size=16, dropout=0.0)
TINY_SIZES = {"transformer": TINY_TRANSFORMER, "rnn": TINY_RNN}


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
        module = declaration.pop("module", None) or _origin(builder, caller)
        register(Family(name=name, builder=builder, module=module, **declaration))
        return builder

    return _decorate


def _origin(builder, caller):
    """Where a family is registered: a user module's file as the user named it, else the
    registering module's name (the builder's when unknown)."""
    module = caller or getattr(builder, "__module__", None) or ""
    return _module_files.get(module, module)


#: The module names of the user modules loaded from files -> the path as the user named it
#: (:func:`ldr_opennmt.registry.load_user_module` fills it).
_module_files = {}
