"""The capability probe: what a family can do, read from a tiny instance of its model class.

The registry (:mod:`ldr_opennmt.registry`) says what a family *is* (its builder, title,
paper, stages, presets); what its model class already states (the label policy, the training
modes, the need for a base model, ensembles of domain views) and what the CTranslate2 fold
says of its weights are read here from a model, never declared a second time:
:func:`capabilities` for a family (a tiny model, built once per family), and
:func:`model_capabilities` for any model (``ldr-eval`` reads the trained model it loads).

Above the models and the export (the fold's own check, :mod:`ldr_opennmt.export.folding`),
so that the registry below them imports neither when it is asked for a family
(``tests/test_layering.py``). ``ldr-main --list-families``, the family check, ``ldr-eval``,
the experiments and the documentation read it.
"""

import dataclasses
import os
import tempfile
from typing import Optional, Tuple

from ldr_opennmt import registry
from ldr_opennmt.errors import UserError
from ldr_opennmt.export import folding

#: How a family treats domain labels at inference (:func:`capabilities`).
LABEL_NEEDED = "needed"
LABEL_IGNORED = "ignored"
LABEL_NONE = "none (labels for training only)"


@dataclasses.dataclass(frozen=True)
class Capabilities:
    """What a family can do, read from a tiny instance of its model class.

    Attributes:
      labels: :data:`LABEL_NEEDED` (its translation reads the label; ``generic`` selects
        no domain parameters), :data:`LABEL_IGNORED` or :data:`LABEL_NONE`.
      domain_training: The ``params: domain_training`` modes it supports.
      default_domain_training: The mode when none is configured.
      requires_base: Trained on a frozen base model (``finetune: base``).
      ctranslate2: ``None`` when it folds into one CTranslate2 model per domain, else why
        the export refuses it.
      ensembles: ``None`` when it translates ensembles of domain views, else why not.
      domain_parameters: Whether it has domain-specific parameters.
      domain_tokens: Whether its targets start with a domain token (Target Token
        Mixing), so that its target vocabulary must hold the declared domains' tokens:
        the model class states its ``domain_tokens`` (a property).
    """

    labels: str
    domain_training: Tuple[str, ...]
    default_domain_training: str
    requires_base: bool
    ctranslate2: Optional[str]
    ensembles: Optional[str]
    domain_parameters: bool
    domain_tokens: bool = False

    @property
    def stages(self):
        """The training stages, in words."""
        return "one" if not self.requires_base else "two (a frozen base, then its blocks)"


_CAPABILITIES = {}


def capabilities(name):
    """The :class:`Capabilities` of the family :obj:`name` (cached; builds a tiny model and
    reads it with :func:`model_capabilities`)."""
    family = registry.get(name)
    if family.name not in _CAPABILITIES or _CAPABILITIES[family.name][0] is not family:
        _CAPABILITIES[family.name] = (family, model_capabilities(_initialized_tiny(family)))
    return _CAPABILITIES[family.name][1]


def model_capabilities(model):
    """The :class:`Capabilities` of a model instance, from what its class states.

    The one place where the label policy and the other capabilities are worked out:
    :func:`capabilities` reads a tiny instance of a family with it, ``ldr-eval`` the
    trained model it loads (:class:`ldr_opennmt.evaluation.systems.System`).

    Args:
      model: A multi-domain model, initialized or not (a family that creates its
        domain layers in ``initialize`` states them once initialized).
    """
    domain_inputter = getattr(getattr(model, "features_inputter", None), "domain_inputter", None)
    has_domain = bool(model.domain_layers()) or model.reads_labels_without_domain_layers
    if domain_inputter is not None and domain_inputter.optional_labels:
        labels = LABEL_NONE
    elif domain_inputter is None or not domain_inputter.required or not has_domain:
        labels = LABEL_IGNORED
    else:
        labels = LABEL_NEEDED
    return Capabilities(
        labels=labels,
        domain_training=tuple(model.domain_training_modes),
        default_domain_training=model.default_domain_training,
        requires_base=bool(getattr(model, "requires_base", False)),
        ctranslate2=_ct2_refusal(model),
        ensembles=model.ensemble_refusal_reason(),
        domain_parameters=bool(model.domain_layers()),
        domain_tokens=isinstance(getattr(type(model), "domain_tokens", None), property),
    )


def _initialized_tiny(family):
    """A tiny model of :obj:`family`, initialized on two domains and a three-word
    vocabulary and built (some families create their domain layers in ``initialize``, once
    the vocabulary is known; the CTranslate2 fold is checked on the built weights). A
    family whose ``initialize`` needs more (TTM: its domain tokens in the vocabulary) is
    read uninitialized."""
    model = family.build_tiny()
    with tempfile.TemporaryDirectory() as directory:
        vocabulary = os.path.join(directory, "vocab.txt")
        with open(vocabulary, "w", encoding="utf-8") as f:
            f.write("<blank>\n<s>\n</s>\na\nb\n")
        data = {
            "domains": ["d0", "d1"],
            "source_vocabulary": vocabulary,
            "target_vocabulary": vocabulary,
        }
        try:
            model.initialize(data, params={})
        except Exception:  # noqa: BLE001 - the uninitialized model is read instead.
            return family.build_tiny()
        try:
            model.create_variables()
        except Exception:  # noqa: BLE001 - read unbuilt (the fold is then unchecked).
            pass
    return model


def _ct2_refusal(model):
    """Why the CTranslate2 export refuses :obj:`model`, or ``None``: what the fold's own
    check (:func:`ldr_opennmt.export.folding.check_foldable`) says of it, the family's
    stated :attr:`ctranslate2_refusal` first. An unbuilt model is checked as far as its
    structure allows (the layers' folds need their weights)."""
    if getattr(model, "ctranslate2_refusal", None):
        return model.ctranslate2_refusal
    try:
        folding.check_foldable(model)
    except UserError as e:
        return str(e)
    except ValueError:  # Unbuilt: every check that does not need the weights passed.
        pass
    return None
