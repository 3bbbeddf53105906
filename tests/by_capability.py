"""The tests' families (:data:`tests.helpers.FAMILIES`) chosen by their capabilities.

A test of a property that every family with some capability must have (its label changes
the translation, it ensembles its domain views, Procedure 1 routes its gradients) is
parameterized over the families the registry says have it, so that a family registered
later is tested too. The test variants of a family (``ldr_transformer_target``) have
their family's capabilities.
"""

from ldr_opennmt import probe, registry
from tests import helpers


def family_name(name):
    """The registered family of an entry of :data:`tests.helpers.FAMILIES`."""
    return name if name in registry.names() else name.replace("_target", "")


def capabilities(name):
    """The :class:`ldr_opennmt.probe.Capabilities` of an entry of
    :data:`tests.helpers.FAMILIES`."""
    return probe.capabilities(family_name(name))


def families(predicate=None):
    """The entries of :data:`tests.helpers.FAMILIES` whose capabilities satisfy
    :obj:`predicate` (all by default), as ``parameterized.expand`` cases ``[(name,)]``."""
    return [
        (name,) for name in helpers.FAMILIES if predicate is None or predicate(capabilities(name))
    ]


def labels_needed(caps):
    """Its translation reads the label."""
    return caps.labels == probe.LABEL_NEEDED


def labels_not_read(caps):
    """Its translation does not read the label (Mixed models, and models that read
    labels for training only)."""
    return not labels_needed(caps)


def with_views(caps):
    """It translates ensembles of its domain views."""
    return caps.ensembles is None


def without_views(caps):
    """It refuses ensemble labels."""
    return not with_views(caps)
